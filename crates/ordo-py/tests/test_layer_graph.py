"""ordo.LayerGraph against the reference: the cost graphs the Python package built by hand
before ordo built them (one node per layer, and the training graph of the layers with each
layer's dX, dW and update apart), on random layer graphs with times that round half-way."""

import copy
import json
import random

import pytest

import ordo


def reference_costgraph(name, layers, edges, group, comm, training, split):
    """The cost graph as ``ordo.torch.profile`` wrote it in Python."""
    fixed_us, us_per_byte = comm
    index = {layer["name"]: i for i, layer in enumerate(layers)}
    nodes = []
    for layer in layers:
        fwd, bwd = layer["forward_us"], layer["backward_us"]
        weight = fwd + bwd if training else fwd
        nodes.append(
            {
                "id": index[layer["name"]],
                "name": layer["name"],
                "weight": max(1, round(weight)),
                "temporary_memory": layer["temporary_bytes"],
                "persistent_memory": layer["persistent_bytes"],
                "output_memory": [layer["output_bytes"]],
                "op_type": layer["op_type"],
                "colocation_group": group[layer["name"]],
                "forward_us": round(fwd, 3),
                "backward_us": round(bwd, 3),
                "input_grad_us": round(layer["input_grad_us"], 3),
                "weight_grad_us": round(layer["weight_grad_us"], 3),
            }
        )
    links = []
    for producer, consumer in edges:
        size = layers[index[producer]]["output_bytes"]
        weight = max(0, round(fixed_us + us_per_byte * size))
        tensor = {"name": f"{producer}:0", "num_bytes": size, "weight": weight}
        links.append(
            {
                "source": index[producer],
                "target": index[consumer],
                "weight": weight,
                "tensor": [tensor],
            }
        )
    return {
        "directed": True,
        "multigraph": False,
        "graph": {
            "name": name,
            "source": "ordo.torch.profile",
            "device": "cpu",
            "reps": 3,
            "training": training,
            "comm_fixed_us": fixed_us,
            "comm_us_per_byte": us_per_byte,
            "split_backward": split,
        },
        "nodes": nodes,
        "links": links,
    }


def reference_training(costgraph):
    """The training graph of a profile's cost graph, as the Python package built it."""
    graph = costgraph["graph"]
    forward = copy.deepcopy(costgraph["nodes"])
    by_id = {node["id"]: node for node in forward}
    next_id = max(by_id, default=-1) + 1
    consumers = {i: [] for i in by_id}
    producers = {i: [] for i in by_id}
    for link in costgraph["links"]:
        consumers[link["source"]].append(link["target"])
        producers[link["target"]].append(link["source"])

    def out_bytes(i):
        return sum(by_id[i]["output_memory"])

    nodes, links = [], copy.deepcopy(costgraph["links"])
    for node in forward:
        node["weight"] = max(1, round(node["forward_us"]))
        nodes.append(node)

    def add(name, role, layer, weight, output, group):
        nonlocal next_id
        i, next_id = next_id, next_id + 1
        nodes.append(
            {
                "id": i,
                "name": name,
                "weight": max(1, round(weight)),
                "temporary_memory": 0,
                "persistent_memory": 0,
                "output_memory": [output],
                "op_type": role,
                "colocation_group": group,
                "role": role,
                "layer": layer,
            }
        )
        return i

    def link(source, target, tensor, size):
        weight = max(0, round(graph["comm_fixed_us"] + graph["comm_us_per_byte"] * size))
        weight = weight if size else 0
        links.append(
            {
                "source": source,
                "target": target,
                "weight": weight,
                "tensor": [{"name": tensor, "num_bytes": size, "weight": weight}],
            }
        )

    dx_of, updates = {}, []
    for node in reversed(forward):
        i, name, group = node["id"], node["name"], node["colocation_group"]
        grad_bytes = sum(out_bytes(p) for p in producers[i])
        dx_of[i] = dx = add(f"{name}.dx", "dx", i, node["input_grad_us"], grad_bytes, group)
        upstream = [(dx_of[c], f"{by_id[c]['name']}.dx:{name}") for c in consumers[i]]
        link(i, dx, f"{name}:saved", 0)
        for source, tensor in upstream:
            link(source, dx, tensor, out_bytes(i))
        if node["persistent_memory"] > 0 or node["weight_grad_us"] > 0:
            size = node["persistent_memory"]
            dw = add(f"{name}.dw", "dw", i, node["weight_grad_us"], size, group)
            link(i, dw, f"{name}:saved", 0)
            for source, tensor in upstream:
                link(source, dw, tensor, out_bytes(i))
            updates.append((dw, name, i, size, group))
    for dw, name, i, size, group in updates:
        update = add(f"{name}.update", "update", i, 1, 0, group)
        link(dw, update, f"{name}.dw:0", size)
    result = copy.deepcopy(costgraph)
    result["nodes"], result["links"] = nodes, links
    result["graph"] = dict(graph, training_graph=True)
    return result


def random_time(rng):
    # Half-way values (2.5, 3.4995) round to even in Python: ordo must round them alike.
    return rng.choice([0.0, 0.5, 1.5, 2.5, 3.4995, 7.0625, rng.uniform(0, 50), rng.uniform(0, 1)])


def random_layers(rng, n):
    layers = []
    for i in range(n):
        params = rng.choice([0, 0, 64, 4096])
        layers.append(
            {
                "name": f"layer{i}",
                "op_type": rng.choice(["Linear", "ReLU", "Conv2d"]),
                "forward_us": random_time(rng),
                "backward_us": random_time(rng),
                "input_grad_us": random_time(rng),
                "weight_grad_us": random_time(rng) if params else 0.0,
                "temporary_bytes": rng.choice([0, 128]),
                "persistent_bytes": params,
                "output_bytes": rng.choice([0, 4, 1024, 99991]),
            }
        )
    pairs = {(rng.randrange(j), j) for j in range(1, n) for _ in range(rng.randint(1, 2))}
    edges = [(f"layer{p}", f"layer{c}") for p, c in sorted(pairs)]
    group = {layer["name"]: layer["name"] for layer in layers}
    for layer in layers[1:]:
        if rng.random() < 0.2:
            group[layer["name"]] = group[layers[rng.randrange(len(layers))]["name"]]
    return layers, edges, group


@pytest.mark.parametrize("seed", range(12))
def test_layer_graph_builds_the_cost_graphs_the_python_package_built(seed):
    rng = random.Random(seed)
    layers, edges, group = random_layers(rng, rng.randint(1, 14))
    comm = (rng.choice([0.0, 10.0, 2.5]), rng.choice([0.0, 0.001, 0.0005]))
    training = rng.random() < 0.7
    split = rng.choice([True, "pipelining"])
    graph = ordo.LayerGraph(
        "net", comm=comm, device="cpu", reps=3, training=training, split_backward=split
    )
    index = {layer["name"]: graph.add_layer(**layer) for layer in layers}
    for layer in layers:
        if group[layer["name"]] != layer["name"]:
            graph.colocate(index[layer["name"]], index[group[layer["name"]]])
    for producer, consumer in edges:
        graph.add_edge(index[producer], index[consumer])
    want = reference_costgraph("net", layers, edges, group, comm, training, split)
    want = json.loads(json.dumps(want))
    assert json.loads(graph.to_json()) == want
    assert json.loads(graph.training_json()) == json.loads(json.dumps(reference_training(want)))
    assert graph.model().nodes == len(layers)
    assert graph.training_model().nodes == len(json.loads(graph.training_json())["nodes"])


def test_bad_layer_graphs_are_refused_naming_what_is_wrong():
    with pytest.raises(ordo.OrdoError, match=r"comm=\(-5, -1\)"):
        ordo.LayerGraph("net", comm=(-5, -1))
    with pytest.raises(ordo.OrdoError, match="split_backward='sideways'"):
        ordo.LayerGraph("net", comm=(0, 0), split_backward="sideways")
    graph = ordo.LayerGraph("net", comm=(0, 0))
    a = graph.add_layer("a", op_type="Linear", forward_us=1.0)
    with pytest.raises(ordo.OrdoError, match="layer `a` is added twice"):
        graph.add_layer("a", op_type="Linear", forward_us=1.0)
    with pytest.raises(ordo.OrdoError, match="layer `b`: forward_us=NaN"):
        graph.add_layer("b", op_type="Linear", forward_us=float("nan"))
    with pytest.raises(ordo.OrdoError, match="layer 3: the graph has 1 layers"):
        graph.add_edge(a, 3)
    with pytest.raises(ordo.OrdoError, match="from layer `a` to itself"):
        graph.add_edge(a, a)
    with pytest.raises(ordo.OrdoError, match="split_backward=True"):
        graph.training_model()
