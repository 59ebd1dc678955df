"""ordo.torch.distribute: the Assigner runs a module as a placement says, with the seed's
reordering, and computes what the undistributed module computes, bitwise."""

import copy
import random
import re
import threading

import pytest
import torch
from torch import nn

import ordo
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


def random_dag_placement(seed: int):
    """``random_case(seed)`` as a module, an input, its placement, the code order and the
    device orders."""
    parents, code_order, device_of, device_order = random_case(random.Random(seed))
    torch.manual_seed(seed)
    net = DagNet(parents, code_order)
    x = torch.randn(3, 4)
    return net, x, dag_placement(net, x, device_of, device_order), code_order, device_order


@pytest.mark.parametrize("seed", range(40))
def test_random_modules_placements_and_code_orders(seed):
    net, x, placement, code_order, device_order = random_dag_placement(seed)
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


def assert_same_results(want, got, exact: bool) -> None:
    """The outputs and buffers of two steps (``model_step``'s) equal, and their gradients
    bitwise when ``exact``, else within rounding."""
    (want_out, want_grads, want_buffers), (got_out, got_grads, got_buffers) = want, got
    assert torch.equal(want_out, got_out)
    assert want_buffers.keys() == got_buffers.keys()
    for key, buffer in want_buffers.items():
        assert torch.equal(buffer, got_buffers[key]), key
    assert want_grads.keys() == got_grads.keys()
    # Rounding noise of a gradient that is zero in exact arithmetic (BERT's key bias) is
    # measured against the model's largest gradient.
    scale = max(g.abs().max() for g in want_grads.values())
    for key, grad in want_grads.items():
        if exact:
            assert torch.equal(grad, got_grads[key]), key
        else:
            error = (grad - got_grads[key]).abs().max()
            assert error <= 1e-4 * grad.abs().max() + 1e-6 * scale, key


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
        got = within(120, model_step, dist, x)
        exact = not parallel and not dist.steps[-1].threads
        assert_same_results((want_out, want_grads, want_buffers), got, exact)
        assert dist.steps[-1].threads == dist.steps[-1].threads_under("gpu-topo")
        dist.close()


def test_training_steps_with_an_optimizer_match():
    """loss.backward() and optimizer.step() unchanged: three SGD steps of the distributed
    module give the losses and parameters of the undistributed one."""
    torch.manual_seed(0)
    model, x = torchvision_model("resnet50")
    profiled = ot.profile(model, x, reps=1, warmup=0)
    placement = group_placement(profiled, 2, seed=3)

    def train(module, steps=3):
        optimizer = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
        losses = []
        for _ in range(steps):
            optimizer.zero_grad()
            loss = module(x).square().mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, {n.removeprefix("module."): p.detach() for n, p in module.named_parameters()}

    want_losses, want_params = train(copy.deepcopy(model))
    for parallel in [False, True]:
        dist = ot.distribute(copy.deepcopy(model), placement, parallel=parallel, timeout=60)
        losses, params = within(120, train, dist)
        if parallel:  # gradients summed in another order: equal up to rounding
            assert losses == pytest.approx(want_losses, rel=1e-5)
            for name, p in want_params.items():
                torch.testing.assert_close(params[name], p, rtol=1e-4, atol=1e-6)
        else:
            assert losses == want_losses
            assert all(torch.equal(params[n], p) for n, p in want_params.items())
        assert len(dist.steps) == 3
        dist.close()


class Between(nn.Module):
    """Python code between layers of every kind ordo defers or waits for: shapes, a condition,
    views and methods, torch functions, operators, in-place writes of pending values and of a
    tensor the host holds, indexing."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)
        self.c = nn.Linear(12, 6)
        self.act = nn.ReLU(inplace=True)
        self.d = nn.Linear(6, 3)

    def forward(self, x):
        y = self.a(x)
        z = self.b(x * 2)
        n = y.shape[0]  # metadata: waited for
        y = y.view(n, 2, 3).flatten(1)
        if y.sum() > -1e9:  # a condition: waited for
            y = y + 1
        z += y  # in place on a pending value
        z[:, 0] = 0.5  # indexed write
        w = torch.cat([y.relu_(), z], dim=1)  # an in-place method, a torch function
        w = torch.nn.functional.gelu(w) * (1 - z.mean())
        h = self.act(self.c(w))  # an in-place layer
        buffer = torch.zeros(n, 6)
        buffer[:, :3] = h[:, :3]  # a host tensor written with a pending value
        return self.d(buffer + h) @ torch.ones(3, 3) - abs(-h.sum())


def test_code_between_layers_runs_deferred_and_in_order():
    """Ten steps per placement, each equal to the undistributed module's: in the third, `a`
    runs on the host and `b` on a worker, so the host writes `y` in place (`y.relu_()`) while
    the deferred `z += y` may not have read it yet: the write waits for it."""
    torch.manual_seed(0)
    net, x = Between(), torch.randn(4, 6)
    profiled = ot.profile(net, x, reps=1, warmup=0)
    placements = [
        {"a": 0, "b": 1, "c": 1, "act": 1, "d": 0},
        {"a": 1, "b": 0, "c": 0, "act": 1, "d": 1},
        {"a": 0, "b": 1, "c": 0, "act": 0, "d": 1},
    ]
    for device_of in placements:
        placement = ot.Placement.of(profiled, device_of)
        dist = ot.distribute(copy.deepcopy(net), placement, timeout=10)
        for _ in range(10):
            within(30, assert_same_step, net, dist, x, True)
        dist.close()


def test_waiting_for_a_layer_the_host_has_not_reached_is_an_error_not_a_hang():
    """Fig. 3's D waits for G, which the code reaches last: code that needs D's output as a
    Python value before that cannot run reordered; the error names both layers and the way
    out, and the module still works without reordering."""

    class NeedsD(DagNet):
        def forward(self, x):
            out = {}
            for v in self.code_order:
                ps = self.parents.get(v, [])
                out[v] = self.layers[v](x if not ps else sum(out[p] for p in ps))
                if v == "D" and bool(out[v].sum() > 1e9):
                    raise AssertionError("never")
            return out["F"] + out["G"]

    fig = FIGURE_3
    net = NeedsD(fig["parents"], fig["code_order"])
    x = torch.randn(3, 4)
    placement = dag_placement(net, x, fig["device_of"], fig["device_order"])
    dist = ot.distribute(copy.deepcopy(net), placement, timeout=10)
    with pytest.raises(ordo.OrdoError, match=r"layer `layers\.D`.*`layers\.G`.*reorder=False"):
        within(30, dist, x)
    undistributed = ot.distribute(copy.deepcopy(net), placement, reorder=False, timeout=10)
    within(30, assert_same_step, net, undistributed, x, True)
    within(30, assert_same_step, net, dist.module, x, True)  # the module itself still works


def test_a_layers_error_is_raised_by_forward_and_the_next_step_works():
    torch.manual_seed(0)
    net = DagNet(FIGURE_3["parents"], FIGURE_3["code_order"])
    x = torch.randn(3, 4)
    placement = dag_placement(net, x, FIGURE_3["device_of"], FIGURE_3["device_order"])
    dist = ot.distribute(copy.deepcopy(net), placement, timeout=10)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        within(30, dist, torch.randn(3, 5))
    within(30, assert_same_step, net, dist, x, False)


def test_a_branch_not_taken_releases_the_layers_that_wait_for_it():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
            self.take_b = True

        def forward(self, x):
            y = self.a(x)
            if self.take_b:
                y = self.b(y)
            return self.c(y)

    torch.manual_seed(0)
    net, x = Branchy(), torch.randn(2, 4)
    profiled = ot.profile(net, x, reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"a": 0, "b": 1, "c": 0})
    dist = ot.distribute(copy.deepcopy(net), placement, timeout=10)
    net.take_b = dist.module.take_b = False
    within(30, assert_same_step, net, dist, x, False)
    assert dist.steps[-1].code_order == ["a", "c"]


def test_a_call_the_profile_did_not_see_is_an_error():
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"0": 0, "1": 1})

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = net

        def forward(self, x):
            return self.inner[0](self.inner[0](x))

    dist = ot.distribute(net, placement, timeout=10)
    with pytest.raises(ordo.OrdoError, match=r"layer `0#1` is not in the placement"):
        within(30, dist._assigner.run, Twice(), (torch.randn(2, 4),), {})
    dist.close()
    assert "forward" not in net[0].__dict__, "close() restores the layers"


def bad_distribute_cases():
    """The corpus of bad arguments to place, Placement.of and distribute: each with the text
    its error must contain."""
    return [
        ("devices", dict(devices=["cpu"]), "lists 1 devices, the placement has 2"),
        ("device name", dict(devices=["cpu", "nonsense"]), "`nonsense` is not a torch device"),
        ("mixed", dict(devices=["cpu", "cuda:0"]), "mixes the CPU and CUDA GPUs"),
        ("kind", dict(devices=["cpu", "meta"]), "on the CPU or on CUDA GPUs"),
        ("criterion", dict(criterion="random"), "criterion `random`"),
        ("timeout", dict(timeout=0), "timeout=0"),
        ("negative timeout", dict(timeout=-1.0), "timeout=-1.0"),
        ("nan timeout", dict(timeout=float("nan")), "timeout=nan"),
    ]


@pytest.mark.parametrize("what, change, message", bad_distribute_cases(), ids=lambda c: str(c))
def test_bad_arguments_to_distribute_are_ordo_errors(what, change, message):
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"0": 0, "1": 1})
    with pytest.raises(ordo.OrdoError, match=re.escape(message)):
        ot.distribute(net, placement, **change)


def test_cuda_devices_without_cuda_are_an_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"0": 0, "1": 1})
    with pytest.raises(ordo.OrdoError, match="CUDA is not available"):
        ot.distribute(net, placement, devices=["cuda:0", "cuda"])


@pytest.mark.parametrize(
    "device_of, order, message",
    [
        ({"0": 0}, None, "no device for node `1`"),
        ({"0": 0, "1": 5}, None, "on device 5, but the problem has 2"),
        ({"0": 0, "1": 0, "2": 0}, None, "node `2`, which the problem does not have"),
        ({"0": 0, "1": 0}, [["1", "0"], []], "`0`"),
        ({"0": 0, "1": 1}, [["0"], []], "`1`"),
        ({"0": 0, "1": 1}, [["0", "1"], []], "`1`"),
        ({"0": 0, "1": 1}, [["0", "x"], ["1"]], "node `x`"),
    ],
)
def test_bad_placements_are_ordo_errors(device_of, order, message):
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    with pytest.raises(ordo.OrdoError, match=re.escape(message)):
        ot.Placement.of(profiled, device_of, order, devices=2)


def test_a_placement_of_another_module_is_an_error():
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"0": 0, "1": 1})
    with pytest.raises(ordo.OrdoError, match="layer `0`, which the module lacks"):
        ot.distribute(nn.Linear(4, 4), placement)


def test_forward_from_two_threads_at_once_is_an_error():
    fig = FIGURE_3
    net = DagNet(fig["parents"], fig["code_order"])
    x = torch.randn(3, 4)
    placement = dag_placement(net, x, fig["device_of"], fig["device_order"])
    dist = ot.distribute(net, placement, timeout=10)
    inner = []

    class Reentrant(nn.Module):
        def forward(self, x):
            with pytest.raises(ordo.OrdoError, match="forward called again"):
                dist(x)
            inner.append(True)
            return dist.module(x)

    within(30, dist._assigner.run, Reentrant(), (x,), {})
    assert inner == [True]


class Seq2Seq(nn.Module):
    """The seed's Transformer: an encoder and a decoder, each with its embedding; the code
    calls the encoder, then the decoder."""

    def __init__(self, vocab: int = 50, width: int = 16, layers: int = 2):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, width)
        self.tgt_embed = nn.Embedding(vocab, width)
        self.transformer = nn.Transformer(
            width, 2, layers, layers, 32, dropout=0.0, batch_first=True
        )
        self.out = nn.Linear(width, vocab)

    def forward(self, src, tgt):
        return self.out(self.transformer(self.src_embed(src), self.tgt_embed(tgt)))


def test_the_seeds_transformer_needs_threads_only_under_the_global_criterion():
    """The seed: a Transformer placed on 2 devices sends 13 of 35 layers to threads under the
    global criterion and none under the GPU-wise one. Ours has 43 layers; whatever ordo's
    placers choose, the GPU-wise criterion never needs more threads than the global one, the
    host's decisions are ordo's Rust decisions, and the output is the module's."""
    torch.manual_seed(0)
    model = Seq2Seq()
    src, tgt = torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))
    profiled = ot.profile(model, (src, tgt), reps=1, warmup=0, loss_fn=lambda o: o.sum())
    assert len(profiled.layers) == 43
    for algo in ["m-etf", "m-sct"]:
        dist = ot.distribute(copy.deepcopy(model), ot.place(profiled, 2, algo), timeout=60)
        out = within(60, dist, src, tgt)
        assert torch.equal(out, model(src, tgt))
        report = dist.steps[-1]
        gpu, glob = report.threads_under("gpu-topo"), report.threads_under("global-topo")
        assert report.threads == gpu and len(gpu) <= len(glob)
        dist.close()


def test_only_the_last_steps_reports_are_kept(monkeypatch):
    import ordo._assigner

    monkeypatch.setattr(ordo._assigner, "STEPS_KEPT", 3)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    dist = ot.distribute(net, ot.Placement.of(profiled, {"0": 0, "1": 1}), timeout=10)
    with torch.no_grad():
        for _ in range(5):
            within(30, dist, torch.randn(2, 4))
    assert len(dist.steps) == 3 and dist.steps[-1].code_order == ["0", "1"]
    dist.close()


def test_a_distributed_module_dropped_without_close_is_collected():
    """The wrapped layers (ordo's LayerCall) and the module refer to each other; the garbage
    collector must still free them when the user drops the module without `close()`."""
    import gc
    import weakref

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    x = torch.randn(2, 4)
    profiled = ot.profile(net, x, reps=1, warmup=0)
    dist = ot.distribute(net, ot.Placement.of(profiled, dict.fromkeys(profiled.layers, 0)))
    dist(x).sum().backward()
    alive = [weakref.ref(net), weakref.ref(net[0]), weakref.ref(net[0].weight)]
    del net, dist, profiled
    gc.collect()
    assert [a() for a in alive] == [None] * 3, "the module, a layer or a parameter never freed"
