"""while_ on Cortex-M: a real C ``while`` loop when the trip count is known at run time only.

The int8 counter loop (``while i < n: x = x + c; i += 1``, n a model input) written as TFLite by the
exporter: its C has one copy of the body inside a ``while``, and the host build and QEMU M4 give
TFLite Micro's outputs bit for bit.
"""

from __future__ import annotations

import numpy as np
from controlgraphs import Q, branchy, int8_counter_loop, running_sum, values

from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.runners import prepare
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.cortexm.emit import emit
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(31)


def _feeds(counts) -> list[dict[str, np.ndarray]]:
    return [{"x": values(RNG, (4,), Q), "n": np.asarray(n, np.int8)} for n in counts]


def test_dynamic_while_is_a_c_loop_bit_exact_with_tflite_micro_on_host_and_qemu(host_dir) -> None:
    data = to_tflite_bytes(int8_counter_loop())
    g = load_tflite_bytes(data)
    assert [n.op for n in g.nodes] == ["while_"]
    model_c = emit(g).files["model.c"]
    assert model_c.count("while (1) {") == 1 and model_c.count("rlx_add_s8(") == 2  # one body, not unrolled
    feeds = _feeds((0, 1, 2, 5, 9, 60, -3))
    with TflmModel(data) as tflm:
        wants = [tflm([f["x"], f["n"]])[0] for f in feeds]
    host = compile_host(g, host_dir)
    for f, want in zip(feeds, wants):
        got = host.run(f)[g.outputs[0]]
        assert got.dtype == want.dtype and np.array_equal(got, want), f["n"]
    qemu = prepare("qemu-m4", g, host_dir)
    for f, want in list(zip(feeds, wants))[:4]:
        assert np.array_equal(qemu(f)[g.outputs[0]], want), f["n"]


def test_a_bounded_while_counts_its_trips(host_dir) -> None:
    g = int8_counter_loop(max_trips=3)
    model_c = emit(g).files["model.c"]
    assert "while (trips < 3u) {" in model_c
    host = compile_host(g, host_dir)
    for f in _feeds((0, 2, 3, 7)):
        want = run(g, f)[g.outputs[0]]
        assert np.array_equal(host.run(f)[g.outputs[0]], want), f["n"]


def test_if_is_a_c_if_and_scan_runs_lowered_bit_exact(host_dir) -> None:
    """An if_ with a run-time condition is a C ``if`` over its branches' layers (only the branch taken
    runs); Cortex-M has no scan rule: legalization unrolls it. The C computes what the reference's
    control flow does."""
    for g, feeds, native in (
        (branchy(Q), [{"cond": np.array([c]), "x": values(RNG, (2, 3), Q), "y": values(RNG, (2, 3), Q)}
                      for c in (True, False)], {"if_"}),
        (running_sum(Q, length=4), [{"acc": values(RNG, (3,), Q), "xs": values(RNG, (4, 3), Q)} for _ in range(2)],
         set()),
    ):  # fmt: skip
        host = compile_host(g, host_dir)
        assert {"if_", "scan"} & {n.op for n in host.program.graph.nodes} == native
        model_c = emit(g).files["model.c"]
        assert model_c.count("if (*(const uint8_t *)") == len(native) and "select" not in model_c
        for f in feeds:
            want, got = run(g, f), host.run(f)
            assert all(np.array_equal(got[k], want[k]) for k in g.outputs), g.name
