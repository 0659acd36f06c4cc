"""RuleTable: the one registration mechanism (targets, passes, ONNX and TFLite both ways)."""

from __future__ import annotations

import pytest

from rlx_edge.ir.rules import RuleTable


def _f(*args):
    return "f"


def _g(*args):
    return "g"


def test_rule_registers_every_key_and_returns_the_function():
    t: RuleTable = RuleTable("mine")
    assert t.rule("b", "a")(_f) is _f
    t.add("c", _g)
    assert "a" in t and "b" in t and "c" in t and "d" not in t
    assert t["a"] is t["b"] is _f and t["c"] is _g
    assert list(t) == ["a", "b", "c"] == t.keys()  # sorted, whatever the order of registration
    assert t.items() == [("a", _f), ("b", _f), ("c", _g)]
    assert len(t) == 3
    assert t.get("d") is None and t.get("d", _g) is _g


def test_a_key_registered_twice_is_an_error_naming_table_and_key():
    t: RuleTable = RuleTable("cortexm", what="op")
    t.rule("conv2d")(_f)
    with pytest.raises(RuntimeError, match=r"rule table 'cortexm': two entries for op 'conv2d'"):
        t.rule("conv2d")(_g)
    with pytest.raises(RuntimeError, match="two entries"):
        t.add("conv2d", _f)  # even the same function: one key, one place
    assert t["conv2d"] is _f


def test_missing_key_is_a_clear_key_error():
    t: RuleTable = RuleTable("passes", what="pass")
    with pytest.raises(KeyError, match=r"rule table 'passes' has no entry for pass 'fold'"):
        t["fold"]
    with pytest.raises(KeyError, match="has no entry"):
        t.metadata("fold")


def test_keys_are_validated_when_the_table_says_which_it_accepts():
    t: RuleTable = RuleTable("tflite export", keys={"conv2d", "add"}, what="op")
    t.rule("add")(_f)
    with pytest.raises(RuntimeError, match=r"rule table 'tflite export': 'nope' is not a known op"):
        t.rule("conv2d", "nope")(_f)
    assert "nope" not in t and "conv2d" not in t  # all keys or none


def test_a_target_table_accepts_declared_ops_only():
    t: RuleTable = RuleTable.for_ops("target")
    t.rule("conv2d", "relu")(_f)
    with pytest.raises(RuntimeError, match=r"'conv_2d' is not a known op"):
        t.rule("conv_2d")(_f)
    assert t.keys() == ["conv2d", "relu"]


def test_metadata_per_entry():
    t: RuleTable = RuleTable("passes")
    t.rule("fold", doc="fold constants")(_f)
    t.rule("dce")(_g)
    assert t.metadata("fold") == {"doc": "fold constants"}
    assert dict(t.metadata("dce")) == {}
    with pytest.raises(TypeError):
        t.metadata("fold")["doc"] = "changed"  # read-only: the registration is the one place to say it


def test_rule_needs_a_key():
    with pytest.raises(TypeError, match="at least one key"):
        RuleTable("mine").rule()


def test_replaced_restores_the_table():
    t: RuleTable = RuleTable("jax")
    t.add("relu", _f)
    with t.replaced("relu", _g):
        assert t["relu"] is _g
    assert t["relu"] is _f
    with t.replaced("relu", None):
        assert "relu" not in t
    assert t["relu"] is _f
    with t.replaced("new", _g):
        assert t["new"] is _g
    assert "new" not in t
    with pytest.raises(ValueError), t.replaced("relu", _g):
        raise ValueError  # restored on errors too
    assert t["relu"] is _f


def test_every_registration_in_the_package_is_a_rule_table():
    from rlx_edge.frontends import _onnx_ops, _tflite_export, _tflite_ops, tflite
    from rlx_edge.ir.passes import PASSES
    from rlx_edge.targets.cortexm.rules import RULES as CORTEXM
    from rlx_edge.targets.fpga.design import rules as FPGA
    from rlx_edge.targets.jax import RULES as JAX

    tables = [
        _onnx_ops.HANDLERS,
        _onnx_ops.CONTRIB_HANDLERS,
        _tflite_ops.BUILTINS,
        tflite._CONVERTERS,
        tflite._CHECKS,
        _tflite_export._RULES,
        PASSES,
        CORTEXM,
        FPGA,
        JAX,
    ]
    assert all(isinstance(t, RuleTable) and len(t) for t in tables)
    assert PASSES.metadata("fold")["doc"]
