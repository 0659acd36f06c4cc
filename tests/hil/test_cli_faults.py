"""``rlx-edge hil --faults RATE``: a link test through the fault-injecting proxy (issue #14).

A fifth of the messages between host and QEMU is damaged (bits flipped,
bytes dropped, duplicated or inserted, frames cut short, the board reset or
silent); the campaign must still answer nearly every input and never accept
a wrong result.
"""

from __future__ import annotations

import json

from modelfiles import MLPERF
from rlx_edge.cli import main

MODEL = MLPERF / "ad01_int8.tflite"
BOARD = "qemu-mps2-an386"
COUNT = 50


def test_faults_at_rate_0_2_no_wrong_result_accepted(capsys):
    # --timeout 0.5: QEMU answers in milliseconds, so a lost message is retried
    # after half a second rather than the real-board default of two.
    argv = ["hil", str(MODEL), "--board", BOARD, "--faults", "0.2", "--count", str(COUNT), "--timeout", "0.5"]
    code = main([*argv, "--json"])
    rep = json.loads(capsys.readouterr().out)
    print({k: rep[k] for k in ("faults", "faults_injected", "retries", "answered", "wrong_accepted", "wall_s")})
    assert rep["wrong_accepted"] == 0 and rep["mismatches"] == 0
    assert rep["answered"] >= 0.96 * COUNT, rep["error_messages"]
    assert code == 0
    # Faults were really injected, of every kind, and survived by retrying.
    assert rep["faults_injected"] >= COUNT and set(rep["faults"]["by_kind"]) == {
        "bitflip",
        "drop",
        "duplicate",
        "truncate",
        "garbage",
        "reset",
        "silence",
    }
    assert rep["retries"] >= rep["faults_injected"] // 2
    assert rep["faults"]["rate"] == 0.2 and rep["requested"] == COUNT


def test_faults_text_report(capsys):
    assert main(["hil", str(MODEL), "--board", BOARD, "--faults", "0.1", "--count", "4", "--timeout", "0.5"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"link test on {BOARD} at fault rate 0.1: "), out
    assert "faults injected" in out[0] and "retries" in out[0] and "/4 answered, 0 wrong results accepted" in out[0]


def test_faults_need_a_tcp_link(capsys):
    assert main(["hil", str(MODEL), "--board", BOARD, "--port", "/dev/ttyUSB7", "--faults", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs QEMU or a socket:// port" in err, err
