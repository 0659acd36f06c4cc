"""cocotb test bench for rlx-edge generated datapaths (cocotb 2.x).

Structure (one class each): a :class:`StreamDriver` per input stream, a
:class:`StreamMonitor` per output stream, a :class:`ReferenceModel` holding
the integer reference's outputs for every inference, a :class:`Checker`
comparing every output element bit-exactly, and a :class:`PhaseTimer`
recording how many cycles each layer (``phase``) takes.

The bench is configured through two environment variables, set by
``rlx_edge.targets.fpga.sim.simulate``:

``RLX_FPGA_VECTORS``
    an ``.npz`` file: ``meta`` (JSON text: streams, lanes, beats, clock
    period), ``in{k}`` [inferences, elements] int8 inputs and ``exp{k}``
    [inferences, elements] int8 expected outputs;
``RLX_FPGA_RESULTS``
    where the JSON results go: cycles per inference (first input beat to
    last output beat), cycles per phase, mismatches, first mismatch; the
    outputs the hardware produced go to the same path plus ``.npz``.

The one test is parametrized over the handshake (``cocotb.parametrize``):
``steady`` drives a beat on every cycle the datapath is ready and keeps every
output ready, so the cycle counts measure the datapath alone; ``stalls``
drops input ``valid`` and output ``ready`` on seeded random cycles (about
a third of them), as a real AXI-Stream neighbour does, and checks that no
beat is lost, repeated or reordered. The caller picks one with the runner's
test filter. An output beat with X or Z bits (a register never written,
read by Icarus) is reported as such instead of as a number.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, SimTimeoutError, ValueChange, with_timeout
from cocotb.types import LogicArray
from cocotb.utils import get_sim_time

#: the handshake modes of :func:`stream_and_compare` (see the module docstring)
HANDSHAKES = ("steady", "stalls")


def _pack(row: np.ndarray, lanes: int) -> list[int]:
    """int8 elements to beats of ``lanes`` bytes, element 0 in the low byte."""
    u = row.astype(np.uint8).reshape(-1, lanes)
    return [int.from_bytes(beat.tobytes(), "little") for beat in u]


def _unpack(beats: list[int], lanes: int) -> np.ndarray:
    raw = b"".join(int(b).to_bytes(lanes, "little") for b in beats)
    return np.frombuffer(raw, dtype=np.int8).copy()


class StreamDriver:
    """Drives one valid/ready input stream, one beat per accepted handshake."""

    def __init__(self, dut, k: int, clk, period: float, gaps: random.Random | None = None):
        self.data = getattr(dut, f"in{k}_data")
        self.valid = getattr(dut, f"in{k}_valid")
        self.ready = getattr(dut, f"in{k}_ready")
        self.clk = clk
        self.period = period
        self.gaps = gaps  # None: valid on every cycle; else valid drops on random cycles
        # drive every input from the start: Icarus loses the first write to a still-floating (Z) port
        self.data.value = 0
        self.valid.value = 0

    async def send(self, beats: list[int], on_first=None) -> None:
        # Inputs change only at falling edges and the design samples them at
        # rising edges, so no simulator's scheduling order can race them.
        # ``ready`` depends on registers only: sampled at the falling edge it
        # tells whether the next rising edge completes the handshake.
        await FallingEdge(self.clk)
        i = 0
        self.data.value = beats[0]
        offered = self.valid.value = self._offer()
        while i < len(beats):
            # ``offered``, not a read of valid: a write shows on the signal only after this time step
            accepted = offered and bool(int(self.ready.value))
            await FallingEdge(self.clk)
            if accepted:
                if i == 0 and on_first is not None:
                    on_first("t", get_sim_time("ns") - self.period / 2)
                i += 1
                if i < len(beats):
                    self.data.value = beats[i]
            if i < len(beats):
                # a beat not yet taken stays offered with the same data (AXI-Stream's rule) only while
                # valid stays up; with gaps the driver may also withdraw it, which the design must allow
                offered = self.valid.value = self._offer()
        self.valid.value = 0

    def _offer(self) -> int:
        return 1 if self.gaps is None else int(self.gaps.random() >= 0.35)


class StreamMonitor:
    """Collects the beats of one output stream (always ready) until ``last``."""

    def __init__(self, dut, k: int, clk, stalls: random.Random | None = None):
        self.k = k
        self.data = getattr(dut, f"out{k}_data")
        self.valid = getattr(dut, f"out{k}_valid")
        self.last = getattr(dut, f"out{k}_last")
        self.ready = getattr(dut, f"out{k}_ready")
        self.ready.value = 1
        self.clk = clk
        self.stalls = stalls  # None: always ready; else ready drops on random cycles

    async def receive(self) -> tuple[list[int], float]:
        beats = []
        while True:
            if not int(self.valid.value):
                # no per-cycle Python while the datapath computes: wake on the valid edge
                await RisingEdge(self.valid)
            await FallingEdge(self.clk)
            ready = 1
            if self.stalls is not None:
                # ready changes at falling edges only, like the driver's inputs
                ready = self.ready.value = int(self.stalls.random() >= 0.35)
            if int(self.valid.value) and ready:
                beats.append(self._beat(len(beats)))
                if int(self.last.value):
                    await RisingEdge(self.clk)  # the edge of the last handshake
                    self.ready.value = 1
                    return beats, get_sim_time("ns")

    def _beat(self, index: int) -> int:
        value = LogicArray(self.data.value)
        if not value.is_resolvable:
            raise UnresolvedOutput(f"output {self.k} beat {index} has X/Z bits: {value}")
        return int(value)


class UnresolvedOutput(Exception):
    """An output beat with X or Z bits: the datapath drove a value it never computed."""


class ReferenceModel:
    """The integer reference's outputs, computed on the host before simulation."""

    def __init__(self, vectors):
        self.vectors = vectors

    def expected(self, k: int, inference: int) -> np.ndarray:
        return self.vectors[f"exp{k}"][inference]


class Checker:
    """Bit-exact comparison of every output element; keeps the first mismatch."""

    def __init__(self):
        self.mismatches = 0
        self.first = None

    def check(self, inference: int, k: int, got: np.ndarray, want: np.ndarray) -> None:
        bad = np.flatnonzero(got != want) if got.shape == want.shape else np.arange(max(len(want), 1))
        self.mismatches += int(bad.size)
        if bad.size and self.first is None:
            i = int(bad[0])
            self.first = {
                "inference": inference,
                "output": k,
                "index": i,
                "got": int(got[i]) if i < got.size else None,
                "want": int(want[i]) if i < want.size else None,
            }


class PhaseTimer:
    """Cycles spent in each value of the ``phase`` output (0 load, 1..L layers, L+1 drain)."""

    def __init__(self, dut, period_ns: float):
        self.phase = dut.phase
        self.period = period_ns
        self.durations: dict[int, float] = {}

    async def run(self) -> None:
        current = int(self.phase.value)
        since = get_sim_time("ns")
        while True:
            await ValueChange(self.phase)
            now = get_sim_time("ns")
            self.durations[current] = self.durations.get(current, 0.0) + (now - since) / self.period
            current, since = int(self.phase.value), now


@cocotb.test()
@cocotb.parametrize(handshake=HANDSHAKES)
async def stream_and_compare(dut, handshake: str):
    """Stream every inference in, compare every output with the reference, count cycles."""
    vectors = np.load(os.environ["RLX_FPGA_VECTORS"], allow_pickle=False)
    meta = json.loads(str(vectors["meta"]))
    period = float(meta.get("period_ns", 10))
    Clock(dut.clk, period, unit="ns").start()
    dut.rst.value = 1
    # one seeded generator per stream: a failing stall pattern repeats exactly
    rng = (lambda k: random.Random(1000 + k)) if handshake == "stalls" else (lambda k: None)
    drivers = [StreamDriver(dut, k, dut.clk, period, rng(k)) for k in range(len(meta["inputs"]))]
    monitors = [StreamMonitor(dut, k, dut.clk, rng(100 + k)) for k in range(len(meta["outputs"]))]
    model, checker = ReferenceModel(vectors), Checker()
    for _ in range(3):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for _ in range(2):
        await FallingEdge(dut.clk)
    timer = PhaseTimer(dut, period)
    cocotb.start_soon(timer.run())
    cycles = []
    outputs = [[] for _ in monitors]
    # a datapath that never finishes (a stuck handshake) fails with a message instead of hanging
    budget_ns = float(meta.get("cycle_budget", 10**9)) * period
    for inf in range(int(meta["inferences"])):
        started: dict[str, float] = {}
        mark = started.setdefault  # first input handshake of this inference: mark("t", time)

        receivers = [cocotb.start_soon(mon.receive()) for mon in monitors]
        senders = [
            cocotb.start_soon(drv.send(_pack(vectors[f"in{k}"][inf], meta["inputs"][k]["lanes"]), mark))
            for k, drv in enumerate(drivers)
        ]
        try:
            for s in senders:
                await with_timeout(s, budget_ns, "ns")
            done = [await with_timeout(r, budget_ns, "ns") for r in receivers]
        except SimTimeoutError:
            stuck = {
                "error": f"inference {inf} did not finish within {int(budget_ns / period):,} cycles "
                f"(stuck in phase {int(dut.phase.value)})"
            }
            with open(os.environ["RLX_FPGA_RESULTS"], "w") as f:
                json.dump(stuck, f)
            raise
        except UnresolvedOutput as e:
            with open(os.environ["RLX_FPGA_RESULTS"], "w") as f:
                json.dump({"error": f"inference {inf}: {e}"}, f)
            raise
        end = 0.0
        for k, (beats, t_end) in enumerate(done):
            end = max(end, t_end)
            got = _unpack(beats, meta["outputs"][k]["lanes"])
            outputs[k].append(got)
            checker.check(inf, k, got, model.expected(k, inf))
        # the first input handshake's edge through the last output handshake's edge, inclusive
        cycles.append((end - started["t"]) / period + 1)
    result = {
        "handshake": handshake,
        "inferences": int(meta["inferences"]),
        "cycles": cycles,
        "phase_cycles": {str(k): v / int(meta["inferences"]) for k, v in sorted(timer.durations.items())},
        "mismatches": checker.mismatches,
        "first_mismatch": checker.first,
    }
    # what the hardware computed, for users who run models on the simulated target
    np.savez(os.environ["RLX_FPGA_RESULTS"] + ".npz", **{f"out{k}": np.stack(o) for k, o in enumerate(outputs)})
    with open(os.environ["RLX_FPGA_RESULTS"], "w") as f:
        json.dump(result, f)
    assert checker.mismatches == 0, f"{checker.mismatches} mismatches, first {checker.first}"
