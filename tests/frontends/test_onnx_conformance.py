"""ONNX node conformance cases through the importer and the float reference.

The cases come from ``onnx.backend.test.case.node.collect_testcases()``,
written once per session into a temporary folder. A case is selected when all
of its node op types are ones the importer handles. Each selected case must
either match its expected outputs or be refused with UnsupportedOpError at
import; a wrong answer or any other exception fails the test.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest

from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.frontends.onnx import SUPPORTED_OPS, load_onnx
from rlx_edge.targets.reference import run

# Graph inputs at these positions are the data operands; every other graph input
# (shapes, axes, pads, scales, weights) is bound as an initializer, as real models have them.
_DATA_OPS = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Concat", "MatMul", "Gemm"}
# the count on 2026-11-26 (263 before #16's ONNX handlers): what passes must keep passing
MIN_PASSING = 385


@dataclass
class Case:
    name: str
    path: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]


@dataclass
class Outcome:
    passed: list[str] = field(default_factory=list)
    unsupported: dict[str, str] = field(default_factory=dict)
    no_int_reference: dict[str, str] = field(default_factory=dict)
    wrong: dict[str, str] = field(default_factory=dict)


def _constant_inputs(model: onnx.ModelProto) -> set[str]:
    data: set[str] = set()
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            if k == 0 or n.op_type in _DATA_OPS:
                data.add(i)
    return {vi.name for vi in model.graph.input} - data


def _bind(model: onnx.ModelProto, inputs: list[np.ndarray]) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """Turn non-data graph inputs into initializers holding the case's values."""
    consts = _constant_inputs(model)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep, feeds = [], []
    for vi, arr in zip(model.graph.input, inputs):
        if vi.name in consts and isinstance(arr, np.ndarray):
            m.graph.initializer.append(onnx.numpy_helper.from_array(arr, vi.name))
        else:
            keep.append(vi)
            feeds.append(arr)
    del m.graph.input[:]
    m.graph.input.extend(keep)
    return m, feeds


@pytest.fixture(scope="session")
def conformance_cases(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    import onnx.backend.test.case.node as node_cases

    root = tmp_path_factory.mktemp("onnx_node_cases")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        all_cases = node_cases.collect_testcases()
    out = []
    for c in all_cases:
        if not {n.op_type for n in c.model.graph.node} <= SUPPORTED_OPS or not c.data_sets:
            continue
        ins, outs = c.data_sets[0]
        if not all(isinstance(a, np.ndarray) for a in (*ins, *outs)):
            continue  # sequences/optionals are not tensors
        model, feeds = _bind(c.model, list(ins))
        path = root / f"{c.name}.onnx"
        onnx.save(model, path)
        out.append(Case(c.name, path, feeds, [np.asarray(o) for o in outs]))
    return out


def _matches(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4, atol=1e-4, equal_nan=True))
    return bool(np.array_equal(got, want))


@pytest.fixture(scope="session")
def outcome(conformance_cases: list[Case]) -> Outcome:
    res = Outcome()
    for c in conformance_cases:
        try:
            g = load_onnx(c.path)
        except UnsupportedOpError as e:
            res.unsupported[c.name] = str(e)
            continue
        try:
            got = run(g, c.inputs)
        except RlxError as e:
            # the importer produced a quantized graph the float reference cannot run yet
            if "no integer reference" not in str(e):
                raise
            res.no_int_reference[c.name] = str(e)
            continue
        bad = [o for o, want in zip(g.outputs, c.outputs) if not _matches(np.asarray(got[o]), want)]
        if bad or len(g.outputs) != len(c.outputs):
            res.wrong[c.name] = f"outputs {bad} differ"
        else:
            res.passed.append(c.name)
    return res


def test_conformance_no_wrong_answers(outcome: Outcome) -> None:
    assert outcome.wrong == {}


def test_conformance_pass_count(outcome: Outcome) -> None:
    assert len(outcome.passed) >= MIN_PASSING, (
        f"{len(outcome.passed)} cases pass; unsupported: {sorted(outcome.unsupported)}"
    )


def test_conformance_unsupported_messages_are_clear(outcome: Outcome) -> None:
    # every refusal names the file and gives a reason: a node "name (OpType): why" or an input/opset problem
    assert outcome.unsupported
    for name, msg in outcome.unsupported.items():
        assert f"{name}.onnx" in msg, msg
        reason = msg.splitlines()[-1]
        assert "support" in reason or "needs" in reason, (name, msg)


def test_conformance_covers_layout_ops(outcome: Outcome) -> None:
    # cases of the NCHW-sensitive ops must be among the passing ones, not only the unsupported ones
    for prefix in ("test_conv", "test_maxpool_2d", "test_averagepool_2d", "test_globalaveragepool", "test_batchnorm"):
        assert any(n.startswith(prefix) for n in outcome.passed), prefix
