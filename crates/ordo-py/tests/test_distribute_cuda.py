"""ordo.torch.distribute on a GPU: logical devices sharing it, one CUDA stream each, events
between them and the seed's transfer streams (``ordo._cuda``). Every check compares with the
undistributed module run on the GPU's default stream. Skipped where torch has no CUDA."""

import copy
import os
import random

import pytest
import torch
from test_distribute import (
    MODELS,
    DagNet,
    assert_same_results,
    dag_placement,
    group_placement,
    logits_sum,
    model_step,
    random_case,
    within,
)
from torch import nn

import ordo
import ordo.torch as ot

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# The same kernels give the same bits: cuDNN's deterministic algorithms, cuBLAS with a fixed
# workspace per stream. float32 convolutions and products in float32, not TF32: where the
# order of a gradient's sum differs (layers launched out of code order), TF32's rounding of
# the next layer's inputs would turn a last-bit difference into a 1e-3 one.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

GPU = torch.device("cuda", 0)

# A layer of `SlowLinear` keeps its stream busy this many GPU clock cycles before it writes
# its output (about 0.5 ms): a consumer on another stream that did not wait for it would read
# memory not yet written.
SLOW_CYCLES = 1_000_000


class SlowLinear(nn.Linear):
    def forward(self, x):
        torch.cuda._sleep(SLOW_CYCLES)
        return super().forward(x)


class SlowDagNet(DagNet):
    """A DagNet of SlowLinear layers; a layer with one parent reads its output directly (a
    tensor that goes from layer to layer, which crosses logical devices on the transfer
    streams), one with several their sum (computed by the host between layers)."""

    def __init__(self, parents, code_order, width: int = 64):
        super().__init__(parents, code_order, width)
        self.layers = nn.ModuleDict({v: SlowLinear(width, width) for v in code_order})

    def forward(self, x):
        out = {}
        for v in self.code_order:
            ps = self.parents.get(v, [])
            inp = x if not ps else out[ps[0]] if len(ps) == 1 else sum(out[p] for p in ps)
            out[v] = self.layers[v](inp)
        read = {p for ps in self.parents.values() for p in ps}
        return sum(out[v] for v in self.code_order if v not in read)


def cuda_step(module, x):
    """Output and gradients of one forward and backward pass, copied to the host."""
    module.zero_grad(set_to_none=True)
    out = module(x)
    out.sum().backward()
    grads = {
        n.removeprefix("module."): p.grad.cpu()
        for n, p in module.named_parameters()
        if p.grad is not None
    }
    return out.detach().cpu(), grads


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("transfers", [False, True], ids=["events", "transfers"])
def test_random_dags_on_streams_match_the_default_stream(seed, transfers):
    """Random DAG modules x placements x code orders, with layers that keep their streams busy
    before they write: output and gradients equal to the module's on the default stream (for a
    fresh input each step, so that a read of memory not yet written shows); with
    ``transfers``, every tensor that crosses logical devices is copied on the transfer
    streams."""
    rng = random.Random(seed)
    parents, code_order, device_of, device_order = random_case(rng)
    torch.manual_seed(seed)
    net = SlowDagNet(parents, code_order)
    placement = dag_placement(net, torch.randn(3, 64), device_of, device_order)
    reference = copy.deepcopy(net).to(GPU)
    devices = ["cuda:0"] * len(device_order)
    problems = []
    for criterion in ["gpu-topo", "global-topo"]:
        dist = ot.distribute(copy.deepcopy(net), placement, devices=devices, criterion=criterion)
        dist._assigner.copy_between_logical_devices = transfers
        for step in range(2):
            x = torch.randn(3, 64, device=GPU)
            got_out, got_grads = within(60, cuda_step, dist, x)
            want_out, want_grads = cuda_step(reference, x)
            where = f"{criterion}, step {step}, threads {dist.steps[-1].threads}"
            if not torch.equal(want_out, got_out):
                problems.append(
                    f"output differs by {(want_out - got_out).abs().max():.3g} ({where})"
                )
            for name, grad in want_grads.items():
                if not torch.allclose(got_grads[name], grad, rtol=1e-5, atol=1e-6):
                    error = (got_grads[name] - grad).abs().max()
                    problems.append(f"gradient of {name} differs by {error:.3g} ({where})")
        crossing = any(
            len(ps) == 1 and device_of[ps[0]] != device_of[v] for v, ps in parents.items()
        )
        if transfers and crossing:
            assert len(dist._assigner.transfers) > 0
        dist.close()
    assert not problems, "\n".join(problems)


def test_without_waiting_for_events_the_streams_race(monkeypatch):
    """The check above can fail: with the streams' waits turned off, consumers read their
    inputs before the producers' streams wrote them."""
    monkeypatch.setattr(torch.cuda.Stream, "wait_event", lambda self, event: None)
    monkeypatch.setattr(torch.cuda.Stream, "wait_stream", lambda self, stream: None)
    torch.manual_seed(0)
    parents = {"b": ["a"], "c": ["b"], "d": ["c"]}
    net = SlowDagNet(parents, list("abcd"))
    device_of = {"a": 0, "b": 1, "c": 0, "d": 1}
    placement = dag_placement(net, torch.randn(3, 64), device_of, [["a", "c"], ["b", "d"]])
    reference = copy.deepcopy(net).to(GPU)
    dist = ot.distribute(copy.deepcopy(net), placement, devices=["cuda:0"] * 2)
    differ = 0
    for _ in range(5):
        x = torch.randn(3, 64, device=GPU)
        got, _ = cuda_step(dist, x)
        torch.cuda.synchronize()
        want, _ = cuda_step(reference, x)
        differ += not torch.equal(want, got)
    dist.close()
    assert differ > 0


class Mixed(nn.Module):
    """Code between layers on different streams: sums, a concatenation, an in-place update,
    and an input that stays on the host."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.a, self.b = SlowLinear(width, width), SlowLinear(width, width)
        self.c = SlowLinear(2 * width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))

    def forward(self, x, bias):
        h, g = self.a(x), self.b(x)
        both = torch.cat([h * self.scale, g + 1], dim=1)
        y = self.c(both)
        y += h
        return y + bias  # `bias` is on the host: moved to the GPU between layers


def test_code_between_layers_and_host_inputs_on_streams():
    torch.manual_seed(0)
    net = Mixed()
    x, bias = torch.randn(4, 64), torch.randn(4, 64)
    profiled = ot.profile(net, (x, bias), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"a": 0, "b": 1, "c": 2})
    reference = copy.deepcopy(net).to(GPU)
    dist = ot.distribute(copy.deepcopy(net), placement, devices=["cuda:0"] * 3)
    assert all(p.is_cuda for p in dist.parameters())
    for _ in range(3):
        x, bias = torch.randn(4, 64), torch.randn(4, 64)
        dist.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        got = dist(x, bias)  # the host's input: the first layer's transfer brings it
        got.sum().backward()
        want = reference(x.to(GPU), bias.to(GPU))
        want.sum().backward()
        assert torch.equal(want, got)
        for (name, p), q in zip(reference.named_parameters(), dist.module.parameters()):
            torch.testing.assert_close(q.grad, p.grad, msg=name)


class HostWrite(nn.Module):
    """The host writes a layer's output in place between two layers on one stream, after its
    own stream was kept busy: the second layer must wait for the host's stream."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.a, self.b = SlowLinear(width, width), SlowLinear(width, width)

    def forward(self, x):
        h = self.a(x)
        torch.cuda._sleep(SLOW_CYCLES)  # on the caller's stream, between layers
        h += 1
        return self.b(h)


def test_a_write_between_layers_is_waited_for_by_the_next_layer():
    torch.manual_seed(0)
    net = HostWrite()
    profiled = ot.profile(net, torch.randn(4, 64), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"a": 0, "b": 0})
    reference = copy.deepcopy(net).to(GPU)
    dist = ot.distribute(copy.deepcopy(net), placement, devices=["cuda:0"])
    for _ in range(3):
        x = torch.randn(4, 64, device=GPU)
        got = dist(x).detach().cpu()
        assert torch.equal(reference(x).detach().cpu(), got)


def test_training_steps_on_streams_match():
    """Three SGD steps: each step's layers wait for the last step's update (queued on the
    default stream) before they read the parameters."""
    torch.manual_seed(0)
    parents = {"b": ["a"], "c": ["a"], "d": ["b", "c"]}
    net = SlowDagNet(parents, list("abcd"))
    placement = dag_placement(
        net, torch.randn(3, 64), {"a": 0, "b": 0, "c": 1, "d": 1}, [["a", "b"], ["c", "d"]]
    )
    reference = copy.deepcopy(net).to(GPU)
    dist = ot.distribute(copy.deepcopy(net), placement, devices=["cuda:0"] * 2)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt_dist = torch.optim.SGD(dist.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(3, 64, device=GPU)
        for module, opt in ((reference, opt_ref), (dist, opt_dist)):
            opt.zero_grad()
            module(x).square().mean().backward()
            opt.step()
    for (name, p), q in zip(reference.named_parameters(), dist.module.parameters()):
        torch.testing.assert_close(q, p, msg=name)


@pytest.mark.parametrize("name, build", MODELS, ids=[m[0] for m in MODELS])
def test_models_on_streams_compute_what_they_compute_undistributed(name, build):
    """The models of test_distribute, profiled on the GPU, placed on 2-4 logical devices of
    it: output and buffers bitwise equal to the module's on the default stream; gradients
    bitwise where every layer was launched from the host in code order (autograd then sums
    each tensor's gradients in the same order), else equal up to that order."""
    torch.manual_seed(0)
    model, x = build(name)
    model, x = model.to(GPU), x.to(GPU)
    profiled = ot.profile(model, x, reps=1, warmup=1, loss_fn=logits_sum)
    want_out, want_grads, want_buffers = model_step(copy.deepcopy(model), x)
    placements = [
        ot.place(profiled, 2, "m-etf"),
        ot.place(profiled, 4, "m-sct"),
        group_placement(profiled, 3, seed=1),
    ]
    for placement in placements:
        devices = ["cuda:0"] * placement.devices
        dist = ot.distribute(copy.deepcopy(model), placement, devices=devices, timeout=60)
        got = within(120, model_step, dist, x)
        exact = not dist.steps[-1].threads
        assert_same_results((want_out, want_grads, want_buffers), got, exact)
        dist.close()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tied_weights_on_two_gpus_are_an_error():
    net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    net[1].weight = net[0].weight
    profiled = ot.profile(net, torch.randn(2, 4), reps=1, warmup=0)
    placement = ot.Placement.of(profiled, {"0": 0, "1": 1})
    with pytest.raises(ordo.OrdoError, match="tied weights must be placed on one GPU"):
        ot.distribute(net, placement, devices=["cuda:0", "cuda:1"])
