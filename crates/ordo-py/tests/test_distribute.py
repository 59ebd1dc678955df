"""ordo.torch.distribute: the Assigner runs a module as a placement says, with the seed's
reordering, and computes what the undistributed module computes, bitwise."""

import copy
import random
import threading

import pytest
import torch
from torch import nn

import ordo.torch as ot


class DagNet(nn.Module):
    """A module whose layers form a given DAG: layer `v` reads the sum of its parents'
    outputs (the input for a layer without parents); the model's code calls the layers in
    `code_order` (a topological order) and returns the sum of the layers nobody reads."""

    def __init__(self, parents: dict[str, list[str]], code_order: list[str], width: int = 4):
        super().__init__()
        self.parents, self.code_order = parents, code_order
        self.layers = nn.ModuleDict({v: nn.Linear(width, width) for v in code_order})

    def forward(self, x):
        out = {}
        for v in self.code_order:
            ps = self.parents.get(v, [])
            inp = x if not ps else sum(out[p] for p in ps)
            out[v] = self.layers[v](inp)
        read = {p for ps in self.parents.values() for p in ps}
        return sum(out[v] for v in self.code_order if v not in read)


def qualify(names):
    return [f"layers.{v}" for v in names]


def dag_placement(net, x, device_of, device_order):
    profiled = ot.profile(net, x, reps=1, warmup=0, comm=(1.0, 0.0))
    return ot.Placement.of(
        profiled,
        {f"layers.{v}": d for v, d in device_of.items()},
        [qualify(order) for order in device_order],
    )


def training_step(module, x):
    """Output, and each parameter's gradient, of one forward and backward pass."""
    module.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the same dropout masks
    out = module(x)
    out.float().sum().backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return out.detach(), grads


def assert_same_step(reference, distributed, x, exact_gradients=True):
    """`distributed` (a Distributed of a copy of `reference`'s module) computes what
    `reference` does: the output bitwise (every layer and operation computes what it does
    undistributed), every parameter's gradient bitwise when `exact_gradients`, else equal up
    to float32 rounding. Autograd sums the gradients a tensor receives from its consumers in
    the order it runs their backward, which follows the order the forward pass recorded them
    in (per thread): when layers run on other threads than the host, or out of code order, a
    tensor read by three or more consumers may get its sum in another order."""
    want_out, want_grads = training_step(reference, x)
    got_out, got_grads = training_step(distributed, x)
    assert torch.equal(want_out, got_out)
    got_grads = {n.removeprefix("module."): g for n, g in got_grads.items()}
    assert want_grads.keys() == got_grads.keys()
    for name, grad in want_grads.items():
        if exact_gradients:
            assert torch.equal(grad, got_grads[name]), name
        else:
            torch.testing.assert_close(got_grads[name], grad, msg=name)


def within(seconds: float, function, *args):
    """`function(*args)` on a thread, failing the test if it has not returned in `seconds`
    (a deadlock fails, never hangs the suite)."""
    result, error = [], []

    def run():
        try:
            result.append(function(*args))
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread
            error.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not return within {seconds} s"
    if error:
        raise error[0]
    return result[0]


FIGURE_2 = dict(
    parents={"B": ["A"], "C": ["A"], "D": ["C"], "E": ["B"], "F": ["D", "E"]},
    code_order=list("ABCDEF"),
    device_of=dict.fromkeys("ABCDEF", 0),
    device_order=[list("ABECDF")],
)
FIGURE_3 = dict(
    parents={"B": ["A"], "C": ["B"], "D": ["C"], "E": ["D"], "F": ["E"]},
    code_order=list("ABCDEFG"),
    device_of={"A": 0, "B": 0, "C": 0, "D": 1, "E": 0, "F": 0, "G": 1},
    device_order=[list("ABCEF"), list("GD")],
)


@pytest.mark.parametrize(
    "figure, criterion, spawned",
    [
        (FIGURE_2, "global-topo", "CD"),
        (FIGURE_2, "gpu-topo", "CD"),
        (FIGURE_3, "gpu-topo", "DEF"),
        (FIGURE_3, "global-topo", "BCDEF"),
    ],
)
def test_the_seeds_figures_spawn_the_seeds_threads(figure, criterion, spawned):
    torch.manual_seed(0)
    net = DagNet(figure["parents"], figure["code_order"])
    x = torch.randn(3, 4)
    placement = dag_placement(net, x, figure["device_of"], figure["device_order"])
    parents = {k: sorted(v) for k, v in placement.parents.items() if v}
    assert parents == {f"layers.{k}": qualify(v) for k, v in figure["parents"].items()}
    dist = ot.distribute(copy.deepcopy(net), placement, criterion=criterion, timeout=10)
    within(30, assert_same_step, net, dist, x)
    report = dist.steps[-1]
    assert report.threads == qualify(spawned)
    assert report.code_order == qualify(figure["code_order"])
    assert report.threads_under(criterion) == qualify(spawned), "the Rust decision agrees"


def random_case(rng: random.Random):
    """A random DAG, a random code order, a random placement with per-device orders taken
    from another random topological order."""
    n = rng.randint(2, 10)
    names = [f"n{i}" for i in range(n)]
    parents = {}
    for i in range(1, n):
        k = rng.choice([0, 1, 1, 2, 3])
        chosen = rng.sample(names[:i], min(k, i))
        if chosen:
            parents[names[i]] = sorted(chosen)

    def topological():
        indegree = {v: len(parents.get(v, [])) for v in names}
        children = {v: [c for c in names if v in parents.get(c, [])] for v in names}
        ready, order = [v for v in names if indegree[v] == 0], []
        while ready:
            v = ready.pop(rng.randrange(len(ready)))
            order.append(v)
            for c in children[v]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
        return order

    devices = rng.randint(1, 3)
    device_of = {v: rng.randrange(devices) for v in names}
    placed_order = topological()
    device_order = [[v for v in placed_order if device_of[v] == d] for d in range(devices)]
    return parents, topological(), device_of, device_order


@pytest.mark.parametrize("seed", range(40))
def test_random_modules_placements_and_code_orders(seed):
    rng = random.Random(seed)
    parents, code_order, device_of, device_order = random_case(rng)
    torch.manual_seed(seed)
    net = DagNet(parents, code_order)
    x = torch.randn(3, 4)
    placement = dag_placement(net, x, device_of, device_order)
    for criterion in ["gpu-topo", "global-topo"]:
        for reorder in [True, False]:
            for parallel in [True, False]:
                dist = ot.distribute(
                    copy.deepcopy(net),
                    placement,
                    criterion=criterion,
                    reorder=reorder,
                    parallel=parallel,
                    timeout=10,
                )
                # Bitwise gradients when every layer runs on the host thread in code order.
                host_only = not parallel or len(device_order) == 1
                exact = host_only and (not reorder or code_order == device_order[0])
                within(30, assert_same_step, net, dist, x, exact)
                report = dist.steps[-1]
                if reorder:
                    assert report.threads == report.threads_under(criterion)
                else:
                    assert report.threads == []
                dist.close()


def torchvision_model(name: str):
    torchvision = pytest.importorskip("torchvision")
    kwargs = {"num_classes": 10}
    size = 64
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=False)
        size = 75
    if name == "vit_b_16":
        kwargs.update(image_size=64)
    return getattr(torchvision.models, name)(**kwargs), torch.randn(2, 3, size, size)


def hugging_face_model(name: str):
    transformers = pytest.importorskip("transformers")
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=100,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            num_labels=3,
        )
        model = transformers.BertForSequenceClassification(config)
    else:
        config = transformers.GPT2Config(
            vocab_size=100,
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,
        )
        model = transformers.GPT2LMHeadModel(config)  # its head is tied to the embedding
    model.train()
    return model, torch.randint(0, 100, (2, 16))


def logits_sum(output) -> torch.Tensor:
    logits = output.logits if hasattr(output, "logits") else output
    return logits.float().sum()


def model_step(module, x):
    """The output, gradients and buffers after one forward and backward pass."""
    module.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the same dropout masks
    output = module(x)
    logits_sum(output).backward()
    logits = output.logits if hasattr(output, "logits") else output

    def strip(name):
        return name.removeprefix("module.")

    grads = {strip(n): p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    buffers = {strip(n): b.clone() for n, b in module.named_buffers()}
    return logits.detach(), grads, buffers


def group_placement(profiled, devices: int, seed: int):
    """A random placement that keeps colocation groups together, each device running its
    layers in the profile's (topological) order."""
    rng = random.Random(seed)
    nodes = profiled.costgraph["nodes"]
    group_device = {}
    for node in nodes:
        group_device.setdefault(node["colocation_group"], rng.randrange(devices))
    device_of = {node["name"]: group_device[node["colocation_group"]] for node in nodes}
    return ot.Placement.of(profiled, device_of, devices=devices)


MODELS = [
    ("resnet50", torchvision_model),
    ("inception_v3", torchvision_model),
    ("densenet121", torchvision_model),
    ("mobilenet_v3_large", torchvision_model),
    ("vit_b_16", torchvision_model),
    ("bert", hugging_face_model),
    ("gpt2", hugging_face_model),
]


@pytest.mark.parametrize("name, build", MODELS, ids=[m[0] for m in MODELS])
def test_models_distributed_compute_what_they_compute_undistributed(name, build):
    """Profiled, placed on 2 and 4 devices (by ordo's placers, and at random by colocation
    group so that every model is split), distributed: the output and the buffers (batch
    norm's running statistics) bitwise, every parameter's gradient bitwise when the layers
    ran on the host thread in code order, else equal up to the order autograd summed a
    tensor's gradients in (see `assert_same_step`): within 1e-4 of the gradient's largest
    magnitude."""
    torch.manual_seed(0)
    model, x = build(name)
    profiled = ot.profile(model, x, reps=1, warmup=0, loss_fn=logits_sum)
    want_out, want_grads, want_buffers = model_step(copy.deepcopy(model), x)
    placements = [
        (ot.place(profiled, 2, "m-etf"), True),
        (ot.place(profiled, 4, "m-sct"), True),
        (group_placement(profiled, 3, seed=1), True),
        (group_placement(profiled, 4, seed=2), False),
    ]
    for placement, parallel in placements:
        dist = ot.distribute(copy.deepcopy(model), placement, parallel=parallel, timeout=60)
        got_out, got_grads, got_buffers = within(120, model_step, dist, x)
        assert torch.equal(want_out, got_out)
        assert want_buffers.keys() == got_buffers.keys()
        for key, buffer in want_buffers.items():
            assert torch.equal(buffer, got_buffers[key]), key
        assert want_grads.keys() == got_grads.keys()
        exact = not parallel and not dist.steps[-1].threads
        # Rounding noise of a gradient that is zero in exact arithmetic (BERT's key bias) is
        # measured against the model's largest gradient.
        scale = max(g.abs().max() for g in want_grads.values())
        for key, grad in want_grads.items():
            if exact:
                assert torch.equal(grad, got_grads[key]), key
            else:
                error = (grad - got_grads[key]).abs().max()
                assert error <= 1e-4 * grad.abs().max() + 1e-6 * scale, key
        assert dist.steps[-1].threads == dist.steps[-1].threads_under("gpu-topo")
        dist.close()
