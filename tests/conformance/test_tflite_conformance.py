"""The TFLite builtin x dtype conformance table, recomputed (``_suite``) and held to the committed one.

Fails when a case the committed ``tflite_ops.md`` marks pass no longer passes,
when any case gives a wrong answer, or when the table is stale in a way that
matters (rows added or gone, a failing case failing for another reason); a new
pass not yet recorded only prints a hint. Regenerate the table with
``python tests/conformance/generate.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conformance._suite import SIDES, Case, _equal, run_suite
from conformance.generate import TABLE, parse, render, summary_line


@pytest.fixture(scope="module")
def now(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    cases = run_suite(tmp_path_factory.mktemp("tflite_conformance"))
    print(summary_line(cases))
    return {c.key: c for c in cases}


@pytest.fixture(scope="module")
def committed() -> dict[str, str]:
    table = parse(TABLE.read_text())
    assert table, f"{TABLE} has no case rows"
    return table


def test_no_wrong_answers(now: dict[str, Case]) -> None:
    wrong = {k: c.reason for k, c in now.items() if c.status == "wrong"}
    assert not wrong, wrong


def test_committed_passes_still_pass(now: dict[str, Case], committed: dict[str, str]) -> None:
    lost = {k: f"{now[k].status}: {now[k].reason}" for k, v in committed.items() if v == "pass" and k in now}
    lost = {k: v for k, v in lost.items() if not v.startswith("pass")}
    assert not lost, lost


def test_table_is_current(now: dict[str, Case], committed: dict[str, str]) -> None:
    assert sorted(committed) == sorted(now), "cases added or gone: regenerate tests/conformance/tflite_ops.md"
    new_passes = [k for k, v in committed.items() if v != "pass" and now[k].status == "pass"]
    if new_passes:
        print(f"hint: these cases pass now; regenerate {TABLE.name} to record them: {new_passes}")
    changed = {k: (v, now[k].status) for k, v in committed.items() if v != "pass" and now[k].status not in ("pass", v)}
    assert not changed, f"failing cases whose status changed (committed, now): {changed}; regenerate {TABLE.name}"


def test_classification() -> None:
    """A mismatch on any side is wrong; a clear refusal of ours counts as not passing."""

    def case(declared: bool, **sides: str) -> Case:
        return Case("ADD", "int8", sides={s: sides.get(s, "pass") for s in SIDES}, declared=declared)

    assert case(True).status == "pass"
    assert case(True, cortexm="n/a").status == "pass"
    assert case(True, jax="wrong").status == "wrong"
    assert case(True, cortexm="unsupported").status == "unsupported"
    assert case(True, cortexm="error").status == "error"
    assert case(True, tflm="refuses", reference="-", cortexm="-", jax="-").status == "unsupported"
    assert case(False, tflm="refuses", reference="-", cortexm="-", jax="-").status == "tflm-unsupported"
    assert case(False, tflm="-", reference="-", cortexm="-", jax="-").status == "n/a"
    assert case(True, tflm="-", reference="-", cortexm="-", jax="-").status == "unsupported"
    want = np.array([1, 2, 3], np.int8)
    assert _equal("cortexm", want.copy(), want)
    assert not _equal("cortexm", want + np.int8(1) * (np.arange(3) == 2), want)
    assert not _equal("cortexm", want.astype(np.int16), want)
    f = np.array([1.0, 2.0], np.float32)
    assert _equal("jax", f * (1 + 1e-7), f)  # within JAX_FLOAT_TOL
    assert not _equal("jax", f * (1 + 1e-3), f)
    assert not _equal("cortexm", f * (1 + 1e-7), f)  # only jax has a float tolerance


def test_table_round_trips() -> None:
    cases = [Case("ADD", "int8", sides={s: "pass" for s in SIDES}, declared=True)]
    assert parse(render(cases)) == {"ADD/int8": "pass"}
