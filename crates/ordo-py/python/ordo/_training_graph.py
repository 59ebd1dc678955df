"""A profiled module's training step as an ordo cost graph with roles (doc/costgraph.md):
each layer's forward, input gradient (``dx``), weight gradient (``dw``) and update as nodes of
their own, so that ordo can schedule them apart (pipelines, out-of-order backprop).

Dependencies, per layer ``L`` reading producers ``P`` and read by consumers ``C``:

* ``L`` (forward) after each ``P``, as profiled;
* ``L.dx`` after ``L`` (its saved activations) and each ``C.dx`` (the gradient of ``L``'s
  output); a layer nobody reads starts the backward (the loss is part of it);
* ``L.dw`` after ``L`` and the same upstream gradients as ``L.dx``;
* ``L.update`` after ``L.dw``.

The gradient ``C.dx`` sends to ``L`` has the size of ``L``'s output and the profile's
transfer cost for it (``comm_fixed_us``, ``comm_us_per_byte``); ``L.dw`` produces its
parameters' size in gradients.
"""

from __future__ import annotations

import copy

import ordo


def training_costgraph(costgraph: dict) -> dict:
    """The training graph of a profile's cost graph made with ``split_backward=True``."""
    graph = costgraph["graph"]
    if not graph.get("split_backward"):
        raise ordo.OrdoError(
            "the training graph needs each layer's input and weight gradients timed apart: "
            "profile with split_backward=True"
        )
    forward = copy.deepcopy(costgraph["nodes"])
    ids = {node["name"]: node["id"] for node in forward}
    by_id = {node["id"]: node for node in forward}
    next_id = max(ids.values(), default=-1) + 1
    consumers: dict[int, list[int]] = {i: [] for i in by_id}
    producers: dict[int, list[int]] = {i: [] for i in by_id}
    for link in costgraph["links"]:
        consumers[link["source"]].append(link["target"])
        producers[link["target"]].append(link["source"])

    def out_bytes(i: int) -> int:
        return sum(by_id[i]["output_memory"])

    nodes, links = [], copy.deepcopy(costgraph["links"])
    dx_of: dict[int, int] = {}
    for node in forward:
        node["weight"] = max(1, round(node["forward_us"]))
        nodes.append(node)

    def add(name, role, layer, weight, output, group) -> int:
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

    fixed_us = graph.get("comm_fixed_us", 0.0)
    us_per_byte = graph.get("comm_us_per_byte", 0.0)

    def link(source: int, target: int, tensor: str, size: int) -> None:
        # A gradient sent to a layer on another device costs what the profile's forward
        # links cost for the same bytes; a layer's own saved activations move nowhere.
        tensor_weight = max(0, round(fixed_us + us_per_byte * size)) if size else 0
        links.append(
            {
                "source": source,
                "target": target,
                "weight": tensor_weight,
                "tensor": [{"name": tensor, "num_bytes": size, "weight": tensor_weight}],
            }
        )

    # Gradients flow from the last layers to the first: build dx nodes in reverse order, so
    # that every consumer's dx exists before its producers read it. The updates come after
    # the whole backward, as optimizer.step() runs after loss.backward() (the node order is
    # the order a schedule starts from).
    updates = []
    for node in reversed(forward):
        i, name, group = node["id"], node["name"], node["colocation_group"]
        grad_bytes = sum(out_bytes(p) for p in producers[i])
        dx = add(f"{name}.dx", "dx", i, node["input_grad_us"], grad_bytes, group)
        dx_of[i] = dx
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
