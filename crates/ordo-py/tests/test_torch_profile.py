"""ordo.torch.profile: layers, shunted dependencies, times and memory categories of plain
PyTorch modules, and a cost graph that ordo places and NetworkX reads."""

import json

import pytest
import torch
from torch import nn

import ordo
import ordo.torch as ot


class Residual(nn.Module):
    """conv -> bn -> relu (in place) -> conv, plus the input: the add is not a layer."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv2(self.relu(self.bn(self.conv1(x)))) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = Residual()
        self.side = nn.Conv2d(4, 4, 1)
        self.head = nn.Linear(4 * 8 * 8 * 2, 10)

    def forward(self, x):
        x = self.stem(x)
        y = torch.cat([self.block(x), self.side(x)], dim=1)  # two branches, joined by cat
        return self.head(torch.flatten(y, 1))


def test_layers_dependencies_times_and_memory():
    net = Net()
    profiled = ot.profile(net, torch.randn(2, 3, 8, 8), reps=3, warmup=1, comm=(10.0, 0.001))
    assert profiled.layers == [
        "stem",
        "block.conv1",
        "block.bn",
        "block.relu",
        "block.conv2",
        "side",
        "head",
    ]
    edges = set(profiled.edges)
    # `+ x` and `torch.cat` are shunted: their consumers depend on the layers behind them.
    assert ("stem", "block.conv2") not in edges
    assert {("block.conv2", "head"), ("side", "head"), ("stem", "side")} <= edges
    assert ("stem", "head") in edges  # the residual's `+ x` reaches the head through cat
    nodes = {n["name"]: n for n in profiled.costgraph["nodes"]}
    for layer in profiled.layers:
        assert profiled.forward_us[layer] > 0, layer
        assert profiled.backward_us.get(layer, 0) >= 0, layer
        node = nodes[layer]
        assert node["weight"] >= 1
        # (a) parameters, (b) output.
        params = sum(p.numel() * 4 for p in dict(net.named_modules())[layer].parameters())
        assert node["persistent_memory"] == params, layer
    assert nodes["stem"]["output_memory"] == [2 * 4 * 8 * 8 * 4]
    assert nodes["block.relu"]["output_memory"] == [0], "in place: no output of its own"
    assert net.block.relu.inplace, "the profiler restores in-place modules"
    link = next(e for e in profiled.costgraph["links"] if e["source"] == 0 and e["target"] == 1)
    assert link["weight"] == round(10.0 + 0.001 * 2 * 4 * 8 * 8 * 4)


def test_the_cost_graph_places_in_ordo_and_loads_in_networkx(tmp_path):
    profiled = ot.profile(Net(), torch.randn(2, 3, 8, 8), reps=2, warmup=1)
    model = profiled.model()
    assert model.nodes == len(profiled.layers)
    problem = ordo.Problem(model, ordo.Target.uniform(2), mode="training")
    placement = ordo.place(problem, "m-etf")
    assert set(placement.device_of) == set(profiled.layers)
    path = tmp_path / "net.json"
    profiled.save(str(path))
    assert json.loads(path.read_text()) == profiled.costgraph
    assert ordo.Model.load(str(path)).nodes == len(profiled.layers)
    nx = pytest.importorskip("networkx")
    graph = nx.node_link_graph(profiled.costgraph, edges="links")
    assert nx.is_directed_acyclic_graph(graph)
    assert graph.number_of_nodes() == len(profiled.layers)


def test_user_chosen_granularity_and_tied_modules():
    net = Net()
    by_name = ot.profile(net, torch.randn(2, 3, 8, 8), leaf_modules=["block"], reps=1, warmup=0)
    assert by_name.layers == ["stem", "block", "side", "head"]
    block = next(n for n in by_name.costgraph["nodes"] if n["name"] == "block")
    assert block["persistent_memory"] == sum(p.numel() * 4 for p in net.block.parameters())
    by_type = ot.profile(net, torch.randn(2, 3, 8, 8), leaf_modules=[Residual], reps=1, warmup=0)
    assert by_type.layers == by_name.layers

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Linear(8, 8)
            self.out = nn.Linear(8, 2)

        def forward(self, x):
            return self.out(self.shared(self.shared(x)))

    tied = ot.profile(Tied(), torch.randn(3, 8), reps=2, warmup=1)
    assert tied.layers == ["shared", "shared#1", "out"]
    assert ("shared", "shared#1") in tied.edges
    nodes = {n["name"]: n for n in tied.costgraph["nodes"]}
    assert nodes["shared#1"]["persistent_memory"] == 0, "its parameters live with the first call"
    assert nodes["shared#1"]["colocation_group"] == nodes["shared"]["colocation_group"]
    assert nodes["out"]["colocation_group"] == "out"
    problem = ordo.Problem(tied.model(), ordo.Target.uniform(3), mode="training")
    for algo in ["m-topo", "m-etf", "m-sct", "round-robin"]:
        device_of = ordo.place(problem, algo).device_of
        assert device_of["shared"] == device_of["shared#1"], algo


@pytest.mark.parametrize("split", [True, "pipelining"])
def test_split_backward_times_input_and_weight_gradients_apart(split):
    """Both ways of timing dX and dW apart (ordo's split layers, PyTorch's pipeline runtime's
    I and W) give every layer with parameters both times, a layer without them no dW, and
    leave no gradient behind."""
    net = Net()
    profiled = ot.profile(net, torch.randn(2, 3, 8, 8), reps=2, warmup=1, split_backward=split)
    modules = dict(net.named_modules())
    for node in profiled.costgraph["nodes"]:
        has_params = any(True for _ in modules[node["name"]].parameters())
        assert node["input_grad_us"] > 0, node["name"]
        assert (node["weight_grad_us"] > 0) == has_params, node["name"]
    assert all(p.grad is None for p in net.parameters())
    assert profiled.training_model() is not None  # a split profile makes a training graph


def test_bad_arguments_are_ordo_errors():
    with pytest.raises(ordo.OrdoError, match="split_backward='sideways'"):
        ot.profile(Net(), torch.randn(2, 3, 8, 8), split_backward="sideways")
    with pytest.raises(ordo.OrdoError, match="no_such_block"):
        ot.profile(Net(), torch.randn(2, 3, 8, 8), leaf_modules=["no_such_block"])
    with pytest.raises(ordo.OrdoError, match="reps"):
        ot.profile(Net(), torch.randn(2, 3, 8, 8), reps=0)
    with pytest.raises(ordo.OrdoError, match="no layers"):
        ot.profile(nn.Identity(), torch.randn(2, 3))


@pytest.mark.parametrize(
    "name, size",
    [
        ("resnet18", 64),
        ("mobilenet_v3_small", 64),
        ("densenet121", 64),
        ("inception_v3", 75),
        ("vit_b_16", 224),
    ],
)
def test_torchvision_models_profile_whole(name, size):
    """Real models as they are: in-place `+=` (ResNet), functional in-place ReLUs (DenseNet,
    Inception), Python control flow and attention that uses its children's weights itself
    (ViT). Every parameter is counted once, on some layer; the graph is a DAG ordo places."""
    torchvision = pytest.importorskip("torchvision")
    kwargs = {"num_classes": 10}
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=False)
    model = getattr(torchvision.models, name)(**kwargs)
    batch = 1 if name == "vit_b_16" else 2  # batch norm in training needs two values
    example = torch.randn(batch, 3, size, size)
    profiled = ot.profile(model, example, reps=1, warmup=0, comm=(10, 1e-4))
    nodes = profiled.costgraph["nodes"]
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert sum(n["persistent_memory"] for n in nodes) == parameter_bytes
    assert len(profiled.layers) >= 20
    nx = pytest.importorskip("networkx")
    graph = nx.node_link_graph(profiled.costgraph, edges="links")
    assert nx.is_directed_acyclic_graph(graph) and nx.is_weakly_connected(graph)
    placement = ordo.place(ordo.Problem(profiled.model(), ordo.Target.uniform(4)), "m-etf")
    assert set(placement.device_of) == set(profiled.layers)
    if name == "vit_b_16":
        attention = [n for n in nodes if n["op_type"] == "MultiheadAttention"]
        assert len(attention) == 12 and all(n["persistent_memory"] > 0 for n in attention)
