"""The TFLite builtin declarations both directions read (``_tflite_ops``)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.frontends import _tflite_export, tflite
from rlx_edge.frontends._tflite_ops import BUILTINS, EXPORTED_OPS, Builtin, OptionField, exported_as
from rlx_edge.frontends._tflite_schema import schema_module
from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.targets.reference import run


@pytest.mark.parametrize("name", BUILTINS.keys())
def test_declarations_name_real_schema_fields_and_ir_attributes(name: str) -> None:
    b = BUILTINS[name]
    assert b.name == name and (b.ir_ops or b.folded)  # a folded builtin becomes a constant, no op
    if b.options is None or b.folded:
        assert not b.fields
        return
    table = getattr(schema_module(b.options), b.options)
    ir_attrs = get_op(b.ir_ops[0]).attrs  # the op the fields are read into
    for f in b.fields:
        assert hasattr(table, f.name), f"{name}: {b.options} has no field {f.name}"
        assert f.attr is None or f.attr in ir_attrs, f"{name}: {b.ir_ops[0]} has no attribute {f.attr}"


def test_export_mapping_is_the_inverse_of_the_declarations() -> None:
    pairs = {(op, b.name) for b in (BUILTINS[k] for k in BUILTINS) for op in b.ir_ops}
    assert {(op, b.name) for op in EXPORTED_OPS for b in exported_as(op)} == pairs
    assert [b.name for b in exported_as("relu")] == ["RELU"]
    assert [b.name for b in exported_as("cast")] == ["CAST", "DEQUANTIZE"]  # its export rule picks
    assert [b.name for b in exported_as("gelu")] == ["GELU"]
    assert exported_as("silu") == ()
    # an op several builtins write has an export rule that picks one
    for op in EXPORTED_OPS:
        assert len(exported_as(op)) == 1 or op in _tflite_export._RULES, op


def test_every_declared_builtin_is_imported_by_a_converter_or_plainly() -> None:
    for name in BUILTINS:
        b = BUILTINS[name]
        assert name in tflite._CONVERTERS or len(b.ir_ops) == 1, name


def test_fields_convert_both_ways() -> None:
    b = Builtin(
        "X",
        ("conv2d",),
        "Conv2DOptions",
        (
            OptionField("StrideW", "strides", 1),
            OptionField("StrideH", "strides", 0),
            OptionField("Scale", "scale", to_ir=lambda v: v / 2, to_tfl=lambda v: v * 2),
            OptionField("Computed"),
        ),
    )
    stored = {"StrideH": 3, "StrideW": 4, "Scale": 10, "Computed": 99}
    assert b.attrs(lambda f: stored[f.name]) == {"strides": (3, 4), "scale": 5}
    assert b.option_fields({"strides": (3, 4), "scale": 5}, Computed=1) == {
        "StrideW": 4,
        "StrideH": 3,
        "Scale": 10,
        "Computed": 1,
    }
    assert "Computed" not in b.option_fields({"strides": (3, 4), "scale": 5})
    with pytest.raises(KeyError, match="declares no option field Nope"):
        b.option_fields({"strides": (3, 4), "scale": 5}, Nope=1)


def test_cast_round_trips() -> None:
    g = Graph("cast")
    g.output(g.cast(g.relu(g.input("x", (1, 4), "f32")), dtype="i32"))
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert [(n.op, n.attrs) for n in back.nodes] == [(n.op, n.attrs) for n in g.nodes]
    assert to_tflite_bytes(back) == data
    x = np.array([[1.7, -2.5, 3.2, 0.4]], np.float32)
    np.testing.assert_array_equal(run(back, x)[back.outputs[0]], run(g, x)[g.outputs[0]])
