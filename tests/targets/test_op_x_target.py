"""Every registered op on every target that has a rule for it, against the reference, every draw executed.

The cases are read off the targets' own rule tables (``rlx_edge.targets.support``):
a new rule joins this test by existing, and a rule that computes one wrong
bit on any draw fails it. Draws come from each op's sampler; a quantized draw
is the float draw put through the real calibration and int8 PTQ (the ``int``
kind; Cortex-M's int16 ops again through int16x8 PTQ, the ``int16`` kind), plus
edge-case inputs (the storage limits and the zero point). A draw that a
target rejects must be rejected with its clear :class:`UnsupportedOpError`
(any other exception fails), and each case must run ``DRAWS`` accepted draws.

The Cortex-M, FPGA and JAX targets build one program per target and kind:
every case's accepted draws are disjoint branches of one graph (one C build,
one simulated FPGA datapath, one XLA compile), and each case checks the
outputs of its own branches. The FPGA datapath runs on Icarus: this design
is small and runs few cycles, where Verilator's C++ compile (a minute on two
cores) would cost more than the whole simulation; the MLPerf Tiny models in
``fpga/test_models.py`` run on Verilator.
"""

from __future__ import annotations

import numpy as np
import pytest

from opgraphs import merge_graphs, single_node_graph
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.plan import node_context, plan
from rlx_edge.ir.serialize import dumps_program, loads_program
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import integer_path, quantize
from rlx_edge.targets.reference import run
from rlx_edge.targets.support import targets_support

DRAWS = 3
MAX_TRIES = 40
FAMILIES = {f.name: f for f in targets_support()}
FLOAT_TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12, np.dtype(np.float16): 2.0**-10}


def _cases() -> list[tuple[str, str, str]]:
    from rlx_edge.targets.cortexm.rules import INT16_OPS

    out = []
    for fam in FAMILIES.values():
        for op, semantics in sorted(fam.ops.items()):
            for kind in ("float", "int"):
                if kind in semantics and REGISTRY[op]._sample is not None:
                    out.append((fam.name, op, kind))
            # the ops Cortex-M runs on int16 activations, drawn again through int16x8 PTQ
            if fam.name == "cortexm" and op in INT16_OPS and DType.i16 in REGISTRY[op].int_dtypes:
                if REGISTRY[op]._sample is not None:
                    out.append((fam.name, op, "int16"))
    return out + _block_cases()


def _block_cases() -> list[tuple[str, str, str]]:
    """HIR blocks, on every target that has a rule for each MIR op the block lowers to (over a few draws)."""
    from rlx_edge.ir.passes.lower_hir import lower_hir
    from rlx_edge.targets.cortexm.rules import INT16_OPS

    out = []
    for name, opdef in sorted(REGISTRY.items()):
        if opdef.stage != "hir" or opdef._sample is None:
            continue
        rng = np.random.default_rng(sum(map(ord, name)))
        lowered: set[str] = set()
        for _ in range(8):
            inputs, attrs, out_q, in_q = opdef.draw(rng)
            lowered |= {n.op for n in lower_hir(single_node_graph(name, inputs, attrs, out_q, in_q)).nodes}
        for fam in FAMILIES.values():
            if not lowered <= set(fam.ops):
                continue
            kinds = [k for k in ("float", "int") if all(k in fam.ops[o] for o in lowered)]
            out += [(fam.name, name, kind) for kind in kinds]
            if fam.name == "cortexm" and "int" in kinds and lowered <= set(INT16_OPS):
                out.append((fam.name, name, "int16"))
    return out


CASES = _cases()


def test_every_rule_is_a_case():
    """Each (target, op) pair with a rule is exercised: an op without a sampler is a gap, not a pass."""
    missing = [(fam.name, op) for fam in FAMILIES.values() for op in fam.ops if REGISTRY[op]._sample is None]
    assert not missing, f"ops with a target rule but no sampler: {missing}"
    covered = {(t, op) for t, op, _ in CASES if REGISTRY[op].stage != "hir"}  # blocks have no rules of their own
    assert covered == {(f.name, op) for f in FAMILIES.values() for op in f.ops}


# draws -------------------------------------------------------------------------------------------
def _constants(op: str, inputs: list, rng: np.random.Generator) -> tuple[int, ...]:
    """Input positions held as constants: weights, biases and indices always, a second operand ("b") now and
    then, a softmax mask half the time (a constant mask is read from flash, a computed one from the arena)."""
    names = REGISTRY[op].input_names(len(inputs))
    weighted = "w" in names
    if REGISTRY[op].stage == "hir":  # a block: its weights, biases, norm scales and tables are the model's
        return tuple(
            i
            for i, n in enumerate(names)
            if inputs[i] is not None
            and (n[0] in "wb" or n in ("gamma", "beta", "table") or (n == "mask" and rng.random() < 0.5))
        )
    return tuple(
        i
        for i, n in enumerate(names)
        if inputs[i] is not None
        and (
            n in ("w", "indices")
            or (n == "b" and (weighted or rng.random() < 0.3))
            or (n == "mask" and rng.random() < 0.5)
        )
    )


def float_draw(op: str, rng: np.random.Generator) -> tuple[Graph, list[dict[str, np.ndarray]]]:
    inputs, attrs, out_q, in_q = REGISTRY[op].draw(rng)
    consts = _constants(op, inputs, rng)
    g = _lowered(single_node_graph(op, inputs, attrs, out_q, in_q, consts))
    feeds = [
        {
            n: np.asarray(a)
            for n, a in zip(g.inputs, [a for i, a in enumerate(inputs) if a is not None and i not in consts])
        }
    ]
    return g, feeds


def quantized_draw(
    op: str, rng: np.random.Generator, scheme: str = "int8"
) -> tuple[Graph, list[dict[str, np.ndarray]]] | None:
    """A quantized one-node graph: typed ops draw their own, the rest go through calibration and PTQ
    (``scheme``; for int16x8 only draws whose node has int16 activations count)."""
    opdef = REGISTRY[op]
    inputs, attrs, out_q, in_q = opdef.draw(rng)
    consts = _constants(op, inputs, rng)
    if opdef.typed or any(q is not None for q in (in_q or [])):
        g = single_node_graph(op, inputs, attrs, out_q, in_q, consts)
    elif all(np.asarray(a).dtype == bool for a in inputs if a is not None):
        # bools only (the logical ops): nothing to quantize, the drawn graph is already an integer one
        g = single_node_graph(op, inputs, attrs, constants=consts)
        return g, [_quantized_feed(g, rng, mode) for mode in ("random", "low", "high", "zero")]
    elif opdef.stage != "hir" and not opdef.has_int_reference and opdef.family != "quant":
        return _dequantized_draw(op, inputs, attrs, rng)
    elif opdef.stage != "hir" and not integer_path(opdef):  # a block: its lowered ops decide
        return None  # PTQ keeps the op float (svdf's state): only its own quantized draws count
    else:
        # bool inputs (conditions, comparison results) and indices are exact as they are: only numbers
        # are quantized
        names = opdef.input_names(len(inputs))
        # control flow: its subgraphs are typed, so an integer operand (a loop counter) stays integer
        exact = ("b", "i", "u") if opdef.family == "control" else ("b",)
        floats = [None if a is None else np.asarray(a) if np.asarray(a).dtype.kind in exact or n in ("indices", "ids")
                  else np.asarray(a, np.float32) for n, a in zip(names, inputs)]  # fmt: skip
        if not any(a is not None and a.dtype != bool for a in floats):
            return None  # nothing to quantize: such a draw runs in the float kind
        fg = single_node_graph(op, floats, attrs, constants=consts)
        data = {
            n: np.asarray(fg_in)[None]
            for n, fg_in in zip(fg.inputs, [a for i, a in enumerate(floats) if a is not None and i not in consts])
        }
        if any(a.size == 0 for a in data.values()):
            return None  # nor has an empty input (a concat's)
        if any(a.size == 0 for a in run(fg, {k: v[0] for k, v in data.items()}).values()):
            return None  # an empty result has no range to calibrate; models do not compute them
        # the op itself, not what the optimizer makes of it (a unit-axis transpose becomes a reshape)
        g = quantize(fg, calibrate(fg, data, optimize=False), scheme=scheme, optimize=False)
    # a block's nodes are the MIR ops it lowered to: each must be quantized
    nodes = [n for n in g.nodes if n.op == op] or (g.nodes if opdef.stage == "hir" else [])
    assert nodes, f"{op}: no such node in the quantized graph"
    for node in nodes:
        assert node_context(g, node).quantized, f"{op}: PTQ left node {node.name} ({node.op}) float"
    if scheme == "int16x8" and not any(
        g.types[v].dtype == DType.i16 for node in nodes for v in (*node.inputs, *node.outputs) if v
    ):
        return None  # a typed draw of other storage types: the int kind covers it
    feeds = [_quantized_feed(g, rng, mode) for mode in ("random", "low", "high", "zero")]
    return g, feeds


def _dequantized_draw(
    op: str, inputs: list, attrs: dict, rng: np.random.Generator
) -> tuple[Graph, list[dict[str, np.ndarray]]]:
    """A float-only op in an integer model, as TFLite's SSD heads end in TFLite_Detection_PostProcess: int8
    inputs dequantized into it, its outputs float. The feeds are the draw's own values quantized, then moved
    by a step or so (an op like it refuses arbitrary floats: empty boxes)."""
    g, feed, xs = Graph(op), {}, []
    for name, a in zip(REGISTRY[op].input_names(len(inputs)), inputs):
        a = np.asarray(a, np.float32)
        lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
        scale = np.float32(max(hi - lo, 1e-3) / 255)
        zp = int(np.clip(round(-128 - lo / float(scale)), -128, 127))
        feed[name] = np.clip(np.round(a / scale) + zp, -128, 127).astype(np.int8)
        xs.append(g.dequantize(g.input(name, a.shape, "i8", quant=QuantParams(scale, zp)), dtype="f32"))
    g.output(*g.add_node(op, xs, attrs))
    moved = [{k: np.clip(v + rng.integers(-1, 2, v.shape), -128, 127).astype(np.int8) for k, v in feed.items()}
             for _ in range(3)]  # fmt: skip
    return g, [feed, *moved]


def _quantized_feed(g: Graph, rng: np.random.Generator, mode: str) -> dict[str, np.ndarray]:
    out = {}
    for name in g.inputs:
        t = g.types[name]
        shape = tuple(int(d) for d in t.shape)
        if t.dtype.is_float:
            out[name] = rng.standard_normal(shape).astype(t.dtype.numpy)
            continue
        if t.dtype == DType.bool:  # a condition: both values, or all of one ("low", "high")
            out[name] = np.full(shape, mode == "high") if mode in ("low", "high") else rng.random(shape) < 0.5
            continue
        if any(n.op == "gather" and n.inputs[1] == name for n in g.nodes):  # ids: row 0 is in any table
            out[name] = np.zeros(shape, t.dtype.numpy)
            continue
        info = np.iinfo(t.dtype.numpy)
        if mode == "random":
            a = rng.integers(info.min, int(info.max) + 1, shape)
        elif mode == "low":
            a = np.full(shape, info.min)
        elif mode == "high":
            a = np.full(shape, info.max)
        else:
            zp = int(t.quant.zero_point[0]) if t.quant is not None else 0
            a = np.full(shape, zp) + rng.integers(-1, 2, shape)
        out[name] = np.clip(a, info.min, info.max).astype(t.dtype.numpy)
    return out


def _lowered(g: Graph) -> Graph:
    """A float draw of an HIR block as the MIR its targets run (quantize lowers the int draws itself)."""
    from rlx_edge.ir.passes.lower_hir import lower_hir

    return lower_hir(g) if g.stage == "hir" or any(REGISTRY[n.op].stage == "hir" for n in g.nodes) else g


def merge(graphs: list[Graph]) -> Graph:
    """Disjoint branches of one graph: draw ``i``'s names prefixed ``d{i}_``."""
    return merge_graphs(graphs, "op_x_target", "d")


def merged_feed(graphs: list[Graph], feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {f"d{i}_{k}": v for i, f in enumerate(feeds) for k, v in f.items()}


# targets -----------------------------------------------------------------------------------------
def _check_equal(want: dict, got: dict, where: str, tolerance: bool) -> None:
    for name, w in want.items():
        o = np.asarray(got[name])
        assert o.dtype == w.dtype and o.shape == w.shape, f"{where} {name}: {o.dtype}{o.shape} vs {w.dtype}{w.shape}"
        if tolerance and w.dtype.kind == "f":
            # float paths: the jax target computes f16/f32 in XLA's order, not numpy's
            tol = FLOAT_TOL[w.dtype]
            np.testing.assert_allclose(o, w, rtol=tol, atol=tol, err_msg=f"{where} {name}")
        else:
            assert np.array_equal(o, w, equal_nan=w.dtype.kind == "f"), f"{where} {name}: differs from the reference"


def _accepts(target: str, g: Graph) -> bool:
    """Whether ``target`` takes this draw; a refusal must be the target's clear UnsupportedOpError."""
    try:
        if target == "cortexm":
            from rlx_edge.targets.cortexm.rules import layer_for

            for n in g.nodes:
                layer_for(g, n)
        elif target == "fpga":
            from rlx_edge.targets.fpga.design import FpgaConfigError, FpgaDesign

            try:
                FpgaDesign(g)
            except FpgaConfigError as e:
                raise UnsupportedOpError(str(e)) from e
        elif target == "jax":
            from rlx_edge.targets.jax.lower import lower_graph

            lower_graph(g)
    except UnsupportedOpError:
        return False
    return True


def _fpga_graph(op: str, g: Graph) -> Graph:
    """A view op alone is no FPGA layer: follow it with a clamp-only relu so the design has one. So is
    quantize or dequantize at a model edge (the host computes them): a relu after or before it, where
    its int8 side is quantized per tensor as relu needs (else the lone edge, which the FPGA refuses)."""
    from rlx_edge.targets.fpga.design import ALIAS_OPS

    def per_tensor(v: str) -> bool:
        return g.types[v].quant is not None and g.types[v].quant.scale.size == 1

    if op in ("quantize", "dequantize") and not per_tensor(g.nodes[0].outputs[0] if op == "quantize" else g.inputs[0]):
        return g
    if op == "dequantize":
        (node,) = g.nodes
        x = node.inputs[0]
        t = g.types[x]
        h = Graph(g.name)
        h.input(x, t.shape, t.dtype, t.quant)
        (r,) = h.add_node("relu", [x], {}, name="before_edge", out_quant=t.quant)
        h.output(*h.add_node("dequantize", [r], node.attrs, name=node.name, out_names=node.outputs))
        return h
    if op not in (*ALIAS_OPS, "quantize"):
        return g
    y = g.outputs[0]
    g.outputs.clear()
    g.output(*g.add_node("relu", [y], {}, name="after_view", out_quant=g.types[y].quant))
    return g


def _draws(target: str, op: str, kind: str) -> tuple[list[Graph], list[list[dict[str, np.ndarray]]], int]:
    """Up to DRAWS accepted draws of ``op`` for ``target`` (graphs, their feeds) and how many it refused."""
    rng = np.random.default_rng([sum(map(ord, target)), sum(map(ord, op)), len(kind)])
    graphs, feeds, rejected = [], [], 0
    for _ in range(MAX_TRIES):
        if len(graphs) == DRAWS:
            break
        if kind == "float":
            got = float_draw(op, rng)
        else:
            got = quantized_draw(op, rng, "int16x8" if kind == "int16" else "int8")
        if got is None:
            rejected += 1
            continue
        g, f = got
        try:
            run(g, f[0])
        except Exception:  # a draw the reference itself refuses (e.g. a scale no multiplier holds)
            rejected += 1
            continue
        if target == "fpga":
            g = _fpga_graph(op, g)
        if not _accepts(target, g):
            rejected += 1
            continue
        graphs.append(g)
        feeds.append(f)
    return graphs, feeds, rejected


# One build per target and kind where a build costs seconds (a C library, a simulated datapath,
# an XLA compile): every case's draws are branches of one graph, run once; each case then checks its
# own outputs.
BATCHED = ("cortexm", "fpga", "jax")


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    done: dict[str, dict] = {}

    def get(target: str, kind: str) -> dict:
        if (target, kind) not in done:
            done[target, kind] = _run_batched(target, kind, tmp_path_factory.mktemp(f"op_x_{target}_{kind}"))
        return done[target, kind]

    return get


def _run_batched(target: str, kind: str, workdir) -> dict:
    cases: dict[tuple[str, str], dict] = {}
    graphs, feeds = [], []
    for t, op, k in CASES:
        if t != target or k != kind:
            continue
        gs, fs, rejected = _draws(target, op, kind)
        cases[(op, kind)] = {
            "draws": len(gs),
            "rejected": rejected,
            "index": list(range(len(graphs), len(graphs) + len(gs))),
        }
        graphs += gs
        feeds += fs
    m = merge(graphs)
    n_feeds = len(feeds[0])
    feed_k = [merged_feed(graphs, [f[k] for f in feeds]) for k in range(n_feeds)]
    wants = [run(m, fk) for fk in feed_k]
    try:
        if target == "cortexm":
            from rlx_edge.targets.cortexm import compile_host

            model = compile_host(m, workdir)
            gots = [model.run(fk) for fk in feed_k]
        elif target == "jax":
            from rlx_edge.targets.jax import compile_jax

            fn = compile_jax(m, batch="exact")
            gots = [fn(fk) for fk in feed_k]
        else:
            from rlx_edge.targets.fpga import build_fpga

            data = [np.stack([fk[v] for fk in feed_k]) for v in m.inputs]
            res = build_fpga(m, workdir, simulate=True, data=data, simulator="icarus")
            assert res["inferences"] == n_feeds
            gots = [
                {o: res["outputs"][j][k].reshape(wants[k][o].shape) for j, o in enumerate(m.outputs)}
                for k in range(n_feeds)
            ]
    except Exception as e:  # every case of the target reports the build's failure
        return {"cases": cases, "error": f"{type(e).__name__}: {e}"}
    return {"cases": cases, "wants": wants, "gots": gots}


@pytest.mark.parametrize("target,op,kind", CASES, ids=[f"{t}-{o}-{k}" for t, o, k in CASES])
def test_op_on_target(target: str, op: str, kind: str, tmp_path, batched) -> None:
    if target in BATCHED:
        got = batched(target, kind)
        case = got["cases"][(op, kind)]
        assert case["draws"] == DRAWS, (
            f"{target} took only {case['draws']} of {case['draws'] + case['rejected']} draws of {op}"
        )
        assert "error" not in got, got.get("error")
        for k, (want, out) in enumerate(zip(got["wants"], got["gots"])):
            mine = {name: w for name, w in want.items() if int(name[1 : name.index("_")]) in case["index"]}
            assert mine, f"{op}: no outputs of its draws in the batched program"
            _check_equal(mine, out, f"{target} feed {k}", tolerance=target == "jax")
        return
    graphs, feeds, rejected = _draws(target, op, kind)
    assert len(graphs) == DRAWS, f"{target} took only {len(graphs)} of {len(graphs) + rejected} draws of {op}"
    m = merge(graphs)
    wants = [run(m, merged_feed(graphs, [f[k] for f in feeds])) for k in range(len(feeds[0]))]
    if target == "reference":
        # the Program contract: prepared parameters saved in .rlx and read back give the same results
        program = loads_program(dumps_program(plan(m)))
        for k, want in enumerate(wants):
            got = run(program.graph, merged_feed(graphs, [f[k] for f in feeds]), quant=program.quant)
            _check_equal(want, got, f"reference .rlx round trip, feed {k}", tolerance=False)
        return
    raise AssertionError(f"no runner for target {target}")
