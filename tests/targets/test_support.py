"""The support table says what the targets do: its declarations are the ones their checks use."""

import json

import numpy as np
import pytest

from rlx_edge.cli import main
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.runners import TARGETS
from rlx_edge.targets.support import support_table, targets_support


def _conv(act: str, weight: str) -> Graph:
    g = Graph("probe")
    x = g.input("x", (1, 4, 4, 2), act, quant=QuantParams(0.05, 0))
    w = g.param("w", np.ones((3, 1, 1, 2), np.int8), dtype=weight, quant=QuantParams(np.full(3, 0.01), 0, axis=0))
    g.output(g.conv2d(x, w, out_quant=QuantParams(0.1, 0)))
    return g


def test_every_runnable_target_belongs_to_one_family():
    names = [r for f in targets_support() for r in f.runs_as if r in TARGETS]
    assert sorted(names) == sorted(TARGETS)


def test_cortexm_row_matches_what_its_rules_accept():
    from rlx_edge.targets.cortexm import layer_for

    cortexm = next(f for f in targets_support() if f.name == "cortexm")
    assert cortexm.schemes == ("int8", "int16x8", "int4w")
    for act, weight in (("i8", "i8"), ("i8", "i4"), ("i16", "i8")):
        g = _conv(act, weight)
        layer_for(g, g.nodes[0])
    g = _conv("i16", "i4")  # int4 weights take int8 activations only
    with pytest.raises(UnsupportedOpError, match="int8 weights with int16 activations"):
        layer_for(g, g.nodes[0])


def test_targets_command_prints_the_table(capsys):
    assert main(["targets"]) == 0
    assert capsys.readouterr().out == support_table()
    assert main(["targets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["targets"]
    assert [r["name"] for r in rows] == ["reference", "cortexm", "fpga", "jax"]
