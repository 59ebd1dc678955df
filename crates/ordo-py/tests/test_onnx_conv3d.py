"""3-D convolutions as PyTorch exports them (video and volumetric models): `Conv3d` and
`ConvTranspose3d` with groups, strides, padding, output padding and dilations. ordo imports
each as 2-D (transposed) convolutions, one per tap of the kernel's depth; its forward pass on
the CPU kernels gives PyTorch's output (`ordo conformance` on a case written from PyTorch's
run, which also checks what onnx's reference evaluator gets wrong: grouped transposed
convolutions), and the import counts PyTorch's trainable parameters."""

import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from test_onnx_control_flow import export, write_case  # noqa: E402
from test_onnx_models import cli  # noqa: E402


class Volumetric(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv3d(4, 6, (3, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0), groups=2)
        self.mid = torch.nn.Conv3d(6, 6, (2, 1, 3), dilation=(2, 1, 1), padding=(0, 0, 1))
        self.up = torch.nn.ConvTranspose3d(
            6,
            4,
            (3, 2, 3),
            stride=(2, 2, 1),
            padding=(1, 0, 1),
            output_padding=(1, 1, 0),
            dilation=(2, 1, 1),
            groups=2,
        )

    def forward(self, x):
        return self.up(torch.relu(self.mid(torch.relu(self.down(x)))))


def test_3d_convolutions_run_as_pytorch_and_count_its_parameters(tmp_path):
    torch.manual_seed(0)
    model = Volumetric().eval()
    x = torch.randn(2, 4, 6, 7, 8)
    case = tmp_path / "conv3d"
    path = case / "model.onnx"
    case.mkdir()
    export(model, x, path)
    with torch.no_grad():
        write_case(case, x, model(x))
    out = subprocess.run(
        [cli(), "conformance", str(case), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["pass"] == 1, result["cases"]
    out = subprocess.run([cli(), "inspect", str(path), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    params = sum(p.numel() for p in model.parameters())
    assert json.loads(out.stdout)["params"] == params
