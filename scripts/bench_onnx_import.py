"""Import time of ONNX models: a generated 10,000-node graph (2,500 blocks of MatMul, Add, Relu,
Identity on 16 x 16 weights) and any files given, each imported by `ordo inspect --json` five
times; prints the median of the build time ordo reports (read, decode, import) and of the
whole process, and the peak memory.

    python scripts/bench_onnx_import.py [--ordo BIN] [MODEL.onnx ...]     # needs onnx, numpy
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time


def deep_model(path: str, blocks: int = 2500) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for b in range(blocks):
        inits.append(numpy_helper.from_array(rng.random((16, 16), np.float32) * 0.1, f"w{b}"))
        inits.append(numpy_helper.from_array(np.zeros(16, np.float32), f"b{b}"))
        nodes += [
            helper.make_node("MatMul", [x, f"w{b}"], [f"m{b}"], name=f"m{b}"),
            helper.make_node("Add", [f"m{b}", f"b{b}"], [f"a{b}"], name=f"a{b}"),
            helper.make_node("Relu", [f"a{b}"], [f"r{b}"], name=f"r{b}"),
            helper.make_node("Identity", [f"r{b}"], [f"i{b}"], name=f"i{b}"),
        ]
        x = f"i{b}"
    graph = helper.make_graph(
        nodes,
        "deep",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [4, 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def measure(binary: str, path: str, runs: int = 5) -> dict:
    build, wall = [], []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run([binary, "inspect", path, "--json"], capture_output=True, text=True)
        wall.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise SystemExit(f"{path}: {out.stderr.strip()}")
        build.append(json.loads(out.stdout)["build_ms"])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "model": os.path.basename(path),
        "onnx_mb": round(os.path.getsize(path) / 2**20, 1),
        "build_ms": round(statistics.median(build), 1),
        "process_ms": round(1e3 * statistics.median(wall), 1),
        "peak_mib_so_far": round(peak),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--ordo", default="target/release/ordo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        deep = os.path.join(folder, "deep_10000_nodes.onnx")
        deep_model(deep)
        for path in [deep, *args.models]:
            print(json.dumps(measure(args.ordo, path)), flush=True)


if __name__ == "__main__":
    main()
