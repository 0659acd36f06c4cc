"""Fault injection between the HIL client and QEMU: no hang, no corrupted result accepted.

A proxy (rlx_edge.hil.faults.FaultProxy) between the client and the emulated
UART flips bits, drops, duplicates and inserts bytes, truncates messages,
resets the board in the middle of commands and makes it go silent. Every
call must return within its time bound, and every result it returns must be
the right one; what cannot be recovered is reported as an error.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.hil.client import HilClient
from rlx_edge.hil.faults import FAULT_KINDS, FaultProxy
from rlx_edge.hil.transport import HilError, HilTimeout
from rlx_edge.targets.cortexm import QemuBoard, build_firmware

_spec = importlib.util.spec_from_file_location(
    "_standin", Path(__file__).resolve().parents[1] / "firmware" / "_standin.py"
)
_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_standin)

BOARD = "qemu-mps2-an386"
TIMEOUT = 0.06
RETRIES = 6
RESTARTS = 3
# One inference is three commands, each attempted at most RETRIES + 1 times
# for at most two timeouts (the answer, and the result after BUSY), and
# restarted at most RESTARTS times: the most a call can take, with slack for
# a loaded machine.
CALL_BOUND_S = (RESTARTS + 1) * 3 * (RETRIES + 1) * 2 * TIMEOUT + 1.0


@pytest.fixture(scope="module")
def elf(tmp_path_factory):
    return build_firmware(_standin.FIXTURES / "standin", BOARD, tmp_path_factory.mktemp("faults"))


def test_thousand_injected_faults(elf):
    # Chunk boundaries depend on timing, so the counts vary from run to run:
    # silence (a sixth of a second each) is weighted so that its expected
    # count (about 45) stays well above the minimum of 20 asserted below.
    weights = {"bitflip": 3, "drop": 2, "duplicate": 2, "truncate": 2, "garbage": 2, "reset": 1.5, "silence": 0.6}
    rng = np.random.default_rng(7)
    ok = failed = 0
    reasons: list[str] = []
    slowest = 0.0
    with QemuBoard(elf, BOARD) as qemu, FaultProxy(qemu.url, rate=0.3, kinds=weights, seed=11, silence_s=0.15) as px:
        client = HilClient(px.url, timeout=TIMEOUT, run_timeout=TIMEOUT, retries=RETRIES, restarts=RESTARTS)
        px.enabled = False
        client.hello()
        px.enabled = True
        t_start = time.monotonic()
        while px.total < 1000:
            x = rng.integers(-128, 128, 16, dtype=np.int8)
            t0 = time.monotonic()
            try:
                r = client.infer(x)
            except HilError as e:
                failed += 1  # detected and reported
                reasons.append(str(e))
            else:
                # Accepted results are always right.
                assert r.status == 0
                assert r.output == _standin.standin_reference(x).tobytes(), (x, r.output)
                ok += 1
            slowest = max(slowest, time.monotonic() - t0)
            assert time.monotonic() - t_start < 150, "the fault campaign is far slower than expected"
        counts = dict(px.counts)
        stats = client.stats
        # The board works again once the faults stop.
        px.enabled = False
        time.sleep(0.2)
        x = np.arange(16, dtype=np.int8)
        assert client.infer(x).output == _standin.standin_reference(x).tobytes()
        client.close()
        assert px.error is None
    print(f"faults {counts}; {ok} right results, {failed} reported failures; slowest call {slowest:.2f} s; {stats}")
    print("first failures:", reasons[:3])
    assert sum(counts.values()) >= 1000
    assert set(counts) == set(FAULT_KINDS)
    assert min(counts.values()) >= 20
    assert slowest < CALL_BOUND_S
    # Nearly every inference survives its faults by retrying.
    assert ok >= 10 * failed
    # The machinery was exercised: real resets, restarts and retries.
    assert stats.boots > 20 and stats.restarts > 10 and stats.retries > 300


def test_board_that_stops_answering(elf):
    with QemuBoard(elf, BOARD) as qemu, FaultProxy(qemu.url, rate=0.0) as px:
        client = HilClient(px.url, timeout=0.1, retries=2)
        client.hello()
        px.silence(1.5)
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(HilTimeout, match=r"HELLO failed after 3 attempts; last: no answer after 0\.1 s"):
                client.hello()
            # Bounded: three attempts of 0.1 s.
            assert time.monotonic() - t0 < 1.0
        time.sleep(1.5)
        info = client.hello()
        assert info.input_bytes == 16
        x = np.full(16, 3, np.int8)
        assert client.infer(x).output == _standin.standin_reference(x).tobytes()
        client.close()
