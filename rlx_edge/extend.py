"""Extending rlx-edge from another package: ops, their target rules, their C kernels.

docs/custom_ops.md walks through a whole plugin. In short, a package declares
an ``rlx_edge.ops`` entry point naming a module (or a function) that, when
loaded, calls::

    op = register_op("my_clip", inputs=("x",), attrs={"limit": Attr("float", 1.0)})

    @op.infer
    def _(x, *, limit): return x                      # TensorType of the output

    @op.reference
    def _(x, *, limit): return np.clip(x, -limit, limit)

    @jax_rule("my_clip")
    def _(ctx): ...                                   # a function of the node's input arrays

    @cortexm_rule("my_clip", sources={"my_clip_s8.c": C_TEXT, "my_clip_s8.h": H_TEXT})
    def _(graph, node, params): return Layer("my_clip_s8", "my_clip_params", {...}, {}, [...])

The op registry loads the entry points the first time it needs an op it does
not know (ops/_plugins.py), so a model file that names the op loads, runs and
compiles once the package is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlx_edge.ir.ops import PLUGIN_GROUP, Attr, OpDef, QContext, defop


def register_op(
    name: str,
    *,
    inputs: tuple[str, ...],
    attrs: Mapping[str, Attr] | None = None,
    family: str = "custom",
    **options: Any,
) -> OpDef:
    """Declare an op (:func:`rlx_edge.ir.ops.defop` with family ``custom``); attach its functions with the
    returned OpDef's decorators: ``infer`` and ``reference`` (needed), ``prepare`` / ``eval`` (integer
    semantics), ``macs``, ``sample``, ``jvp`` / ``vjp``. ``options`` are defop's (``num_outputs``,
    ``int_dtypes``, ``passthrough_quant``, ``elementwise``, ...)."""
    return defop(name, family=family, inputs=inputs, attrs=dict(attrs or {}), **options)


def jax_rule(*ops: str) -> Callable[[Callable], Callable]:
    """Decorator: the jax target's rule for ``ops``. It is called once per node with the lowering context
    (``ctx.node``, ``ctx.attrs``, ``ctx.in_types``, ``ctx.consts``, ``ctx.quantized``) and returns a function
    of the node's input arrays (jax.numpy); ``ctx.shared_eval()`` is that function for an op whose integer
    ``eval`` is written against the array namespace."""
    from rlx_edge.targets.jax import RULES  # the table imports without jax

    return RULES.rule(*ops)


def cortexm_rule(*ops: str, sources: Mapping[str, str] | None = None) -> Callable[[Callable], Callable]:
    """Decorator: the Cortex-M target's rule for ``ops``, ``rule(graph, node, params) -> Layer``
    (:class:`rlx_edge.targets.cortexm.rules.Layer`: the kernel's name, its parameter struct and
    initializer, constant arrays, call arguments, scratch bytes; ``params`` are the node's prepared
    integer parameters). ``sources`` are the kernel's C files (name -> text), written to the project's
    ``kernels/`` and built with the library; a header named like the kernel (``my_clip_s8.h`` for
    kernel ``my_clip_s8``) is included by model.c, so it declares the kernel and its struct."""
    from rlx_edge.targets.cortexm.emit import EXTRA_KERNELS, kernel_sources
    from rlx_edge.targets.cortexm.rules import RULES

    clashes = sorted(set(sources or {}) & set(kernel_sources()))
    if clashes:
        raise RuntimeError(f"cortexm kernel file(s) {', '.join(clashes)} exist already; name them after your op")
    bad = [n for n in sources or {} if not n.endswith((".c", ".h")) or "/" in n]
    if bad:
        raise RuntimeError(f"cortexm kernel sources must be plain .c or .h file names, not {', '.join(bad)}")
    register = RULES.rule(*ops)

    def add(rule: Callable) -> Callable:
        register(rule)  # first: an unknown op leaves the kernel files unregistered
        EXTRA_KERNELS.update(sources or {})
        return rule

    return add


__all__ = ["PLUGIN_GROUP", "Attr", "OpDef", "QContext", "cortexm_rule", "jax_rule", "register_op"]
