"""Type stubs of ordo's extension module (the Rust facade as Python objects)."""

__version__: str

class OrdoError(Exception):
    """An error of ordo: its message names the file, node, option or value at fault."""

def zoo_models() -> list[str]:
    """The names of the zoo's models."""

class Model:
    """A zoo model, an ONNX file, or a cost graph (plannable, not runnable)."""

    @staticmethod
    def zoo(
        name: str,
        *,
        small: bool = False,
        batch: int | None = None,
        seq_len: int | None = None,
    ) -> Model: ...
    @staticmethod
    def load(
        path_or_name: str,
        *,
        small: bool = False,
        batch: int | None = None,
        seq_len: int | None = None,
        dims: dict[str, int] | None = None,
        frozen: set[str] | None = None,
    ) -> Model: ...
    @staticmethod
    def from_costgraph_json(text: str, name: str = "cost graph") -> Model:
        """A cost graph from JSON text (ordo's node-link format)."""
    def in_precision(self, precision: str) -> Model:
        """``"fp32"``, or mixed precision: ``"bf16"`` or ``"fp16"`` (planned, not run)."""
    def training(self, optimizer: str = "momentum", loss: str | None = None) -> Model:
        """The training graph: forward, dX, dW and updates (`sgd`, `momentum`, `adam`);
        `loss="cross-entropy"` adds that loss to a graph that ends at its predictions."""
    @property
    def name(self) -> str: ...
    @property
    def nodes(self) -> int: ...
    @property
    def is_training(self) -> bool: ...
    @property
    def runnable(self) -> bool: ...
    @property
    def notes(self) -> list[str]: ...

class LayerGraph:
    """A profiled module's layers, the edges between them and their colocation groups."""

    def __init__(
        self,
        name: str,
        *,
        comm: tuple[float, float],
        device: str = "cpu",
        reps: int = 1,
        training: bool = True,
        split_backward: bool | str = False,
    ) -> None: ...
    def add_layer(
        self,
        name: str,
        *,
        op_type: str,
        forward_us: float,
        backward_us: float = 0.0,
        input_grad_us: float = 0.0,
        weight_grad_us: float = 0.0,
        temporary_bytes: int = 0,
        persistent_bytes: int = 0,
        output_bytes: int = 0,
    ) -> int: ...
    def add_edge(self, producer: int, consumer: int) -> None: ...
    def colocate(self, layer: int, owner: int) -> None: ...
    def model(self) -> Model: ...
    def training_model(self) -> Model: ...
    def shared_memory_forward_model(self) -> Model: ...
    def to_json(self) -> str: ...
    def training_json(self) -> str: ...
    @property
    def name(self) -> str: ...

class Target:
    """Devices to plan for, and how nodes are costed on them."""

    @staticmethod
    def uniform(
        devices: int, *, memory: int | str | None = None, cluster: str | None = None
    ) -> Target: ...
    @staticmethod
    def cluster(
        name: str,
        *,
        devices: int | None = None,
        memory: int | str | None = None,
        nodes: int | None = None,
    ) -> Target: ...
    def with_profile(self, path: str) -> Target: ...
    @property
    def devices(self) -> int: ...
    @property
    def memory(self) -> list[int]: ...

class Problem:
    """A model costed for a target under a memory mode."""

    def __init__(
        self,
        model: Model,
        target: Target,
        *,
        mode: str | None = None,
        optimizer: str = "momentum",
    ) -> None: ...
    @property
    def nodes(self) -> int: ...
    @property
    def devices(self) -> int: ...
    @property
    def costs(self) -> str: ...
    @property
    def node_names(self) -> list[str]: ...
    @property
    def node_times_us(self) -> list[int]: ...
    def lower_bound_us(self) -> int: ...

class Placement:
    """Each node's device and each device's order, with the placer's predicted step."""

    @property
    def algo(self) -> str: ...
    @property
    def device_of(self) -> dict[str, int]: ...
    @property
    def order(self) -> list[list[str]]: ...
    @property
    def makespan_us(self) -> int: ...
    @property
    def peak_memory_bytes(self) -> list[int]: ...
    @property
    def placement_seconds(self) -> float: ...
    @property
    def winner(self) -> str | None: ...
    def to_json(self) -> str: ...

class Planned:
    """A plan: streams, tasks, events and buffers per device."""

    @property
    def devices(self) -> int: ...
    @property
    def tasks(self) -> int: ...
    @property
    def description(self) -> str: ...
    @property
    def placement(self) -> Placement | None: ...
    def to_json(self) -> str: ...

class Report:
    """The simulator's prediction of a step."""

    @property
    def step_time_us(self) -> float: ...
    @property
    def lower_bound_us(self) -> float: ...
    @property
    def peak_memory_bytes(self) -> list[int]: ...
    @property
    def busy_fraction(self) -> list[float]: ...
    @property
    def tasks(self) -> list[tuple[str, float, float]]: ...
    def to_json(self) -> str: ...
    def chrome_trace(self) -> str: ...
    def gantt_svg(self) -> str: ...

class Runner:
    """A plan bound to CPU devices with real kernels, and the training state it advances."""

    def __init__(
        self,
        problem: Problem,
        planned: Planned,
        *,
        workers: int = 1,
        seed: int = 0,
        lr: float = 0.01,
    ) -> None: ...
    def step(self) -> float: ...
    def predict_us(self) -> float: ...
    @property
    def parameters(self) -> int: ...

def place(
    problem: Problem,
    algo: str = "auto",
    *,
    budget: float = 2.0,
    seed: int = 0,
    sct_threshold: float = 0.1,
) -> Placement: ...
def plan(
    problem: Problem,
    strategy: str = "auto",
    *,
    budget: float = 2.0,
    seed: int = 0,
    stages: int | None = None,
    micro_batches: int | None = None,
    schedule: str | None = None,
    replicas: int | None = None,
    first_k: int = 0,
    bucket_bytes: int = 0,
    modulo: int | None = None,
    action_overhead_us: float = 0.0,
) -> Planned: ...
def plan_placement(
    problem: Problem,
    device_of: dict[str, int],
    order: list[list[str]] | None = None,
    *,
    algo: str = "given",
) -> Planned: ...
def global_order(problem: Problem, planned: Planned) -> list[str]: ...
def pytorch_schedule(
    problem: Problem,
    *,
    stages: int,
    micro_batches: int,
    schedule: str = "1f1b",
    modulo: int | None = None,
) -> dict: ...
def data_parallel_plan(
    problem: Problem,
    *,
    replicas: int,
    first_k: int | str | None = None,
    bucket_bytes: int = 26214400,
    network_gbps: float | None = None,
    latency_us: float = 0.0,
    max_tries: int = 16,
    all_reduce: str = "ring",
) -> dict:
    """The data-parallel step of one replica's training problem: ``first_k`` (reverse
    first-k; ``"auto"`` or None: chosen by simulation), ``buckets`` (in issue order: ``layers``,
    ``gradients``, ``bytes``, ``deferred``) and ``predicted`` step times in µs."""

def plan_parallel(
    model: str,
    *,
    cluster: str,
    batch: int,
    gpus: int | None = None,
    nodes: int | None = None,
    seq_len: int | None = None,
    small: bool = False,
    precision: str = "fp32",
    optimizer: str = "adam",
    max_micro_batches: int = 64,
    tensor_parallel: int = 8,
    recompute: str = "auto",
    all_reduce: str = "nccl",
    exhaustive: bool = False,
    granularity: str = "block",
) -> dict:
    """The best data x tensor x pipeline plans of ``model`` on ``gpus`` GPUs of ``cluster``
    for a global ``batch`` (up to ``tensor_parallel`` tensor-parallel ranks per stage; the
    optimizer state sharded and ``recompute``'s activations recomputed where the whole does not
    fit), each simulated: ``candidates`` (fastest first), ``rejected`` (with a ``reason``),
    ``simulated``, ``pruned``, and the best plan's ``export`` (its PyTorch schedule ``csv``,
    ``stage_units``, ``tensor_groups``, ``pipeline_groups``, ``data_groups``). Each pipeline is
    simulated per ``granularity``: ``"block"`` (within about 1% of the node level, peaks a
    few percent higher), ``"node"``, or ``"auto"`` (per block past 200,000 node-level tasks)."""

def simulate(
    planned: Planned,
    *,
    channel: str = "tf",
    concurrent_kernels: bool = False,
    host_slowdown: float = 1.0,
) -> Report: ...
def reorder_threads(
    code_order: list[str],
    parents: dict[str, list[str]],
    device_of: dict[str, int],
    device_order: list[list[str]],
    *,
    criterion: str = "gpu-topo",
    global_order: list[str] | None = None,
) -> list[str]:
    """The layers the host leaves to wait on threads (Baechi-PyTorch's reordering)."""

class AssignerPlan:
    """A placement prepared for the Assigner's steps (``ordo.torch.distribute`` makes one);
    a layer's index is its node's in the problem."""

    @staticmethod
    def of_plan(problem: Problem, planned: Planned) -> AssignerPlan: ...
    @property
    def layers(self) -> list[str]:
        """The layers by index: the problem's node names."""
    @property
    def modules(self) -> list[str]:
        """The wrapped modules' qualified names; a module's index is what ``arrive`` takes."""
    def step(self, reorder: bool, criterion: str, runs_inline: list[bool]) -> HostStep: ...
    def begin(self, core: HostStep, step: object) -> None:
        """A step begins on this thread; the ``LayerCall`` wrappers find it until ``end``."""
    def end(self) -> None: ...

class HostStep:
    """One step's bookkeeping: the layers the host reached, their decisions, submissions."""

    def arrive(self, module: int, came_from: list[int] | None = None) -> tuple[int, int]:
        """The layer of this call of ``module`` and how it runs: 0 on the host now, 1 on the
        host after ``wait_submitted``, 2 on a thread of its own."""
    def wait_submitted(self, layer: int, timeout: float) -> bool:
        """Until what ``layer`` waits for has submitted; False when the step failed."""
    def mark_submitted(self, layer: int) -> None: ...
    def watching(self) -> None:
        """Layer calls go through the Python ``Step`` from now on."""
    def release_unreached(self) -> None: ...
    def fail(self) -> None: ...
    def unreached_dependency(self, roots: list[int]) -> tuple[int, int] | None: ...
    def code_order(self) -> list[str]: ...

class LayerCall:
    """A placed layer's ``forward`` as the Assigner wraps it (the common call made in Rust)."""

    def __init__(
        self, plan: AssignerPlan, module: int, forward: object, inplace: bool, tensor: type
    ) -> None: ...
    def __call__(self, *args: object, **kwargs: object) -> object: ...
