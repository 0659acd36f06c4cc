"""Program -> a self-contained C library (model.h, model.c, weights.c, kernels, Makefile).

The generated code has no interpreter and no heap: ``model.c`` is one kernel
call per scheduled node with every parameter a ``static const`` struct and
every activation an arena offset known at compile time; ``weights.c`` holds
the constant arrays (re-laid out by the rules in :mod:`.rules`) in flash.

Entry points declared in ``model.h`` (documented there)::

    int rlx_model_invoke(const void *input, void *output, uint8_t *arena);
    int rlx_model_invoke_multi(const void *const *inputs, void *const *outputs, uint8_t *arena);
"""

from __future__ import annotations

import hashlib
import math
import textwrap
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan import Program
from rlx_edge.pipeline import AS_GIVEN, to_program
from rlx_edge.targets.cortexm._control import IF_KERNEL, WHILE_KERNEL, subgraph_programs
from rlx_edge.targets.cortexm.rules import OPTIMIZE_LEVELS, Const, Layer, Symbol, layer_for

__all__ = ["CORES", "EmittedModel", "compile_project", "emit", "kernel_sources", "lower"]

# compiler flags per core (the C is the same; __ARM_FEATURE_DSP picks the SIMD path)
CORES: dict[str, str] = {
    "cortex-m0": "-mcpu=cortex-m0 -mthumb",
    "cortex-m0plus": "-mcpu=cortex-m0plus -mthumb",
    "cortex-m3": "-mcpu=cortex-m3 -mthumb",
    "cortex-m4": "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16",
    "cortex-m7": "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16",
    "cortex-m33": "-mcpu=cortex-m33 -mthumb -mfloat-abi=hard -mfpu=fpv5-sp-d16",
    "host": "",
}

_DSP_CORES = ("cortex-m4", "cortex-m7", "cortex-m33")

_CTYPES = {
    np.dtype(np.int8): "int8_t",
    np.dtype(np.uint8): "uint8_t",
    np.dtype(np.bool_): "uint8_t",  # constant conditions (select_v2): one byte, 0 or 1, as bool values in the arena
    np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t",
    np.dtype(np.int64): "int64_t",  # the int64 biases of int16x8 layers
    np.dtype(np.float32): "float",
}


def lower(graph_or_program: Graph | Program) -> Program:
    """Plan a graph for this target through the pipeline (as given, not optimized), or check a given Program."""
    if isinstance(graph_or_program, Program):
        prog = graph_or_program
        if prog.target != "cortexm":
            raise RlxError(f"program was planned for target {prog.target!r}, not cortexm")
        return prog
    return to_program(graph_or_program, "cortexm", AS_GIVEN)


# Kernel sources of other packages' ops (rlx_edge.extend.cortexm_rule): file name -> text. They
# ship in kernels/ beside the library's own and build with them.
EXTRA_KERNELS: dict[str, str] = {}


def kernel_sources() -> dict[str, str]:
    """The kernel library shipped as package data, and the kernels other packages registered: file name -> text."""
    root = resources.files("rlx_edge.targets.cortexm") / "kernels"
    out = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".c", ".h")):
            out[entry.name] = entry.read_text(encoding="utf-8")
    return {**out, **dict(sorted(EXTRA_KERNELS.items()))}


# C rendering ---------------------------------------------------------------------------------
def _c_float(v: float) -> str:
    f = float(np.float32(v))
    if not math.isfinite(f):
        raise RlxError(f"non-finite constant {f} cannot be emitted")
    return f"{f.hex()}f" if f != 0 else "0.0f"


def _c_int(v: int) -> str:
    v = int(v)
    if v == -(2**31):
        return "INT32_MIN"
    if v == -(2**63):
        return "INT64_MIN"
    return str(v) if -(2**31) < v < 2**31 else f"{v}LL"


_GUARD_IF = {"dsp": "#if RLX_USE_DSP", "portable": "#if !RLX_USE_DSP"}


def _render(value: Any, names: dict[str, str]) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, Const):
        return names[value.key]
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, dict):
        return "{" + ", ".join(f".{k} = {_render(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(_render(v, names) for v in value) + "}"
    if isinstance(value, (float, np.floating)):
        return _c_float(value)
    return _c_int(value)


def _array_text(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)
    if flat.dtype == np.float32:
        items = [_c_float(v) for v in flat]
    else:
        items = [_c_int(v) for v in flat.tolist()]
    lines = []
    for i in range(0, len(items), 16):
        lines.append("    " + ", ".join(items[i : i + 16]) + ",")
    return "\n".join(lines) if lines else "    0,"


def _comment(text: str) -> str:
    return text.replace("*/", "* /").replace("\n", " ")


@dataclass
class EmittedModel:
    """The generated sources and the numbers a build reports."""

    files: dict[str, str]  # relative path -> text (kernels under kernels/)
    arena_bytes: int
    weight_bytes: int  # const bytes in weights.c, for the larger of the two builds
    program: Program
    model_hash: str
    weight_bytes_dsp: int = 0  # const bytes a DSP (SXTB16/SMLAD) build compiles
    weight_bytes_portable: int = 0  # const bytes a portable build compiles
    optimize: str = "balanced"  # the layout level (rules.OPTIMIZE_LEVELS)


def _io_macros(prefix: str, graph: Graph, value: str) -> list[str]:
    t = graph.types[value]
    shape = [int(d) for d in t.shape]
    nbytes = math.prod(shape) * t.dtype.storage_bytes
    lines = [
        f"#define {prefix}_SIZE {nbytes}u /* bytes */",
        f"#define {prefix}_ELEMS {math.prod(shape)}u",
        f"#define {prefix}_RANK {len(shape)}",
        f"#define {prefix}_SHAPE {{{', '.join(map(str, shape)) or '1'}}}",
        f'#define {prefix}_DTYPE "{t.dtype.value}"',
    ]
    if t.quant is not None and t.quant.scale.size == 1:
        lines.append(f"#define {prefix}_SCALE {_c_float(float(t.quant.scale[0]))}")
        lines.append(f"#define {prefix}_ZERO_POINT {int(t.quant.zero_point[0])}")
    return lines


def _check_optimize(optimize: str) -> None:
    if optimize not in OPTIMIZE_LEVELS:
        raise RlxError(f"unknown optimize level {optimize!r}; use one of {', '.join(OPTIMIZE_LEVELS)}")


def emit(graph_or_program: Graph | Program, optimize: str = "balanced") -> EmittedModel:
    """Generate the C library for a quantized graph (or its cortexm Program).

    ``optimize`` (size, balanced, speed) picks the constant layouts (see
    ``rules.OPTIMIZE_LEVELS``); the plan is the same for all three.
    """
    _check_optimize(optimize)
    prog = lower(graph_or_program)
    g = prog.graph
    out = _Code(optimize)
    calls = _layer_code(prog, out, "", 0)
    weight_defs, weight_decls, structs, per_build = out.weight_defs, out.weight_decls, out.structs, out.per_build
    weight_bytes = per_build[""] + max(per_build["dsp"], per_build["portable"])

    ins = [(k, v) for k, v in enumerate(g.inputs)]
    outs = [(k, v) for k, v in enumerate(g.outputs)]
    copy_in = [f"    memcpy(arena + {prog.offsets[v]}u, inputs[{k}], RLX_INPUT{k}_SIZE);" for k, v in ins]
    copy_out = [f"    memcpy(outputs[{k}], arena + {prog.offsets[v]}u, RLX_OUTPUT{k}_SIZE);" for k, v in outs]

    kernels = kernel_sources()
    body_for_hash = "\n".join(weight_defs + structs + calls + copy_in + copy_out) + "".join(kernels.values())
    model_hash = hashlib.sha256(body_for_hash.encode()).hexdigest()[:16]

    header = _model_h(g, prog, model_hash)
    used = out.kernels
    model_c = _model_c(structs, calls, copy_in, copy_out, len(ins) == 1 and len(outs) == 1, used)
    weights_h = _WEIGHTS_H.format(decls="\n".join(weight_decls))
    weights_c = _WEIGHTS_C.format(defs="\n".join(weight_defs))
    files = {"model.h": header, "model.c": model_c, "weights.h": weights_h, "weights.c": weights_c}
    for name, text in kernels.items():
        files[f"kernels/{name}"] = text
    return EmittedModel(
        files,
        prog.arena_bytes,
        weight_bytes,
        prog,
        model_hash,
        per_build[""] + per_build["dsp"],
        per_build[""] + per_build["portable"],
        optimize,
    )


@dataclass
class _Code:
    """What the layers of a program (and of the subgraphs of its loops) add to weights.c and model.c."""

    optimize: str
    weight_defs: list[str] = field(default_factory=list)
    weight_decls: list[str] = field(default_factory=list)
    structs: list[str] = field(default_factory=list)
    # bytes per build: common, and only in the DSP (SXTB16/SMLAD) or the portable build
    per_build: dict[str, int] = field(default_factory=lambda: {"": 0, "dsp": 0, "portable": 0})
    param_names: dict[tuple[str, str], str] = field(default_factory=dict)
    kernels: set[str] = field(default_factory=set)


def _layer_code(prog: Program, out: _Code, prefix: str, base: int) -> list[str]:
    """model.c's statements for ``prog``'s scheduled nodes, its arena at ``arena + base`` (a loop's
    subgraph runs in its node's scratch); constants and structs are named ``rlx_{prefix}l<i>...``."""
    g = prog.graph
    nodes = prog.nodes()
    layers: list[tuple[int, Any, Layer]] = [
        (i, n, layer_for(g, n, prog.quant.get(n.name), out.optimize)) for i, n in enumerate(nodes)
    ]
    out.kernels.update(
        layer.kernel for _, _, layer in layers if layer.kernel and layer.kernel not in (WHILE_KERNEL, IF_KERNEL)
    )

    # constants -> weights.c / weights.h
    const_names: list[dict[str, str]] = []
    for i, _node, layer in layers:
        names = {}
        for key in sorted(layer.consts):
            arr = np.ascontiguousarray(layer.consts[key])
            ctype = _CTYPES.get(arr.dtype)
            if ctype is None:
                raise RlxError(f"layer {i}: constant {key} has unsupported type {arr.dtype}")
            name = f"rlx_{prefix}l{i}_{key}"
            n = max(arr.size, 1)
            decl = f"extern const {ctype} {name}[{n}];"
            define = f"const {ctype} {name}[{n}] RLX_WEIGHT_ALIGN = {{\n{_array_text(arr)}\n}};\n"
            guard = layer.guards.get(key, "")
            if guard:
                # compiled into one build only; the other build's struct holds NULL
                decl = f"{_GUARD_IF[guard]}\n{decl}\n#endif"
                define = f"{_GUARD_IF[guard]}\n{define}#endif\n"
                names[key] = f"RLX_IF_DSP({name}, NULL)" if guard == "dsp" else f"RLX_IF_DSP(NULL, {name})"
            else:
                names[key] = name
            out.weight_decls.append(decl)
            out.weight_defs.append(define)
            out.per_build[guard] += n * arr.dtype.itemsize
        const_names.append(names)

    def value_ptr(v: str) -> str:
        """Where a kernel reads value ``v``: its arena bytes, or a constant's array in weights.c."""
        if v not in g.params:
            return f"arena + {base + prog.offsets[v]}u"
        if (prefix, v) not in out.param_names:
            arr = np.ascontiguousarray(g.params[v])
            ctype = _CTYPES.get(arr.dtype)
            if ctype is None:
                raise RlxError(f"constant {v!r} has unsupported type {arr.dtype}")
            name = out.param_names[prefix, v] = f"rlx_const{len(out.param_names)}"
            n = max(arr.size, 1)
            out.weight_decls.append(f"extern const {ctype} {name}[{n}];")
            out.weight_defs.append(f"const {ctype} {name}[{n}] RLX_WEIGHT_ALIGN = {{\n{_array_text(arr)}\n}};\n")
            out.per_build[""] += n * arr.dtype.itemsize
        return out.param_names[prefix, v]

    for _i, node, layer in layers:  # constant operands (add x + c) are read from flash, not the arena
        for a in layer.args:
            if a[0] == "in":
                value_ptr(node.inputs[a[1]])
            elif a[0] == "ins":
                for v in node.inputs:
                    value_ptr(v)

    # model.c: one call per scheduled node
    calls: list[str] = []
    for (i, node, layer), names in zip(layers, const_names):
        what = f"/* {prefix}{i}: {_comment(node.name)} ({node.op}) */"
        if layer.kernel == WHILE_KERNEL:
            calls.append(_while_code(prog, node, out, f"{prefix}l{i}", base, value_ptr, what))
            continue
        if layer.kernel == IF_KERNEL:
            calls.append(_if_code(prog, node, out, f"{prefix}l{i}", base, value_ptr, what))
            continue
        if layer.kernel == "rlx_copy" and prog.offsets[node.inputs[0]] == prog.offsets[node.outputs[0]]:
            calls.append(f"    {what} /* a view: same arena bytes, no code */")
            continue
        args = []
        pre = ""
        for a in layer.args:
            kind = a[0]
            if kind == "in":
                v = node.inputs[a[1]]
                args.append(f"({_ptr_type(g, v, const=True)})({value_ptr(v)})")
            elif kind == "out":
                v = node.outputs[a[1]]
                args.append(f"({_ptr_type(g, v, const=False)})(arena + {base + prog.offsets[v]}u)")
            elif kind == "scratch":
                off, _size = prog.scratch[node.name]
                args.append(f"({a[1]} *)(void *)(arena + {base + off}u)")
            elif kind == "ins":
                ptrs = ", ".join(value_ptr(v) for v in node.inputs)
                pre += f"const void *const ins{prefix}{i}[] = {{{ptrs}}};\n        "
                args.append(f"ins{prefix}{i}")
            elif kind == "outs":
                ptrs = ", ".join(f"arena + {base + prog.offsets[v]}u" for v in node.outputs)
                pre += f"void *const outs{prefix}{i}[] = {{{ptrs}}};\n        "
                args.append(f"outs{prefix}{i}")
            elif kind == "bytes":
                args.append(str(a[1]))
            else:
                raise AssertionError(kind)
        if layer.struct is not None:
            out.structs.append(f"static const {layer.struct} rlx_{prefix}l{i} = {_render(layer.fields, names)};")
            args.insert(0, f"&rlx_{prefix}l{i}")
        call = f"{layer.kernel}({', '.join(args)});"
        calls.append(f"    {what}\n    {{\n        {pre}{call}\n    }}" if pre else f"    {what}\n    {call}")
    return calls


def _while_code(prog: Program, node: Any, out: _Code, prefix: str, base: int, value_ptr: Any, what: str) -> str:
    """A while_ node as a C loop: the carried values live in the node's outputs; each trip copies them
    into the cond subgraph's inputs and runs its layers, stops on false, else runs the body's layers
    the same way and copies its outputs back. Both subgraphs run in the node's scratch, one at a time."""
    cond, body = subgraph_programs(node)
    scratch, _size = prog.scratch[node.name]
    g = prog.graph
    sizes = [_nbytes(g, o) for o in node.outputs]
    state = [f"arena + {base + prog.offsets[o]}u" for o in node.outputs]

    def feed(sub: Program) -> list[str]:
        return [f"            memcpy(arena + {base + scratch + sub.offsets[v]}u, {s}, {n}u);"
                for v, s, n in zip(sub.graph.inputs, state, sizes) if v in sub.offsets]  # fmt: skip

    def where(sub: Program, v: str) -> str:
        return _sub_ptr(sub, v, out, f"{prefix}b" if sub is body else f"{prefix}c", base + scratch)

    lines = [f"    {what}", "    {"]
    lines += [f"        memcpy({s}, {value_ptr(v)}, {n}u);" for s, v, n in zip(state, node.inputs, sizes)]
    max_trips = node.attrs["max_trips"]
    if max_trips is not None:
        lines.append("        uint32_t trips = 0u;")
    lines.append(f"        while ({'trips < ' + str(max_trips) + 'u' if max_trips is not None else '1'}) {{")
    lines += feed(cond)
    lines += [textwrap.indent(c, "        ") for c in _layer_code(cond, out, f"{prefix}c", base + scratch)]
    flag = where(cond, cond.graph.outputs[0])
    lines += [f"            if (!*(const uint8_t *)({flag})) {{", "                break;", "            }"]
    lines += feed(body)
    lines += [textwrap.indent(c, "        ") for c in _layer_code(body, out, f"{prefix}b", base + scratch)]
    lines += [f"            memcpy({s}, {where(body, v)}, {n}u);" for s, v, n in zip(state, body.graph.outputs, sizes)]
    if max_trips is not None:
        lines.append("            trips++;")
    lines += ["        }", "    }"]
    return "\n".join(lines)


def _if_code(prog: Program, node: Any, out: _Code, prefix: str, base: int, value_ptr: Any, what: str) -> str:
    """An if_ node as a C if: the branch taken gets the operands copied into its inputs, runs its layers
    and copies its outputs into the node's. Both branches run in the node's scratch (one at a time)."""
    then_, else_ = subgraph_programs(node)
    scratch, _size = prog.scratch[node.name]
    g = prog.graph

    def branch(sub: Program, tag: str) -> list[str]:
        at = base + scratch
        lines = [f"            memcpy(arena + {at + sub.offsets[v]}u, {value_ptr(x)}, {_nbytes(g, x)}u);"
                 for v, x in zip(sub.graph.inputs, node.inputs[1:]) if v in sub.offsets]  # fmt: skip
        lines += [textwrap.indent(c, "        ") for c in _layer_code(sub, out, f"{prefix}{tag}", at)]
        for o, v in zip(node.outputs, sub.graph.outputs):
            src = _sub_ptr(sub, v, out, f"{prefix}{tag}", at)
            lines.append(f"            memcpy(arena + {base + prog.offsets[o]}u, {src}, {_nbytes(g, o)}u);")
        return lines

    flag = value_ptr(node.inputs[0])
    lines = [f"    {what}", "    {", f"        if (*(const uint8_t *)({flag})) {{"]
    lines += branch(then_, "t")
    lines.append("        } else {")
    lines += branch(else_, "e")
    lines += ["        }", "    }"]
    return "\n".join(lines)


def _sub_ptr(sub: Program, v: str, out: _Code, prefix: str, base: int) -> str:
    if v in sub.graph.params:
        return out.param_names.get((prefix, v)) or _const_now(sub, v, out, prefix)
    return f"arena + {base + sub.offsets[v]}u"


def _const_now(sub: Program, v: str, out: _Code, prefix: str) -> str:
    arr = np.ascontiguousarray(sub.graph.params[v])
    name = out.param_names[prefix, v] = f"rlx_const{len(out.param_names)}"
    n = max(arr.size, 1)
    ctype = _CTYPES[arr.dtype]
    out.weight_decls.append(f"extern const {ctype} {name}[{n}];")
    out.weight_defs.append(f"const {ctype} {name}[{n}] RLX_WEIGHT_ALIGN = {{\n{_array_text(arr)}\n}};\n")
    out.per_build[""] += n * arr.dtype.itemsize
    return name


def _nbytes(g: Graph, v: str) -> int:
    t = g.types[v]
    return math.prod(int(d) for d in t.shape) * t.dtype.numpy.itemsize


def _ptr_type(g: Graph, v: str, const: bool) -> str:
    dt = g.types[v].dtype.numpy
    c = _CTYPES.get(np.dtype(dt), "uint8_t")
    return f"{'const ' if const else ''}{c} *"


def _model_h(g: Graph, prog: Program, model_hash: str) -> str:
    lines = [
        "/* model.h - generated by rlx-edge (cortexm target). Do not edit. */",
        "#ifndef RLX_MODEL_H",
        "#define RLX_MODEL_H",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f'#define RLX_MODEL_NAME "{_comment(g.name)}"',
        f'#define RLX_MODEL_HASH "{model_hash}" /* changes with any weight, parameter or kernel */',
        "",
        "/* The arena: every activation and kernel scratch buffer lives inside one",
        " * caller-provided block of RLX_ARENA_SIZE bytes aligned to RLX_ARENA_ALIGN:",
        " *     static uint8_t arena[RLX_ARENA_SIZE] __attribute__((aligned(RLX_ARENA_ALIGN)));",
        " * Its contents need no initialization and are garbage between calls. */",
        f"#define RLX_ARENA_SIZE {prog.arena_bytes}u",
        f"#define RLX_ARENA_ALIGN {prog.alignment}u",
        f"#define RLX_NUM_INPUTS {len(g.inputs)}",
        f"#define RLX_NUM_OUTPUTS {len(g.outputs)}",
        "",
    ]
    for k, v in enumerate(g.inputs):
        lines += [f"/* input {k}: {_comment(v)} */", *_io_macros(f"RLX_INPUT{k}", g, v), ""]
    for k, v in enumerate(g.outputs):
        lines += [f"/* output {k}: {_comment(v)} */", *_io_macros(f"RLX_OUTPUT{k}", g, v), ""]
    if len(g.inputs) == 1 and len(g.outputs) == 1:
        lines += [
            "#define RLX_INPUT_SIZE RLX_INPUT0_SIZE",
            "#define RLX_OUTPUT_SIZE RLX_OUTPUT0_SIZE",
            "",
            "/* Run the model once: copies RLX_INPUT_SIZE bytes from input, writes",
            " * RLX_OUTPUT_SIZE bytes to output. Returns 0, or -1 when arena is NULL or",
            " * not aligned to RLX_ARENA_ALIGN. Reentrant given separate arenas; no heap. */",
            "int rlx_model_invoke(const void *input, void *output, uint8_t *arena);",
            "",
        ]
    lines += [
        "/* Any number of inputs/outputs, in the order of the RLX_INPUTk / RLX_OUTPUTk macros. */",
        "int rlx_model_invoke_multi(const void *const *inputs, void *const *outputs, uint8_t *arena);",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        "#endif /* RLX_MODEL_H */",
        "",
    ]
    return "\n".join(lines)


def _kernel_headers(kernels: set[str]) -> list[str]:
    """Headers of kernels that ship their own (``<kernel>.h`` beside ``<kernel>.c``): a new kernel
    file brings its prototype with it, and no shared header lists it."""
    have = kernel_sources()
    return [f'#include "{k}.h"' for k in sorted(kernels) if f"{k}.h" in have]


def _model_c(structs, calls, copy_in, copy_out, single: bool, kernels: set[str] = frozenset()) -> str:
    parts = [
        "/* model.c - generated by rlx-edge (cortexm target). Do not edit.",
        " * One kernel call per scheduled layer; parameters are compile-time",
        " * constants and every tensor is a fixed offset into the arena. */",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        "",
        '#include "model.h"',
        '#include "rlx_nn.h"',
        '#include "rlx_nn_support.h"',
        '#include "weights.h"',
        *_kernel_headers(kernels),
        "",
        *structs,
        "",
        "int rlx_model_invoke_multi(const void *const *inputs, void *const *outputs, uint8_t *arena)",
        "{",
        "    if (arena == NULL || ((uintptr_t)arena & (RLX_ARENA_ALIGN - 1u)) != 0u) {",
        "        return -1;",
        "    }",
        *copy_in,
        *calls,
        *copy_out,
        "    return 0;",
        "}",
        "",
    ]
    if single:
        parts += [
            "int rlx_model_invoke(const void *input, void *output, uint8_t *arena)",
            "{",
            "    const void *const ins[1] = {input};",
            "    void *const outs[1] = {output};",
            "    return rlx_model_invoke_multi(ins, outs, arena);",
            "}",
            "",
        ]
    return "\n".join(parts)


_WEIGHTS_H = """/* weights.h - generated by rlx-edge (cortexm target). Do not edit. */
#ifndef RLX_WEIGHTS_H
#define RLX_WEIGHTS_H

#include <stdint.h>

#include "rlx_nn_support.h" /* RLX_USE_DSP: which build a guarded array belongs to */

{decls}

#endif /* RLX_WEIGHTS_H */
"""

_WEIGHTS_C = """/* weights.c - generated by rlx-edge (cortexm target). Do not edit.
 * Constant arrays in flash, already in the layout their kernels read:
 * weights in blocks of 4 output channels, biases with the input zero point
 * folded in, per-channel Q31 multipliers and shifts, lookup tables. Arrays
 * under #if RLX_USE_DSP (--optimize speed only) are the layouts only the
 * SXTB16/SMLAD build reads (weights widened to int16), those under
 * #if !RLX_USE_DSP only the portable build's. */
#include <stdint.h>

#include "weights.h"

#if defined(__GNUC__)
#define RLX_WEIGHT_ALIGN __attribute__((aligned(8)))
#else
#define RLX_WEIGHT_ALIGN
#endif

{defs}"""


_MAKEFILE = """# Makefile - generated by rlx-edge for {core}. Builds libmodel.a.
# Link it with -lm: kernels that TFLite Micro computes with the C library's math (exp in
# detection post-processing) call libm too; the linker takes nothing from it otherwise.
CC ?= arm-none-eabi-gcc
AR ?= arm-none-eabi-ar
ifeq ($(origin CC),default)
CC = arm-none-eabi-gcc
endif
ifeq ($(origin AR),default)
AR = arm-none-eabi-ar
endif
CPUFLAGS ?= {cpuflags}
CFLAGS ?= -std=c99 -O2 -Wall -Wextra -Werror -ffunction-sections -fdata-sections
SRCS = model.c weights.c {kernel_srcs}
OBJS = $(SRCS:.c=.o)

all: libmodel.a

libmodel.a: $(OBJS)
\t$(AR) rcs $@ $(OBJS)

%.o: %.c
\t$(CC) $(CPUFLAGS) $(CFLAGS) -I. -Ikernels -c $< -o $@

clean:
\trm -f $(OBJS) libmodel.a

.PHONY: all clean
"""


def compile_project(
    graph: Graph | Program, out_dir: str | Path, core: str = "cortex-m4", optimize: str = "balanced"
) -> dict[str, Any]:
    """Write model.h, model.c, weights.{c,h}, kernels/ and a Makefile into ``out_dir``.

    Deterministic: the same graph and ``optimize`` give byte-identical files.
    Returns ``files`` (relative paths), ``arena_bytes``, ``weight_bytes``,
    ``model_hash``, ``core``, ``optimize``.
    """
    if core not in CORES:
        raise RlxError(f"unknown core {core!r}; use one of {', '.join(CORES)}")
    em = emit(graph, optimize)
    out = Path(out_dir)
    files = dict(em.files)
    kernel_srcs = " ".join(sorted(f for f in files if f.startswith("kernels/") and f.endswith(".c")))
    files["Makefile"] = _MAKEFILE.format(core=core, cpuflags=CORES[core], kernel_srcs=kernel_srcs)
    for rel, text in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {
        "files": sorted(files),
        "arena_bytes": em.arena_bytes,
        # the core's own build: under --optimize speed, DSP cores compile the int16 layouts
        "weight_bytes": em.weight_bytes_dsp if core in _DSP_CORES else em.weight_bytes_portable,
        "model_hash": em.model_hash,
        "core": core,
        "optimize": optimize,
    }
