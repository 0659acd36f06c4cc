"""Graphs built in Python whose quantization is broken: each stage names the node, never AttributeError.

The loaders refuse such model files; these graphs come from Python, where a
value can lose its quantization (or get a scale no integer kernel can hold)
after the node was made. The reference interpreter, the arena runner and the
Cortex-M rules must each give one IRError/UnsupportedOpError naming the node.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan import plan
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import compile_project
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.arena import run_program


def _q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


def _depthwise() -> Graph:
    rng = np.random.default_rng(0)
    g = Graph("dw")
    x = g.input("x", (1, 6, 6, 3), "i8", quant=_q8(0.05, -4))
    w = g.param("w", rng.integers(-127, 128, (1, 3, 3, 3)).astype(np.int8), quant=_q8(0.01, 0))
    y = g.depthwise_conv2d(x, w, None, padding="same", depth_multiplier=1, out_quant=_q8(0.07, 2))
    g.output(y)
    return g


def _add() -> Graph:
    g = Graph("add")
    a = g.input("a", (1, 4), "i8", quant=_q8(0.05, 3))
    b = g.input("b", (1, 4), "i8", quant=_q8(0.11, -20))
    g.output(g.add(a, b, out_quant=_q8(0.09, 5)))
    return g


def _without_quant(g: Graph, value: str) -> Graph:
    g.types[value] = replace(g.types[value], quant=None)
    return g


def _inputs(g: Graph) -> dict[str, np.ndarray]:
    return {n: np.zeros(tuple(g.types[n].shape), np.int8) for n in g.inputs}


def _dw_node(g: Graph) -> str:
    return g.nodes[0].name


@pytest.mark.parametrize("value", ["w", "x"])
def test_depthwise_without_quantization_is_named_by_every_stage(value: str, tmp_path: Path) -> None:
    good = _depthwise()
    run(good, _inputs(good))  # the intact graph runs: only the dropped quantization fails below
    g = _without_quant(_depthwise(), value)
    want = rf"^node '{_dw_node(g)}' \(depthwise_conv2d\): value '{value}' is i8 without quantization parameters"
    with pytest.raises(IRError, match=want):
        run(g, _inputs(g))
    with pytest.raises(IRError, match=want):
        run_program(_planned_then_dropped(value), _inputs(g))
    with pytest.raises(IRError, match=want):
        compile_project(g, tmp_path / "proj")  # _depthwise read wt.quant.zero_point: AttributeError before


def _planned_then_dropped(value: str):
    # plan first (the planner does not look at scales), then lose the quantization in the Program's graph
    program = plan(_depthwise())
    _without_quant(program.graph, value)
    return program


def test_output_without_quantization_is_named() -> None:
    g = _add()
    out = g.outputs[0]
    _without_quant(g, out)
    with pytest.raises(IRError, match=rf"value '{out}' is i8 without quantization parameters"):
        run(g, _inputs(g))


def test_a_scale_ratio_no_multiplier_holds_is_named(tmp_path: Path) -> None:
    g = _add()
    out = g.outputs[0]
    g.types[out] = replace(g.types[out], quant=_q8(1e-30, 5))  # input/output scale ratio ~1e29
    name = g.nodes[0].name
    with pytest.raises(IRError, match=rf"^node '{name}' \(add\): its quantization does not fit integer kernels"):
        run(g, _inputs(g))
    # the op's prepare refuses it once, for every target (the Program is the contract)
    with pytest.raises(IRError, match=rf"^node '{name}' \(add\): its quantization does not fit integer kernels"):
        compile_project(g, tmp_path / "proj")


def test_non_positive_scales_are_named() -> None:
    g = _add()
    g.types["a"] = replace(g.types["a"], quant=_q8(0.0, 3))
    with pytest.raises(IRError, match=r"value 'a' has quantization scales that are not finite and > 0"):
        run(g, _inputs(g))
