"""inspect: summary numbers checked by hand, the node table and the text forms."""

from __future__ import annotations

import json

import numpy as np

from rlx_edge.ir import inspect
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams


def conv_net() -> Graph:
    g = Graph("tiny")
    x = g.input("x", (1, 8, 8, 1), "f32")
    w1 = g.param("w1", np.ones((4, 3, 3, 1), np.float32))
    b1 = g.param("b1", np.zeros(4, np.float32))
    y = g.conv2d(x, w1, b1, padding="valid", activation="relu")  # -> [1,6,6,4]
    w2 = g.param("w2", np.ones((1, 3, 3, 4), np.float32))
    y = g.depthwise_conv2d(y, w2)  # -> [1,4,4,4]
    w3 = g.param("w3", np.ones((8, 4), np.float32))
    y = g.fully_connected(y, w3)  # -> [1,4,4,8]
    y = g.relu(y)
    g.output(g.add(y, y))
    return g


# By hand: output elements x multiplies per element.
CONV_MACS = (6 * 6 * 4) * (3 * 3 * 1)  # 1296
DW_MACS = (4 * 4 * 4) * (3 * 3)  # 576
FC_MACS = (4 * 4 * 8) * 4  # 512
PARAM_BYTES = 4 * (4 * 3 * 3 * 1 + 4 + 3 * 3 * 4 + 8 * 4)  # 4 bytes per f32: 36 + 4 + 36 + 32 values


def test_summary_counts_by_hand():
    s = inspect.summary(conv_net())
    assert s["macs"] == CONV_MACS + DW_MACS + FC_MACS == 2384
    assert s["param_bytes"] == PARAM_BYTES == 432
    assert s["ops"] == {"add": 1, "conv2d": 1, "depthwise_conv2d": 1, "fully_connected": 1, "relu": 1}
    assert list(s["ops"]) == sorted(s["ops"])
    assert s["nodes"] == 5
    assert (s["name"], s["stage"]) == ("tiny", "mir")
    assert s["inputs"] == [{"name": "x", "shape": [1, 8, 8, 1], "dtype": "f32", "quant": None}]
    assert s["outputs"] == [{"name": "add_0", "shape": [1, 4, 4, 8], "dtype": "f32", "quant": None}]
    json.dumps(s)  # the CLI prints it as JSON


def test_summary_quant_forms():
    g = Graph("q")
    x = g.input("x", (1, 4), "i8", quant=QuantParams(np.float32(0.5), -3))
    w = g.param("w", np.ones((3, 4), np.int8), quant=QuantParams(np.array([0.5, 0.25, 1], np.float32), 0, axis=0))
    g.output(g.fully_connected(x, w, out_quant=QuantParams(np.float32(2.0), 1)))
    s = inspect.summary(g)
    assert s["inputs"][0]["quant"] == {"scale": 0.5, "zero_point": -3, "axis": None}
    assert s["outputs"][0]["quant"] == {"scale": 2.0, "zero_point": 1, "axis": None}
    assert s["macs"] == 12 and s["param_bytes"] == 12
    assert inspect.quant_json(g.types["w"].quant) == {"scale": [0.5, 0.25, 1.0], "zero_point": [0, 0, 0], "axis": 0}


def test_node_table_rows():
    rows = inspect.node_table(conv_net())
    assert [r["name"] for r in rows] == ["conv2d_0", "depthwise_conv2d_0", "fully_connected_0", "relu_0", "add_0"]
    conv = rows[0]
    assert conv["inputs"] == ["f32[1,8,8,1]", "f32[4,3,3,1]", "f32[4]"]
    assert conv["outputs"] == ["f32[1,6,6,4]"]
    assert conv["quant"] == [None]
    assert conv["macs"] == CONV_MACS and conv["param_bytes"] == 4 * (36 + 4)
    assert [r["macs"] for r in rows] == [CONV_MACS, DW_MACS, FC_MACS, 0, 0]
    assert rows[3]["param_bytes"] == 0


def test_node_table_param_read_twice_counts_once():
    g = Graph("twice")
    p = g.param("p", np.ones(5, np.float32))
    g.output(g.add(p, p))
    assert inspect.node_table(g)[0]["param_bytes"] == 20


def test_dump_lists_every_node_aligned():
    g = conv_net()
    text = inspect.dump(g)
    lines = text.splitlines()
    assert lines[0] == inspect.one_line(g)
    assert lines[1].split() == ["node", "op", "inputs", "outputs", "quant", "MACs", "params"]
    assert set(lines[2]) <= {"-", " "}
    for n in g.nodes:
        assert any(line.startswith(n.name + " ") and n.op in line for line in lines[3:]), n.name
    # Columns align: every row puts the op column at the same offset.
    col = lines[1].index("op")
    assert all(line[col:].split()[0] == n.op for line, n in zip(lines[3:], g.nodes))
    assert "1,296" in text


def test_one_line():
    assert inspect.one_line(conv_net()) == (
        "tiny: mir, 5 nodes, 2.38 k MACs, 432 B params, in f32[1,8,8,1] -> out f32[1,4,4,8]"
    )
    g = Graph("kws")
    x = g.input("x", (1, 49, 10, 1), "f32")
    big = g.param("big", np.ones((6100,), np.float32))  # 24,400 bytes
    g.output(g.relu(x), big)
    assert inspect.one_line(g) == (
        "kws: mir, 1 node, 0 MACs, 24.4 kB params, in f32[1,49,10,1] -> out f32[1,49,10,1], f32[6100]"
    )


def test_symbolic_dims_give_unknown_macs():
    g = Graph("sym")
    x = g.input("x", ("N", 4), "f32")
    w = g.param("w", np.ones((3, 4), np.float32))
    g.output(g.fully_connected(x, w))
    assert inspect.summary(g)["macs"] is None
    assert inspect.node_table(g)[0]["macs"] is None
    assert "? MACs" in inspect.one_line(g)
    assert "f32[N,4]" in inspect.dump(g)


def test_scaled_units():
    assert inspect._si(999) == "999"
    assert inspect._si(2_660_000) == "2.66 M"
    assert inspect._si(999_999) == "1 M"
    assert inspect._bytes(24_400) == "24.4 kB"
    assert inspect._bytes(1_500_000) == "1.5 MB"
