"""HIL campaigns: a dataset through a board and through the reference, compared bit for bit.

:func:`run_campaign` builds the model's firmware for the board, boots it
under QEMU or flashes the real board, streams every input over the HIL
protocol, compares each output with the integer reference bit-exactly, and
returns a :class:`CampaignReport` (mismatches, accuracy when labels are
given, latency percentiles in ticks and seconds, link statistics).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from rlx_edge.boards import Board, get_board
from rlx_edge.data import load_arrays
from rlx_edge.errors import RlxError
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.faults import FaultProxy
from rlx_edge.hil.transport import HilError, Transport
from rlx_edge.ir.graph import Graph

DEFAULT_COUNT = 20
# A campaign stops after this many inputs in a row failed at the link level:
# the board is gone, and waiting out every remaining input's timeouts helps
# nobody.
MAX_CONSECUTIVE_ERRORS = 3
# Attempts of a command after the first: with four, a link that damages one
# message in five lost about 1 input in 30 (a large WRITE_INPUT failing every
# attempt); with six, 0 to 1 in 50 (hil --faults 0.2).
LINK_RETRIES = 6


@dataclass
class CampaignReport:
    model: str
    board: str
    port: str
    count: int = 0
    """Inputs the board answered (compared)."""
    requested: int = 0
    mismatches: int = 0
    first_mismatch: dict | None = None
    """``input_index``, ``element_index`` (flat), ``got``, ``expected`` of the first differing element."""
    errors: list[str] = field(default_factory=list)
    """Inputs that got no valid answer, and why (a model status, the link)."""
    labels: int = 0
    correct: int = 0
    ticks: list[int] = field(default_factory=list)
    tick_source: str = ""
    clock_hz: int | None = None
    emulated: bool = False
    board_info: dict = field(default_factory=dict)
    link: dict = field(default_factory=dict)
    faults: dict | None = None
    """With a fault rate: ``rate`` and the faults injected, by kind."""
    wall_s: float = 0.0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.labels if self.labels else None

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and not self.errors and self.count == self.requested

    def latency(self) -> dict[str, Any]:
        if not self.ticks:
            return {"ticks": None, "seconds": None, "tick_source": self.tick_source, "clock_hz": self.clock_hz}
        t = np.asarray(self.ticks, dtype=np.uint64)  # the wire's u64: a board's garbage must not raise here
        # inverted_cdf: each percentile is a measured value, not an interpolation.
        ticks = {
            "p50": int(np.percentile(t, 50, method="inverted_cdf")),
            "p90": int(np.percentile(t, 90, method="inverted_cdf")),
            "max": int(t.max()),
        }
        seconds = {k: v / self.clock_hz for k, v in ticks.items()} if self.clock_hz else None
        out = {"ticks": ticks, "seconds": seconds, "tick_source": self.tick_source, "clock_hz": self.clock_hz}
        if self.emulated:
            out["note"] = "QEMU: ticks follow the emulator's virtual clock, not a real core's cycles"
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "board": self.board,
            "port": self.port,
            "count": self.count,
            "requested": self.requested,
            "mismatches": self.mismatches,
            "first_mismatch": self.first_mismatch,
            "errors": len(self.errors),
            "error_messages": self.errors[:10],
            "accuracy": self.accuracy,
            "labels": self.labels,
            "latency": self.latency(),
            "board_info": self.board_info,
            "link": self.link,
            "wall_s": round(self.wall_s, 3),
            "ok": self.ok,
            **(self.link_test() if self.faults is not None else {}),
        }

    def link_test(self) -> dict[str, Any]:
        """What a run under injected faults shows about the link: every wrong
        result accepted is a hole in its checks; unanswered inputs were lost
        but reported."""
        assert self.faults is not None
        return {
            "faults": self.faults,
            "faults_injected": sum(self.faults["by_kind"].values()),
            "retries": self.link.get("retries", 0),
            "answered": self.count,
            "wrong_accepted": self.mismatches,
        }


def load_data(
    data: str | os.PathLike | np.ndarray | Sequence[np.ndarray] | None, labels: Any = None
) -> tuple[list[np.ndarray] | None, np.ndarray | None]:
    """Inputs (one array per sample) and labels from an array, a list, a ``.npy`` or a ``.npz`` file.

    A ``.npz`` holds the inputs under ``x`` (or ``inputs``, or its only
    array) and may hold labels under ``y`` (or ``labels``).
    """
    if data is None:
        return None, None if labels is None else np.asarray(labels)
    if isinstance(data, str | os.PathLike):
        loaded = load_arrays(data)
        if isinstance(loaded, dict):
            keys = list(loaded)
            xk = next((k for k in ("x", "inputs", "input") if k in keys), keys[0] if len(keys) == 1 else None)
            if xk is None:
                raise RlxError(f"{data}: no array named x or inputs among {keys}; name the inputs x")
            arr = loaded[xk]
            yk = next((k for k in ("y", "labels", "label") if k in keys), None)
            if labels is None and yk is not None:
                labels = loaded[yk]
        else:
            arr = loaded
        samples = list(arr)
    elif isinstance(data, np.ndarray):
        samples = list(data)
    else:
        samples = [np.asarray(x) for x in data]
    return samples, None if labels is None else np.asarray(labels).reshape(-1)


def _as_model_input(x: np.ndarray, graph: Graph, k: int) -> np.ndarray:
    """One sample in the model's input shape and dtype (float data is quantized with the input's parameters)."""
    t = graph.types[graph.inputs[0]]
    shape = tuple(int(d) for d in t.shape)
    dt = np.dtype(t.dtype.numpy)
    x = np.asarray(x)
    if x.size != int(np.prod(shape)):
        raise RlxError(
            f"sample {k} has {x.size} elements (shape {x.shape}); the model's input {shape} has {int(np.prod(shape))}"
        )
    if x.dtype.kind == "f" and dt.kind in "iu":
        if t.quant is None:
            raise RlxError(f"sample {k} is float but the model's {dt} input has no quantization parameters")
        scale, zp = float(t.quant.scale[0]), int(t.quant.zero_point[0])
        info = np.iinfo(dt)
        x = np.clip(np.round(x / scale) + zp, info.min, info.max)
    elif x.dtype != dt and not np.can_cast(x.dtype, dt, "same_kind"):
        raise RlxError(f"sample {k} has dtype {x.dtype}; the model takes {dt}")
    return np.ascontiguousarray(x.astype(dt).reshape(shape))


def campaign_inputs(
    graph: Graph, data: Any, labels: Any = None, count: int | None = None, seed: int = 0
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """A campaign's inputs in the model's input shape and dtype, and its labels (see :func:`run_campaign`)."""
    from rlx_edge.targets.reference.compare import make_inputs

    samples, label_arr = load_data(data, labels)
    if samples is None:
        n = DEFAULT_COUNT if count is None else int(count)
        gen = make_inputs(graph, max(n - 3, 0), seed=seed)
        # make_inputs appends the three edge inputs after the random ones.
        samples = [s[graph.inputs[0]] for s in (gen if n >= 3 else gen[:0] + gen[-3:][:n])]
    elif count is not None:
        samples = samples[: int(count)]
    return [_as_model_input(x, graph, k) for k, x in enumerate(samples)], label_arr


def _progress(stream: TextIO, board: str, k: int, n: int, bad: int, errors: int) -> None:
    width = 30
    done = int(width * k / n) if n else width
    extra = f"  mismatches {bad}" + (f"  errors {errors}" if errors else "")
    stream.write(f"\rhil {board} [{'#' * done}{'.' * (width - done)}] {k}/{n}{extra}")
    stream.flush()


def run_campaign(
    model_graph: Graph | str | os.PathLike,
    board: str | os.PathLike | Board,
    port: str | None = None,
    data: str | os.PathLike | np.ndarray | Sequence[np.ndarray] | None = None,
    labels: Any = None,
    count: int | None = None,
    progress: bool = True,
    *,
    seed: int = 0,
    workdir: str | os.PathLike | None = None,
    flash: bool = True,
    flash_tool: str | None = None,
    probe: str | None = None,
    timeout: float = 2.0,
    run_timeout: float = 120.0,
    reference: Callable[[np.ndarray], np.ndarray] | None = None,
    stream: TextIO | None = None,
    faults: float | None = None,
) -> CampaignReport:
    """Runs ``count`` inputs through the model on ``board`` and through the reference; see the module docstring.

    ``board``: a board name, a board definition file (``.toml``) or a
    :class:`~rlx_edge.boards.Board`. QEMU boards boot the firmware locally unless ``port``
    names a UART to use instead; real boards are flashed (``flash``) with the
    board's tool (or ``flash_tool``) and reached on ``port`` (or the
    definition's). ``data``: inputs (see :func:`load_data`); without it,
    ``count`` seeded inputs covering the input range (the last three are
    all-minimum, all-maximum and all-zero-point). ``labels``: class indices,
    compared with the argmax of each output. ``reference``: the expected
    output of one input (default: the integer reference interpreter); it is
    called in a thread of its own, one input after another, while the board
    runs.
    ``faults``: a rate in [0, 1) to test the link: a
    :class:`~rlx_edge.hil.faults.FaultProxy` between host and board (QEMU or
    a ``socket://`` port) corrupts, drops, delays or resets messages with
    that probability; the report's :meth:`~CampaignReport.link_test` tells
    what came of it.
    """
    from rlx_edge.frontends import load_model
    from rlx_edge.hil.flash import flash as flash_board
    from rlx_edge.hil.qemu import open_uart
    from rlx_edge.targets.cortexm import QemuBoard, build_model_firmware
    from rlx_edge.targets.reference import RunPlan

    t_start = time.monotonic()
    if count is not None and int(count) < 1:
        raise RlxError(f"count must be >= 1, not {count}")
    if faults is not None and not 0 <= faults < 1:
        raise RlxError(f"the fault rate is a probability per message: 0 <= rate < 1, not {faults}")
    graph = model_graph if isinstance(model_graph, Graph) else load_model(model_graph)
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise RlxError("HIL campaigns handle models with one input and one output")
    b = get_board(board).with_port(port)
    in_name, out_name = graph.inputs[0], graph.outputs[0]
    out_t = graph.types[out_name]
    out_shape = tuple(int(d) for d in out_t.shape)
    out_dtype = np.dtype(out_t.dtype.numpy)

    xs, label_arr = campaign_inputs(graph, data, labels, count, seed)
    if label_arr is not None:
        if len(label_arr) < len(xs):
            raise RlxError(f"{len(label_arr)} labels for {len(xs)} inputs")
        label_arr = label_arr[: len(xs)]
    if reference is None:
        plan: list[RunPlan] = []

        def reference(x: np.ndarray) -> np.ndarray:
            # One plan for the campaign (the integer parameters prepared and bound once), made on the
            # first call: in the reference's thread, while the board boots.
            if not plan:
                plan.append(RunPlan(graph))
            return plan[0]({in_name: x})[out_name]

    url = b.console.port
    if url is None and not b.is_qemu:
        raise RlxError(f"board {b.name} needs a serial port: pass --port (e.g. /dev/ttyACM0)")
    if faults is not None and url is not None and not url.startswith("socket://"):
        raise RlxError(f"injecting faults needs QEMU or a socket:// port (a TCP proxy sits in between), not {url}")
    elf, build = build_model_firmware(graph, b, workdir)
    report = CampaignReport(graph.name, b.name, url or "", requested=len(xs), clock_hz=b.clock_hz)
    qemu = None
    if b.is_qemu and url is None:
        qemu = QemuBoard(elf, b, timeout=max(timeout * 10, 30.0))
        report.emulated = True
    elif not b.is_qemu and flash:
        flash_board(elf, b, tool=flash_tool, probe=probe)
    out = stream if stream is not None else sys.stderr
    client = proxy = None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlx-hil-reference")
    try:
        if qemu is not None:
            qemu.start()
        if faults is not None:
            upstream = qemu.url if qemu is not None else url
            proxy = FaultProxy(upstream, rate=faults, seed=seed, connect_timeout=max(timeout * 10, 30.0)).start()
            transport = Transport(proxy.url, baudrate=b.console.baudrate)
        elif qemu is not None:
            transport = open_uart(qemu)
        else:
            transport = Transport(url, baudrate=b.console.baudrate)
        if qemu is not None:
            report.port = qemu.url
        client = HilClient(transport, timeout=timeout, run_timeout=run_timeout, retries=LINK_RETRIES)
        info = client.hello()
        report.board_info = info.to_json()
        report.tick_source = info.tick_source
        if info.core_hz and not report.clock_hz:
            report.clock_hz = info.core_hz
        if info.model_hash != build["model_hash"]:
            raise HilError(
                f"{report.port}: the board runs model {info.model_name or '?'} (hash {info.model_hash or 'none'}), "
                f"not {graph.name} (hash {build['model_hash']}): flashing failed or another firmware is running"
            )
        consecutive = 0
        # The reference runs in a thread while the board computes and the link moves bytes: the host's
        # share of a campaign (a quarter of an emulated VWW inference, half of AD's) is hidden.
        references = pool.map(lambda x: np.asarray(reference(x)), xs)
        for k, x in enumerate(xs):
            try:
                r = client.infer(x)
            except HilError as e:
                next(references)
                report.errors.append(f"input {k}: {e}")
                consecutive += 1
                if consecutive >= MAX_CONSECUTIVE_ERRORS:
                    report.errors.append(f"stopped after {consecutive} failed inputs in a row")
                    break
                continue
            consecutive = 0
            expected = next(references)
            if r.status != 0:
                report.errors.append(f"input {k}: the model returned status {r.status}")
                continue
            report.count += 1
            report.ticks.append(r.ticks)
            y = np.frombuffer(r.output, dtype=out_dtype).reshape(out_shape)
            if y.shape != expected.shape or not np.array_equal(y, expected):
                report.mismatches += 1
                if report.first_mismatch is None:
                    report.first_mismatch = _first_difference(k, y, expected)
            if label_arr is not None:
                report.labels += 1
                report.correct += int(np.argmax(y.reshape(-1)) == int(label_arr[k]))
            if progress:
                _progress(out, b.name, k + 1, len(xs), report.mismatches, len(report.errors))
        if progress:
            out.write("\n")
            out.flush()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if client is not None:
            report.link = client.stats.to_json()
            client.close()
        if proxy is not None:
            proxy.close()
            report.faults = {"rate": faults, "by_kind": dict(proxy.counts)}
        if qemu is not None:
            qemu.close()
    report.wall_s = time.monotonic() - t_start
    return report


def _first_difference(k: int, got: np.ndarray, expected: np.ndarray) -> dict:
    g, e = got.reshape(-1), expected.reshape(-1)
    if g.shape != e.shape:
        return {"input_index": k, "element_index": None, "got": None, "expected": None}
    i = int(np.flatnonzero(g != e)[0])
    return {"input_index": k, "element_index": i, "got": g[i].item(), "expected": e[i].item()}
