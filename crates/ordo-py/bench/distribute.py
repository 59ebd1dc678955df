"""Benchmarks of ordo.torch on real models: profiling and placement time, layers left to
threads under both criteria, the wrappers' overhead on a one-device module, and ordo's
predicted distributed step next to the measured one.

Run in the test environment (scripts/test.sh builds it):

    target/py-venv/bin/python crates/ordo-py/bench/distribute.py [--models resnet50,bert] [--reps 7]

Timings are medians of interleaved runs on this machine (CPU logical devices).
"""

from __future__ import annotations

import argparse
import collections
import copy
import statistics
import time

import torch

import ordo.torch as ot


def torchvision_model(name: str, batch: int):
    import torchvision

    kwargs, size = {"num_classes": 1000}, 224
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=False)
        size = 299
    model = getattr(torchvision.models, name)(**kwargs)
    leaf = [torchvision.models.inception.BasicConv2d] if name == "inception_v3" else []
    return model, torch.randn(batch, 3, size, size), leaf


def hugging_face_model(name: str, batch: int):
    import transformers

    if name == "bert":
        config = transformers.BertConfig(
            num_hidden_layers=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
        )
        model = transformers.BertForSequenceClassification(config)
    else:
        config = transformers.GPT2Config(n_layer=4, resid_pdrop=0.0, embd_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    model.train()
    return model, torch.randint(0, 1000, (batch, 128)), []


MODELS = {
    "resnet50": torchvision_model,
    "inception_v3": torchvision_model,
    "densenet121": torchvision_model,
    "mobilenet_v3_large": torchvision_model,
    "vit_b_16": torchvision_model,
    "bert": hugging_face_model,
    "gpt2": hugging_face_model,
}


def loss_of(output) -> torch.Tensor:
    logits = output.logits if hasattr(output, "logits") else output
    return logits.float().sum()


def step_seconds(module, x) -> float:
    module.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss_of(module(x)).backward()
    return time.perf_counter() - start


def paired(step, a_module, b_module, x, reps: int, warmup: int = 2) -> tuple[float, float, float]:
    """Median `step` time of each module, and the median of the ratios b/a of pairs of steps
    run back to back (alternating which goes first, so that the machine's drift cancels)."""
    for _ in range(warmup):
        step(a_module, x), step(b_module, x)
    a, b = [], []
    for i in range(reps):
        if i % 2:
            b.append(step(b_module, x))
            a.append(step(a_module, x))
        else:
            a.append(step(a_module, x))
            b.append(step(b_module, x))
    ratio = statistics.median(bi / ai for ai, bi in zip(a, b))
    return statistics.median(a), statistics.median(b), ratio


def overhead(model, x, profiled, reps: int) -> tuple[float, float, float]:
    """Median step of the module and of its one-device distribution, and the median ratio of
    paired steps less 1."""
    one = ot.Placement.of(profiled, dict.fromkeys(profiled.layers, 0))
    plain, wrapped = copy.deepcopy(model), ot.distribute(copy.deepcopy(model), one)
    plain_s, wrapped_s, ratio = paired(step_seconds, plain, wrapped, x, reps)
    wrapped.close()
    return plain_s, wrapped_s, ratio - 1


def wrapper_cost_us(layers: int = 300, reps: int = 1000) -> tuple[float, float]:
    """The wrappers' own cost per layer call, in µs, without and with gradients: a chain of
    tiny layers run distributed on one device, then the same module object after ``close()``
    took the wrappers off; the difference of the fastest runs of each. The same object both
    ways: a deep copy of a module alone runs ~2 µs per layer slower here than the original
    (its tensors elsewhere in memory), which would count as the wrappers' cost; and the
    minimum, because medians of the same runs move by several µs per layer from one process
    to the next on this machine."""
    module = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(layers)])
    x = torch.randn(1, 2)
    profiled = ot.profile(module, x, reps=1, warmup=0)
    one = ot.Placement.of(profiled, dict.fromkeys(profiled.layers, 0))

    def fastest(run, grad: bool) -> float:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            with torch.set_grad_enabled(grad):
                run(x)
            times.append(time.perf_counter() - start)
        return min(times)

    wrapped = ot.distribute(module, one)
    distributed = [fastest(wrapped, grad) for grad in (False, True)]
    wrapped.close()
    plain = [fastest(module, grad) for grad in (False, True)]
    costs = [(d - p) / layers * 1e6 for d, p in zip(distributed, plain)]
    return costs[0], costs[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    cost_us, cost_grad_us = wrapper_cost_us()
    print(
        f"the wrappers cost {cost_us:.1f} us per layer call, {cost_grad_us:.1f} us with "
        f"gradients (a chain of 300 tiny layers)"
    )
    errors = []
    for name in args.models.split(","):
        model, x, leaf = MODELS[name](name, args.batch)
        start = time.perf_counter()
        profiled = ot.profile(model, x, leaf_modules=leaf, reps=3, warmup=1, loss_fn=loss_of)
        profile_s = time.perf_counter() - start
        slowdown = ot.concurrency_slowdown(model, x)
        print(
            f"== {name}: {len(profiled.layers)} layers, profiled in {profile_s:.2f} s; "
            f"two forward passes at once run {slowdown:.2f}x slower"
        )
        for devices in (2, 4):
            for algo in ("m-etf", "m-sct"):
                start = time.perf_counter()
                placement = ot.place(profiled, devices, algo)
                place_s = time.perf_counter() - start
                used = sorted(collections.Counter(placement.device_of.values()).values())
                dist = ot.distribute(copy.deepcopy(model), placement)
                measured = ot.measure(dist, x, reps=args.reps, warmup=1, loss_fn=loss_of)
                report = dist.steps[-1]
                gpu = len(report.threads_under("gpu-topo"))
                glob = len(report.threads_under("global-topo"))
                predicted = ot.predict(placement, slowdown=slowdown)
                error = predicted.step_us / measured.step_us - 1
                errors.append(abs(error))
                dist.close()
                print(
                    f"  {algo} x{devices}: placed in {place_s * 1e3:.0f} ms, layers per device "
                    f"{used}, threads gpu-topo {gpu} / global-topo {glob}; step predicted "
                    f"{predicted.step_us / 1e3:.1f} ms (forward {predicted.forward_us / 1e3:.1f})"
                    f", measured {measured.step_us / 1e3:.1f} ms (forward "
                    f"{measured.forward_us / 1e3:.1f}): {error:+.1%}"
                )
        plain, wrapped, ratio = overhead(model, x, profiled, args.reps)
        print(
            f"  one device: module {plain * 1e3:.1f} ms, distributed {wrapped * 1e3:.1f} ms per "
            f"step: median pair ratio {ratio:+.2%}; the wrappers' own cost "
            f"{len(profiled.layers) * cost_grad_us / (plain * 1e6):.2%} of the step"
        )
    print(f"median |predicted - measured| / measured: {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
