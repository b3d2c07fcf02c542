"""flex_attention on the host driver's kernel device, where Inductor's CPU template cannot take it.

On the host driver a musa graph is compiled as the CPU graph over the same memory
(:mod:`.kernel_device_pass`). Inductor's CPU lowering of ``flex_attention`` is a C++ template
for inference only: it refuses a forward that must also return the logsumexp (what every
forward that may be differentiated asks for on a GPU-like device such as musa), and
``flex_attention_backward`` has no CPU lowering at all. Those nodes are replaced here, in the
CPU graph, by the aten graph of torch's own dense implementation of the same higher-order op
(the kernels eager flex_attention runs: its CompositeExplicitAutograd implementations), traced
with Inductor's decompositions. Inductor then compiles them like any CPU graph (fused C++
kernels over the full scores matrix). Inference forwards keep the C++ template.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_flatten, tree_unflatten

_FLOAT_TYPES = (torch.float32, torch.bfloat16, torch.float16)


def _hops():
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    return flex_attention, flex_attention_backward


def _cpu_template_takes(node: torch.fx.Node) -> bool:
    """Whether Inductor's CPU template lowers this forward node (torch's flex_cpu.lower_cpu)."""
    try:
        from torch._inductor.kernel.flex.flex_cpu import check_cpu_supported
    except ImportError:  # Inductor laid out otherwise: the dense implementation is always right
        return False
    options = node.args[6]
    if options.get("OUTPUT_LOGSUMEXP") or options.get("OUTPUT_MAX"):
        return False
    dtypes = {getattr(a.meta.get("val"), "dtype", None) for a in node.args[:3]}
    return len(dtypes) == 1 and dtypes.pop() in _FLOAT_TYPES and check_cpu_supported()


def decompose_where_needed(gm: torch.fx.GraphModule, fake_mode) -> dict:
    """Replaces the flex_attention nodes of ``gm`` (already a CPU graph) that Inductor's CPU
    lowering refuses by the traced dense implementation. Returns {replaced result node: its
    replacement}."""
    replaced = {}
    if not any(n.op == "call_function" and "flex_attention" in str(n.target) for n in gm.graph.nodes):
        return replaced
    forward, backward = _hops()
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is backward or (node.target is forward and not _cpu_template_takes(node)):
            _inline_dense(gm, node, fake_mode, replaced)
    if replaced:
        gm.graph.lint()
        gm.recompile()
    return replaced


def _inline_dense(gm: torch.fx.GraphModule, node: torch.fx.Node, fake_mode, replaced: dict) -> None:
    from torch._dispatch.python import enable_python_dispatcher
    from torch._inductor.decomposition import select_decomp_table
    from torch._C import DispatchKey
    from torch.fx.experimental.proxy_tensor import make_fx

    dense = node.target.py_kernels[DispatchKey.CompositeExplicitAutograd]
    flat, spec = tree_flatten((node.args, node.kwargs))
    values = list(flat)
    inputs = []  # (position in flat, graph node)
    for i, a in enumerate(flat):
        if not isinstance(a, torch.fx.Node):
            continue
        if a.op == "get_attr":  # score_mod / mask_mod / joint subgraphs
            values[i] = _batchable(_attr(gm, a.target))
        else:
            values[i] = a.meta["val"]
            inputs.append((i, a))

    def run(*tensors):
        vals = list(values)
        for (i, _), t in zip(inputs, tensors):
            vals[i] = t
        args, kwargs = tree_unflatten(vals, spec)
        return dense(*args, **kwargs)

    with fake_mode, enable_python_dispatcher():
        traced = make_fx(run, decomposition_table=select_decomp_table(), tracing_mode="real")(
            *[values[i] for i, _ in inputs])

    graph = gm.graph
    env = {}
    placeholders = iter(a for _, a in inputs)
    result = None
    with graph.inserting_before(node):
        for n in traced.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(placeholders)
            elif n.op == "get_attr":
                name = _fresh_attr_name(gm, "_musa_flex_const")
                value = _attr(traced, n.target)
                if isinstance(value, torch.Tensor):
                    gm.register_buffer(name, value)
                else:
                    setattr(gm, name, value)
                env[n] = graph.get_attr(name)
                env[n].meta.update(n.meta)
            elif n.op == "output":
                result = torch.fx.map_arg(n.args[0], lambda x: env[x])
            else:
                env[n] = graph.node_copy(n, lambda x: env[x])
    _replace_results(graph, node, result, replaced)
    graph.erase_node(node)


def _batchable(sub: Any) -> Any:
    """A copy of a post-grad subgraph whose ops all have vmap batching rules: the dense
    implementation vmaps score_mod and mask_mod over (b, h, q, kv), and an op without a rule
    (prims.convert_element_type, which a ``.to(dtype)`` decomposes to) falls back to one call
    per score element."""
    if not isinstance(sub, torch.fx.GraphModule):
        return sub
    convert = torch.ops.prims.convert_element_type.default
    if not any(n.target is convert for n in sub.graph.nodes):
        return sub
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(sub.graph, {}))
    for n in list(graph.nodes):
        if n.target is convert:
            with graph.inserting_before(n):
                cast = graph.call_function(torch.ops.aten._to_copy.default, (n.args[0],), {"dtype": n.args[1]})
            cast.meta.update(n.meta)
            n.replace_all_uses_with(cast)
            graph.erase_node(n)
    return torch.fx.GraphModule(sub, graph)  # sharing the subgraph's submodules and constants


def _replace_results(graph: torch.fx.Graph, node: torch.fx.Node, result: Any, replaced: dict) -> None:
    """Points each ``getitem`` user of the op's (nested) tuple result at the traced value."""
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise RuntimeError(f"torch_musa: unexpected use of {node.target}'s result: {user.format_node()}")
        part = result[user.args[1]]
        if isinstance(part, (tuple, list)):
            _replace_results(graph, user, part, replaced)
        elif part is None:
            if user.users:
                raise RuntimeError(f"torch_musa: {node.target} gives no value for {user.format_node()}")
        else:
            user.replace_all_uses_with(part)
            replaced[user] = part
        graph.erase_node(user)


def _attr(owner: Any, target: str) -> Any:
    for part in target.split("."):
        owner = getattr(owner, part)
    return owner


def _fresh_attr_name(gm: torch.fx.GraphModule, prefix: str) -> str:
    i = 0
    while hasattr(gm, f"{prefix}{i}"):
        i += 1
    return f"{prefix}{i}"
