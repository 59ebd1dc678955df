"""The public model list of doc/onnx.md, exported to ONNX as users export them, checked by ordo.

The list: every classification model of torchvision, a dozen popular timm models, and small
configurations of Hugging Face BERT, GPT-2, T5, Llama and Whisper. Each is built with random
weights (nothing is downloaded), put in training mode, and exported with PyTorch's TorchScript
exporter (`torch.onnx.export(..., dynamo=False, training=TRAINING)`, opset 17) at batch 2, its
output the logits. The check of one model, with the `ordo` binary:

1. `ordo inspect --json`: the import's trainable parameter count equals the exporter's
   (`sum(p.numel() for p in model.parameters() if p.requires_grad)`; the parameters that do
   not train and the float buffers are named with `--freeze`, as ONNX does not record which
   tensors train), and its build time;
2. `ordo simulate --train --devices 4`: placed on 4 devices and simulated;
3. `ordo run --train --loss cross-entropy --steps 2` on 1 and on 3 CPU devices: bitwise the
   same two losses.

    python scripts/onnx_models.py list
    python scripts/onnx_models.py export OUT_DIR [NAME ...]
    python scripts/onnx_models.py check [--ordo BIN] [--json OUT] [--ci | NAME ...]
    python scripts/onnx_models.py table RESULTS.json [MORE.json ...]   # Markdown, later files win

`check` exports each model into a temporary directory, checks it and deletes it (the largest
files are gigabytes), and prints one line per model; `--json` writes every figure. Needs torch,
torchvision, onnx, and for their models timm and transformers (models of a missing library are
reported as skipped). The pytest suite runs the `--ci` models (crates/ordo-py/tests).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Callable

BATCH = 2
OPSET = 17
# Sequence length of the token models, and the audio length (frames) of Whisper's encoder.
SEQ_LEN = 16

# Small models that the CI runs (a few seconds each); the rest are checked by hand (`check`).
CI_MODELS = {
    "squeezenet1_1",
    "mobilenet_v3_small",
    "shufflenet_v2_x0_5",
    "bert-tiny",
    "gpt2-tiny",
    "t5-tiny",
    "llama-tiny",
    "whisper-tiny",
}

# torchvision's video classifiers (3-D convolutions) whose input size is free.
VIDEO_MODELS = ["r3d_18", "mc3_18", "r2plus1d_18"]

# timm's dozen: vision transformers (ViT, DeiT, BEiT), Swin, ConvNeXt, EfficientNet, NASNet and
# PNASNet, RegNet, MobileNet-V3, ResNet-D, MLP-Mixer.
TIMM_MODELS = [
    "vit_base_patch16_224",
    "deit_small_patch16_224",
    "beit_base_patch16_224",
    "swin_tiny_patch4_window7_224",
    "convnext_tiny",
    "efficientnet_b0",
    "nasnetalarge",
    "pnasnet5large",
    "regnety_008",
    "mobilenetv3_large_100",
    "resnet50d",
    "mixer_b16_224",
]


@dataclasses.dataclass
class Spec:
    """One model of the list: how to build it and its example inputs."""

    name: str
    library: str
    build: Callable[[], object]
    inputs: Callable[[], tuple]
    input_names: list[str]


class Logits:
    """Wraps a module whose output is a structure (Hugging Face's ModelOutput, Inception's
    auxiliary outputs) so that the export's one output is the logits."""

    def __new__(cls, module, select):
        import torch

        class _Logits(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = module

            def forward(self, *args):
                return select(self.inner(*args))

        return _Logits()


def _clip(frames: int, size: int):
    import torch

    return lambda: (torch.randn(BATCH, 3, frames, size, size),)


def _image(size: int = 224):
    import torch

    return lambda: (torch.randn(BATCH, 3, size, size),)


def _torchvision_specs() -> list[Spec]:
    import torchvision

    specs = []
    for name in torchvision.models.list_models(module=torchvision.models):
        kwargs = {}
        if name in ("inception_v3", "googlenet"):
            # Their auxiliary classifiers only run in training mode and return a tuple.
            kwargs = {"aux_logits": False, "init_weights": False}

        def build(name=name, kwargs=kwargs):
            return torchvision.models.get_model(name, weights=None, **kwargs)

        size = 299 if name == "inception_v3" else 224
        specs.append(Spec(name, "torchvision", build, _image(size), ["input"]))
    # The video models whose clip size is free, on 8 frames of 112 x 112 (3-D convolutions;
    # S3D, MViT and Video Swin fix 16 frames of 224 x 224 and are left out: tens of GFLOP a
    # step on CPUs).
    for name in VIDEO_MODELS:

        def build(name=name):
            return torchvision.models.get_model(name, weights=None)

        specs.append(Spec(name, "torchvision", build, _clip(8, 112), ["input"]))
    return specs


def _timm_specs() -> list[Spec]:
    try:
        import timm
    except ImportError:
        return [Spec(f"timm.{n}", "timm", None, None, []) for n in TIMM_MODELS]
    specs = []
    for name in TIMM_MODELS:
        size = timm.get_pretrained_cfg(name).input_size[-1]

        def build(name=name):
            return timm.create_model(name, pretrained=False)

        # Prefixed: convnext_tiny and efficientnet_b0 are torchvision names too.
        specs.append(Spec(f"timm.{name}", "timm", build, _image(size), ["input"]))
    return specs


def _tokens(vocab: int):
    import torch

    return lambda: (torch.randint(0, vocab, (BATCH, SEQ_LEN)),)


def _hf_specs() -> list[Spec]:
    names = ["bert-tiny", "gpt2-tiny", "t5-tiny", "llama-tiny", "whisper-tiny"]
    try:
        import torch
        import transformers as tf
    except ImportError:
        return [Spec(n, "transformers", None, None, []) for n in names]
    vocab = 512
    # `eager` attention: the exporter's path for the scaled-dot-product kernel varies by release.
    common = {"attn_implementation": "eager"}

    def hf(config_cls, model_cls, **config):
        def build():
            model = model_cls._from_config(config_cls(**config), **common)
            return Logits(model, lambda out: out.logits)

        return build

    def seq2seq_inputs():
        ids = torch.randint(0, vocab, (BATCH, SEQ_LEN))
        return ids, torch.randint(0, vocab, (BATCH, SEQ_LEN // 2))

    def whisper_inputs():
        # Whisper's encoder reads 2 x max_source_positions mel frames.
        return torch.randn(BATCH, 16, 2 * SEQ_LEN), torch.randint(0, vocab, (BATCH, SEQ_LEN // 2))

    def seq2seq(config_cls, model_cls, **config):
        inner = hf(config_cls, model_cls, **config)

        def build():
            model = inner()

            class Seq2Seq(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.model = model

                def forward(self, x, decoder_input_ids):
                    return self.model.inner(x, decoder_input_ids=decoder_input_ids).logits

            return Seq2Seq()

        return build

    small = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
    return [
        Spec(
            "bert-tiny",
            "transformers",
            hf(tf.BertConfig, tf.BertForMaskedLM, vocab_size=vocab, num_hidden_layers=2, **small),
            _tokens(vocab),
            ["input_ids"],
        ),
        Spec(
            "gpt2-tiny",
            "transformers",
            hf(tf.GPT2Config, tf.GPT2LMHeadModel, vocab_size=vocab, n_embd=64, n_layer=2, n_head=4),
            _tokens(vocab),
            ["input_ids"],
        ),
        Spec(
            "t5-tiny",
            "transformers",
            seq2seq(
                tf.T5Config,
                tf.T5ForConditionalGeneration,
                vocab_size=vocab,
                d_model=64,
                d_kv=16,
                d_ff=128,
                num_layers=2,
                num_heads=4,
            ),
            seq2seq_inputs,
            ["input_ids", "decoder_input_ids"],
        ),
        Spec(
            "llama-tiny",
            "transformers",
            hf(
                tf.LlamaConfig,
                tf.LlamaForCausalLM,
                vocab_size=vocab,
                num_hidden_layers=2,
                num_key_value_heads=2,
                **small,
            ),
            _tokens(vocab),
            ["input_ids"],
        ),
        Spec(
            "whisper-tiny",
            "transformers",
            seq2seq(
                tf.WhisperConfig,
                tf.WhisperForConditionalGeneration,
                vocab_size=vocab,
                num_mel_bins=16,
                d_model=64,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=128,
                decoder_ffn_dim=128,
                max_source_positions=SEQ_LEN,
                max_target_positions=SEQ_LEN,
                decoder_start_token_id=0,
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
            ),
            whisper_inputs,
            ["input_features", "decoder_input_ids"],
        ),
    ]


def specs() -> list[Spec]:
    """Every model of the list, in order: torchvision, timm, Hugging Face (names unique)."""
    every = _torchvision_specs() + _timm_specs() + _hf_specs()
    assert len({s.name for s in every}) == len(every), "model names must be unique"
    return every


def export(spec: Spec, path: str) -> dict:
    """Exports `spec` in training mode to `path`; returns the exporter's figures."""
    import torch

    torch.manual_seed(0)
    model = spec.build()
    model.train()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # ONNX does not record which weights train: ordo is told (`--freeze`) of the frozen
    # parameters and the float buffers (Swin V2's coordinate tables) that the file holds.
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    frozen += [name for name, b in model.named_buffers() if b.is_floating_point()]
    inputs = spec.inputs()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            inputs,
            path,
            dynamo=False,
            opset_version=OPSET,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            input_names=spec.input_names,
            output_names=["logits"],
        )
    import onnx

    stored = {t.name for t in onnx.load(path, load_external_data=False).graph.initializer}
    return {
        "params": params,
        "frozen": [name for name in frozen if name in stored],
        "export_s": round(time.perf_counter() - start, 2),
        "file_mb": round(_size(path) / 2**20, 1),
    }


def _size(path: str) -> int:
    folder = os.path.dirname(path)
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))


def _ordo(binary: str, *args: str) -> dict:
    done = subprocess.run([binary, *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ordo {args[0]}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def check(spec: Spec, binary: str, folder: str) -> dict:
    """Exports `spec` into `folder` and checks it with ordo; returns the figures (an `error`
    entry names the first stage that failed)."""
    path = os.path.join(folder, spec.name + ".onnx")
    result: dict = {"name": spec.name, "library": spec.library}
    try:
        result.update(export(spec, path))
    except Exception as e:  # the exporter's own failure, reported, not ordo's
        result["error"] = f"export: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return result
    freeze = [arg for name in result["frozen"] for arg in ("--freeze", name)]
    try:
        inspected = _ordo(binary, "inspect", path, *freeze)
        result.update(
            ordo_params=inspected["params"],
            nodes=inspected["nodes"],
            build_ms=inspected["build_ms"],
        )
        if inspected["params"] != result["params"]:
            raise RuntimeError(
                f"ordo imports {inspected['params']} trainable parameters, the exporter "
                f"counts {result['params']}"
            )
        simulated = _ordo(
            binary,
            "simulate",
            path,
            "--train",
            "--loss",
            "cross-entropy",
            "--devices",
            "4",
            *freeze,
        )
        result["simulated_step_ms"] = round(simulated["step_time_us"] / 1e3, 2)
        losses = []
        for devices in ("cpu:1", "cpu:3"):
            run = _ordo(
                binary,
                "run",
                path,
                "--train",
                "--loss",
                "cross-entropy",
                "--steps",
                "2",
                "--devices",
                devices,
                "--algo",
                "m-etf",
                "--roofline",
                "--warmup-seconds",
                "0",
                *freeze,
            )
            losses.append(run["losses"])
            result[f"step_ms_{devices}"] = round(run["measured_step_us"] / 1e3, 1)
        result["losses"] = losses[0]
        if losses[0] != losses[1]:
            raise RuntimeError(f"losses on 1 device {losses[0]} differ on 3: {losses[1]}")
    except Exception as e:
        result["error"] = str(e)
    return result


def _selected(names: list[str], ci: bool) -> list[Spec]:
    every = specs()
    if ci:
        return [s for s in every if s.name in CI_MODELS]
    if not names:
        return every
    known = {s.name: s for s in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; `list` names them")
    return [known[n] for n in names]


def table(paths: list[str]) -> str:
    """A Markdown table of `check --json` results; a model in a later file replaces its row."""
    rows: dict[str, dict] = {}
    for path in paths:
        with open(path) as f:
            rows.update({r["name"]: r for r in json.load(f)})
    lines = [
        "| model | library | parameters | IR nodes | import ms | simulated step, 4 devices (ms) "
        "| CPU step ms, 1 / 3 devices | losses (1 and 3 devices) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows.values():
        if "error" in r:
            lines.append(f"| {r['name']} | {r['library']} | | | | | | error: {r['error'][:120]} |")
            continue
        losses = " ".join(f"{x:.4f}" for x in r["losses"])
        lines.append(
            f"| {r['name']} | {r['library']} | {r['params']:,} | {r['nodes']} "
            f"| {r['build_ms']:.0f} | {r['simulated_step_ms']} "
            f"| {r['step_ms_cpu:1']:.0f} / {r['step_ms_cpu:3']:.0f} | {losses} (equal) |"
        )
    passed = sum("error" not in r for r in rows.values())
    lines.append(f"\n{passed} of {len(rows)} models pass.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    exp = sub.add_parser("export")
    exp.add_argument("out")
    exp.add_argument("names", nargs="*")
    chk = sub.add_parser("check")
    chk.add_argument("names", nargs="*")
    chk.add_argument("--ci", action="store_true", help="only the models the CI runs")
    chk.add_argument("--ordo", default="target/release/ordo")
    chk.add_argument("--json", help="write every figure to this file")
    tab = sub.add_parser("table")
    tab.add_argument("results", nargs="+")
    args = parser.parse_args()

    if args.command == "table":
        print(table(args.results))
        return
    if args.command == "list":
        for s in specs():
            print(f"{s.library:13} {s.name}{'  (ci)' if s.name in CI_MODELS else ''}")
        return
    if args.command == "export":
        os.makedirs(args.out, exist_ok=True)
        for s in _selected(args.names, False):
            print(s.name, export(s, os.path.join(args.out, s.name + ".onnx")), flush=True)
        return
    results = []
    for s in _selected(args.names, args.ci):
        if s.build is None:
            results.append(
                {"name": s.name, "library": s.library, "error": "skipped: not installed"}
            )
        else:
            with tempfile.TemporaryDirectory() as folder:
                results.append(check(s, args.ordo, folder))
        r = results[-1]
        status = r.get("error", "ok")
        print(f"{r['library']:13} {r['name']:32} {status}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    failed = [r for r in results if "error" in r]
    print(f"{len(results) - len(failed)} of {len(results)} models pass")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
