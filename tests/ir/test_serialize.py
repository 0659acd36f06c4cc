"""The .rlx file: exact round trips, determinism, and hostile or damaged files."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest

from rlx_edge.errors import IRError, ModelFileError
from rlx_edge.ir import serialize
from rlx_edge.ir.dtype import DType, round_to_bf16
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.serialize import FORMAT_VERSION, dumps, load, loads, save
from rlx_edge.ir.types import QuantParams

DRAWS_PER_OP = 6


# helpers ---------------------------------------------------------------------
def one_node_graph(op: str, seed: int, as_params: bool) -> Graph:
    """A graph of one sampled call of ``op``: first input a graph input, the rest params or inputs."""
    rng = np.random.default_rng(seed)
    inputs, attrs, out_quant, in_quant = REGISTRY[op].draw(rng)
    g = Graph(f"{op}_{seed}")
    handles = []
    for i, arr in enumerate(inputs):
        if arr is None:
            handles.append(None)
            continue
        q = in_quant[i] if in_quant is not None else None
        if i == 0 or not as_params:
            handles.append(g.input(f"in{i}", arr.shape, arr.dtype, quant=q))
        else:
            handles.append(g.param(f"p{i}", arr, quant=q))
    outs = g.add_node(op, handles, attrs, out_quant=out_quant)
    g.output(*outs)
    g.metadata = {"op": op, "seed": seed, "nested": {"list": [1, 2.5, None, True, "é"]}}
    return g


def assert_same_graph(a: Graph, b: Graph) -> None:
    assert (a.name, a.stage, a.inputs, a.outputs) == (b.name, b.stage, b.inputs, b.outputs)
    assert a.metadata == b.metadata
    assert list(a.types) == list(b.types)
    assert a.types == b.types  # QuantParams compare scales bit for bit
    plain = [[(k, v) for k, v in n.attrs.items() if not isinstance(v, Graph)] for n in a.nodes]
    assert [(n.id, n.name, n.op, n.inputs, n.outputs) for n in a.nodes] == [
        (n.id, n.name, n.op, n.inputs, n.outputs) for n in b.nodes
    ]
    assert plain == [[(k, v) for k, v in n.attrs.items() if not isinstance(v, Graph)] for n in b.nodes]
    assert repr([n.attrs for n in a.nodes]) == repr([n.attrs for n in b.nodes])  # tuple vs list, int vs float
    for na, nb in zip(a.nodes, b.nodes):  # control-flow subgraphs, the same way
        for k, v in na.attrs.items():
            if isinstance(v, Graph):
                assert_same_graph(v, nb.attrs[k])
    assert list(a.params) == list(b.params)
    for name, arr in a.params.items():
        got = b.params[name]
        assert got.dtype == arr.dtype and got.shape == arr.shape
        assert got.tobytes() == arr.tobytes(), name
        assert not got.flags.writeable
    assert a._next_id == b._next_id
    assert a._counters == b._counters


def round_trip(g: Graph, tmp_path=None) -> Graph:
    data = dumps(g)
    assert dumps(g) == data  # deterministic
    assert dumps(g.copy()) == data
    if tmp_path is not None:
        path = save(g, tmp_path / "m.rlx")
        assert path.read_bytes() == data
        back = load(path)
    else:
        back = loads(data)
    assert_same_graph(g, back)
    assert dumps(back) == data
    return back


def header_and_blob(data: bytes) -> tuple[dict, bytes]:
    _, _, _, hlen, blen = struct.unpack_from("<8sIIQQ", data)
    header = json.loads(data[32 : 32 + hlen])
    start = 32 + hlen + (-(32 + hlen) % 16)
    return header, data[start : start + blen]


def reseal(data: bytes, edit) -> bytes:
    """Change the header with ``edit(header)`` and rebuild a file with a valid checksum."""
    header, blob = header_and_blob(data)
    edit(header)
    return serialize._pack_raw(header, blob)


def small_graph() -> Graph:
    g = Graph("small")
    x = g.input("x", (1, 4), "f32")
    w = g.param("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    g.output(g.fully_connected(x, w, activation="relu"))
    return g


# round trips -------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_every_op_round_trips(op):
    for seed in range(DRAWS_PER_OP):
        for as_params in (True, False):
            round_trip(one_node_graph(op, seed, as_params))


def test_every_dtype_as_param_keeps_its_bits(tmp_path):
    rng = np.random.default_rng(0)
    g = Graph("dtypes")
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, 1 / 3])
    for dt in DType:
        if dt == DType.bf16:
            arr = round_to_bf16(np.concatenate([special, rng.standard_normal(5)]).astype(np.float32))
        elif dt.is_float:
            with np.errstate(over="ignore"):  # 3.4e38 becomes inf in f16, which is fine here
                arr = np.concatenate([special, rng.standard_normal(5)]).astype(dt.numpy)
        elif dt == DType.bool:
            arr = rng.random((2, 3)) < 0.5
        else:
            arr = rng.integers(dt.min, dt.max, (3, 2), endpoint=True).astype(dt.numpy)
            arr.flat[0], arr.flat[1] = dt.min, dt.max
        g.param(f"p_{dt.value}", arr, dtype=dt)
    g.param("empty", np.zeros((0, 3), np.float32))
    g.param("scalar", np.float64(2.5))
    back = round_trip(g, tmp_path)
    assert {back.types[f"p_{dt.value}"].dtype for dt in DType} == set(DType)
    assert back.types["p_bf16"].dtype == DType.bf16 and back.params["p_bf16"].dtype == np.float32
    assert back.types["p_i4"].dtype == DType.i4 and back.params["p_i4"].dtype == np.int8


def test_quantized_and_symbolic_types_round_trip():
    g = Graph("quant")
    # Scales that a decimal float32 print would not give back exactly.
    odd = np.array([1 / 3, 2.0**-149, 3.4028235e38, 0.1, 7e-40, 0.0], np.float32)
    x = g.input("x", ("N", 8, 8, 6), "i8", quant=QuantParams(np.float32(1 / 255), -128))
    w = g.param(
        "w",
        np.ones((6, 3, 3, 6), np.int8),
        quant=QuantParams(odd, np.zeros(6), axis=0),
    )
    b = g.param("b", np.arange(6, dtype=np.int32), quant=QuantParams(odd * 0.5, 0, axis=-1, storage="i32"))
    y = g.conv2d(x, w, b, padding="same", out_quant=QuantParams(np.float32(0.0234567), 5, storage="i8"))
    s = g.input("s", ("N", "T"), "f32")
    g.output(y, g.relu(s))
    back = round_trip(g)
    assert back.types["x"].shape == ("N", 8, 8, 6)
    assert back.types["w"].quant.scale.view(np.uint32).tolist() == odd.view(np.uint32).tolist()
    assert back.types["b"].quant.axis == -1
    assert back.types[y.name].quant == g.types[y.name].quant


def test_unnamed_empty_graph_round_trips():
    round_trip(Graph(""))


def test_non_finite_float_attrs_round_trip():
    g = Graph("clip")
    x = g.input("x", (2, 3), "f32")
    g.output(g.clamp(x, min=float("-inf"), max=6.0))
    back = round_trip(g)
    assert back.nodes[0].attrs["min"] == float("-inf")


def test_hir_stage_and_unknown_optional_section_survive():
    g = small_graph()
    data = dumps(g)
    # A newer writer's extra section that this reader does not understand is ignored...
    extended = reseal(data, lambda h: h.update(program={"schedule": [0], "arena": 128}))
    assert_same_graph(g, loads(extended))
    # ...and kept for code that reads the container.
    assert serialize.unpack(extended).sections["program"] == {"schedule": [0], "arena": 128}


def test_metadata_that_json_would_change_is_refused():
    g = small_graph()
    g.metadata["shape"] = (1, 2)
    with pytest.raises(IRError, match="tuple"):
        dumps(g)
    g.metadata = {"x": float("nan")}
    with pytest.raises(IRError, match="metadata"):
        dumps(g)
    g.metadata = {1: "a"}
    with pytest.raises(IRError, match="not a string"):
        dumps(g)


def test_invalid_graph_is_not_written():
    g = small_graph()
    g.nodes[0].inputs[0] = "missing"
    with pytest.raises(IRError, match="not defined"):
        dumps(g)


# damaged and hostile files --------------------------------------------------------
def test_layout_prefix_and_alignment():
    g = small_graph()
    data = dumps(g)
    magic, version, reserved, hlen, _ = struct.unpack_from("<8sIIQQ", data)
    assert (magic, version, reserved) == (b"RLXEDGE\0", FORMAT_VERSION, 0)
    assert data[-32:] == hashlib.sha256(data[:-32]).digest()
    header, blob = header_and_blob(data)
    assert header["requires"] == []
    rec = header["graph"]["params"][0]
    assert rec["offset"] % 16 == 0 and (32 + hlen + (-(32 + hlen) % 16)) % 16 == 0
    assert blob[rec["offset"] : rec["offset"] + rec["nbytes"]] == g.params["w"].astype("<f4").tobytes()


@pytest.mark.parametrize("where", ["header", "blob", "digest", "padding"])
def test_flipped_byte_is_corrupt(where):
    data = bytearray(dumps(small_graph()))
    _, _, _, hlen, _ = struct.unpack_from("<8sIIQQ", data)
    pos = {"header": 32 + hlen // 2, "blob": len(data) - 40, "digest": len(data) - 1, "padding": 32 + hlen}[where]
    if where == "padding" and (32 + hlen) % 16 == 0:
        pytest.fail("test graph must have header padding")
    data[pos] ^= 0x40
    with pytest.raises(ModelFileError, match=r"^m\.rlx: is corrupt: checksum"):
        loads(bytes(data), "m.rlx")


def test_every_truncation_is_reported():
    data = dumps(small_graph())
    with pytest.raises(ModelFileError, match=r"m\.rlx: is empty"):
        loads(b"", "m.rlx")
    for cut in range(1, len(data)):
        with pytest.raises(ModelFileError, match=r"^m\.rlx: is truncated") as e:
            loads(data[:cut], "m.rlx")
        assert "\n" not in str(e.value)


def test_trailing_bytes_are_corrupt():
    with pytest.raises(ModelFileError, match="corrupt"):
        loads(dumps(small_graph()) + b"\0", "m.rlx")


def test_future_version_asks_for_upgrade():
    data = bytearray(dumps(small_graph()))
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    msg = f"m.rlx was written by rlx-edge format v{FORMAT_VERSION + 1}; this rlx-edge reads up to v{FORMAT_VERSION}"
    with pytest.raises(ModelFileError, match=msg + " — upgrade rlx-edge"):
        loads(bytes(data), "m.rlx")


def test_version_zero_and_reserved_field():
    data = bytearray(dumps(small_graph()))
    struct.pack_into("<I", data, 8, 0)
    with pytest.raises(ModelFileError, match="version 0"):
        loads(bytes(data))


@pytest.mark.parametrize("blob", [b"PK\x03\x04 a zip", b"\x93NUMPY", b"{}", b"RLXEDGF\0" + bytes(64)])
def test_wrong_magic(blob):
    with pytest.raises(ModelFileError, match=r"m\.rlx: is not an rlx-edge model file"):
        loads(blob, "m.rlx")


@pytest.mark.parametrize("field", [16, 24])
def test_huge_declared_length_is_not_allocated(field):
    data = bytearray(dumps(small_graph()))
    struct.pack_into("<Q", data, field, 2**64 - 1)
    with pytest.raises(ModelFileError, match="truncated"):
        loads(bytes(data), "m.rlx")


def _edit_param(**kw):
    def edit(h):
        h["graph"]["params"][0].update(kw)

    return edit


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_edit_param(shape=[2**40, 2**40]), "do not hold"),
        (_edit_param(shape=[2**40, 2**40], nbytes=2**82), "truncated"),
        (_edit_param(offset=1 << 60), "truncated"),
        (_edit_param(offset=8), "aligned"),
        (_edit_param(offset=-16), "non-negative"),
        (_edit_param(dtype="float32"), "unknown dtype 'float32'"),
        (_edit_param(dtype="i32"), "does not match its declared type"),
        (_edit_param(shape=[3, "N"]), "static shape"),
        (_edit_param(shape=[True, 12]), "shape dimensions"),
    ],
)
def test_hostile_param_records(edit, match):
    with pytest.raises(ModelFileError, match=match) as e:
        loads(reseal(dumps(small_graph()), edit), "m.rlx")
    assert str(e.value).startswith("m.rlx")


def _set(path, value):
    def edit(h):
        d = h
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_set(["graph", "nodes", 0, "op"], "conv9d"), "node 'fully_connected_0' uses unknown op 'conv9d'"),
        (_set(["graph", "nodes", 0, "attrs", "activation"], "gelu"), "must be one of"),
        (_set(["graph", "nodes", 0, "attrs", "bogus"], 1), "no attribute bogus"),
        (_set(["graph", "values", 0, "dtype"], "f128"), "unknown dtype 'f128'"),
        (_set(["graph", "values", 2, "shape"], [1, 4]), "recorded as f32\\[1,4\\] but its inputs give f32\\[1,3\\]"),
        (_set(["graph", "nodes", 0, "inputs"], ["x", "nowhere"]), "not defined before use"),
        (_set(["graph", "stage"], "asm"), "stage"),
        (_set(["graph", "nodes"], {"a": 1}), "must be a JSON list"),
        (_set(["graph", "values", 0, "quant"], {"scale": [0.5], "zero_point": [0]}), "non-integer type f32"),
        (_set(["graph", "values", 0, "quant"], {"scale": [0.5], "zero_point": [0.5]}), "64-bit integers"),
        (_set(["graph", "values", 0, "quant"], {"scale": ["x"], "zero_point": [0]}), "floating-point"),
        (_set(["graph", "values", 0, "quant"], {"scale": [1e300], "zero_point": [0]}), "exact float32"),
        (_set(["graph", "next_id"], -1), "next_id"),
        (_set(["requires"], ["sparse-blobs"]), "needs feature\\(s\\) sparse-blobs .* upgrade rlx-edge"),
        (_set(["requires"], "x"), "list of feature names"),
        (lambda h: h.pop("graph"), "has no graph section"),
    ],
)
def test_hostile_headers(edit, match):
    with pytest.raises(ModelFileError, match=match) as e:
        loads(reseal(dumps(small_graph()), edit), "m.rlx")
    assert str(e.value).startswith("m.rlx") and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text",
    [b"[1,2]", b'{"graph":NaN}', b'{"a":1,"a":2}', b"\xff\xfe", b"[" * 100000 + b"]" * 100000, b"{"],
)
def test_malformed_header_json(text):
    head = text
    prefix = struct.pack("<8sIIQQ", b"RLXEDGE\0", 1, 0, len(head), 0)
    body = prefix + head + b"\0" * (-(len(prefix) + len(head)) % 16)
    data = body + hashlib.sha256(body).digest()
    with pytest.raises(ModelFileError, match="malformed header"):
        loads(data, "m.rlx")


def test_bad_i4_and_bool_bytes_are_refused():
    g = Graph("narrow")
    g.param("q", np.array([1, -8, 7], np.int8), dtype="i4")
    g.param("m", np.array([True, False]))
    data = dumps(g)
    _, blob = header_and_blob(data)
    header, _ = header_and_blob(data)
    q, m = header["graph"]["params"]
    for rec, bad, match in ((q, 8, "i4 values"), (m, 2, "bool values")):
        b = bytearray(blob)
        b[rec["offset"]] = bad
        with pytest.raises(ModelFileError, match=match):
            loads(serialize._pack_raw(header, bytes(b)), "m.rlx")


def test_load_errors_name_the_path(tmp_path):
    with pytest.raises(ModelFileError, match="no such file"):
        load(tmp_path / "nope.rlx")
    with pytest.raises(ModelFileError, match="is a directory"):
        load(tmp_path)
    p = tmp_path / "junk.rlx"
    p.write_bytes(b"hello")
    with pytest.raises(ModelFileError, match=f"^{p}: is not an rlx-edge"):
        load(p)


def test_loading_never_unpickles(monkeypatch):
    import pickle

    def boom(*a, **k):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(np, "load", boom)
    round_trip(one_node_graph("conv2d", 1, True))
