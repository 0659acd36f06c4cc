"""A models x inputs campaign across acquired labgrid places; see :func:`rlx_edge.hil.farm.run_farm_campaign`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError
from rlx_edge.hil._farm_queue import Job, WorkQueue
from rlx_edge.hil._labgrid import PlaceLink
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.transport import HilError, HilLinkError, Transport
from rlx_edge.ir.graph import Graph

# Attempts of a command after the first, as the single-board campaign (a farm's links are cables too).
LINK_RETRIES = 6


@dataclass
class ModelCase:
    name: str
    graph: Graph
    xs: list[np.ndarray]
    expected: list[np.ndarray]
    out_dtype: np.dtype
    out_shape: tuple[int, ...]


@dataclass
class Outcome:
    """What became of one input: ``ok``, ``mismatch``, ``status`` (the model returned an error) or ``lost``."""

    kind: str
    place: str = ""
    ticks: int | None = None
    detail: str = ""
    first_difference: dict | None = None


@dataclass
class PlaceRun:
    link: PlaceLink
    inputs: int = 0
    flashes: int = 0
    link_failures: int = 0
    ticks: list[int] = field(default_factory=list)
    dropped: str | None = None
    busy_s: float = 0.0


class _Firmware:
    """Each model's firmware per board, built once (workers of places with the same board share it)."""

    def __init__(self, workdir: Path | None):
        self.workdir = workdir
        self._lock = threading.Lock()
        self._keys: dict[tuple[int, str], threading.Lock] = {}
        self._built: dict[tuple[int, str], tuple[Path, dict]] = {}
        self._failed: dict[tuple[int, str], str] = {}

    def built(self, model: int, board: Board) -> bool:
        return (model, board.name) in self._built

    def get(self, model: int, case: ModelCase, board: Board) -> tuple[Path, dict]:
        from rlx_edge.targets.cortexm import build_model_firmware

        key = (model, board.name)
        with self._lock:
            lock = self._keys.setdefault(key, threading.Lock())
        with lock:
            if key in self._failed:
                raise _BuildFailed(self._failed[key])
            if key not in self._built:
                try:
                    # The table's board: a place's port must not change the firmware's cache key.
                    self._built[key] = build_model_firmware(case.graph, get_board(board.name), self.workdir)
                except RlxError as e:
                    # A compiler's first lines say only that it failed; its first error says why.
                    lines = str(e).splitlines()
                    why = next((ln.strip() for ln in lines if "error:" in ln), "")
                    self._failed[key] = f"building {case.name} for {board.name}: {lines[0] if lines else e} {why}"
                    raise _BuildFailed(self._failed[key]) from None
            return self._built[key]


class _BuildFailed(Exception):
    pass


class _Abort(Exception):
    """Wraps what ``on_result`` raised, so the place-failure handlers let it through."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _connect(url: str, baudrate: int, timeout: float, deadline_s: float) -> Transport:
    """The place's UART; a just-restarted QEMU listens a moment after it starts, so retry until ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return Transport(url, baudrate=baudrate, open_timeout=timeout)
        except HilLinkError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class FarmRun:
    """The shared state of one campaign: the cases, the queue, the outcomes; one worker per place."""

    def __init__(
        self,
        cases: list[ModelCase],
        places: list[PlaceLink],
        *,
        chunk: int,
        timeout: float,
        run_timeout: float,
        connect_timeout: float,
        workdir: Path | None,
        stream: TextIO | None,
        on_result: Callable[[str, str, int], None] | None,
    ):
        self.cases = cases
        self.places = [PlaceRun(p) for p in places]
        self.outcomes: dict[tuple[int, int], Outcome] = {}
        self.queue = WorkQueue(
            [
                Job(m, tuple(range(i, min(i + chunk, len(c.xs)))))
                for m, c in enumerate(cases)
                for i in range(0, len(c.xs), chunk)
            ]
        )
        self.timeout, self.run_timeout, self.connect_timeout = timeout, run_timeout, connect_timeout
        self.firmware = _Firmware(workdir)
        self.stream = stream
        self.on_result = on_result
        self._lock = threading.Lock()
        self.build_errors: dict[int, str] = {}
        self.abort: BaseException | None = None
        """What stopped a worker other than its place failing (a bug, an interrupt): raised by :meth:`run`."""
        self.requested = sum(len(c.xs) for c in cases)

    def run(self) -> None:
        # Daemon threads: an interrupted campaign must not wait for a worker stuck on a silent board.
        threads = [
            threading.Thread(target=self._worker, args=(p,), name=f"farm-{p.link.name}", daemon=True)
            for p in self.places
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:
            self.queue.cancel()
            raise
        if self.abort is not None:
            raise self.abort
        for job in self.queue.drain():
            why = [f"{p.link.name}: {p.dropped}" for p in self.places if p.dropped]
            if job.model in self.build_errors:
                why.append(self.build_errors[job.model])
            for k in job.indices:
                self._record(job.model, k, Outcome("lost", detail=f"no place could run it ({'; '.join(why)})"))

    def _say(self, line: str) -> None:
        if self.stream is not None:
            with self._lock:
                self.stream.write(line + "\n")
                self.stream.flush()

    def _record(self, model: int, k: int, outcome: Outcome) -> None:
        with self._lock:
            # A result is final: an input finished before its place died is never run again.
            self.outcomes.setdefault((model, k), outcome)

    def _worker(self, pr: PlaceRun) -> None:
        link = pr.link
        client: HilClient | None = None
        current: int | None = None
        cannot: set[int] = set()
        try:
            while (job := self.queue.take(current, lambda m: self.firmware.built(m, link.board), cannot)) is not None:
                case = self.cases[job.model]
                done: list[int] = []
                t0 = time.monotonic()
                try:
                    if current != job.model:
                        if client is not None:
                            client.close()
                            client, current = None, None
                        elf, build = self.firmware.get(job.model, case, link.board)
                        link.flash(elf)
                        pr.flashes += 1
                        transport = _connect(link.url, link.board.console.baudrate, self.timeout, self.connect_timeout)
                        client = HilClient(transport, timeout=self.timeout, run_timeout=self.run_timeout,
                                           retries=LINK_RETRIES)  # fmt: skip
                        info = client.hello()
                        if info.model_hash != build["model_hash"]:
                            raise HilError(
                                f"{link.name} runs model {info.model_name or '?'}, not {case.name}: flashing failed"
                            )
                        current = job.model
                    for k in job.indices:
                        if self.abort is not None:
                            break
                        self._infer(pr, client, job.model, k)
                        done.append(k)
                except _BuildFailed as e:
                    # Another board may build it: the chunk goes back, this place skips the model from now on.
                    cannot.add(job.model)
                    self.build_errors.setdefault(job.model, str(e).splitlines()[0])
                    self.queue.finish(job, job.indices)
                    self._say(f"farm: {e.args[0].splitlines()[0]}; {link.name} leaves {case.name} to other boards")
                    continue
                except (HilError, RlxError, OSError) as e:
                    pr.link_failures += 1
                    pr.dropped = str(e).splitlines()[0]
                    left = tuple(k for k in job.indices if k not in done)
                    self.queue.finish(job, left)
                    self._say(f"farm: place {link.name} dropped ({pr.dropped}); {len(left)} inputs go to the others")
                    return
                except BaseException as e:
                    with self._lock:
                        self.abort = self.abort or (e.error if isinstance(e, _Abort) else e)
                    self.queue.cancel()
                    return
                finally:
                    pr.busy_s += time.monotonic() - t0
                self.queue.finish(job)
                self._say(
                    f"farm: {link.name} ran {case.name} inputs {job.indices[0]}..{job.indices[-1]}"
                    f"  ({len(self.outcomes)}/{self.requested})"
                )
        finally:
            if client is not None:
                client.close()

    def _infer(self, pr: PlaceRun, client: HilClient, model: int, k: int) -> None:
        case = self.cases[model]
        r = client.infer(case.xs[k])
        name = pr.link.name
        if r.status != 0:
            self._record(model, k, Outcome("status", name, detail=f"the model returned status {r.status}"))
        else:
            y = np.frombuffer(r.output, dtype=case.out_dtype).reshape(case.out_shape)
            expected = case.expected[k]
            if y.shape == expected.shape and np.array_equal(y, expected):
                self._record(model, k, Outcome("ok", name, r.ticks))
            else:
                g, e = y.reshape(-1), expected.reshape(-1)
                i = int(np.flatnonzero(g != e)[0]) if g.shape == e.shape else 0
                diff = {"input_index": k, "element_index": i, "got": int(g[i]), "expected": int(e[i]), "place": name}
                self._record(model, k, Outcome("mismatch", name, r.ticks, first_difference=diff))
            pr.ticks.append(r.ticks)
        pr.inputs += 1
        if self.on_result is not None:
            try:
                self.on_result(name, case.name, k)
            except BaseException as e:
                # The caller's failure, not the place's: it stops the campaign instead of dropping the place.
                raise _Abort(e) from e


def percentiles(ticks: list[int]) -> dict[str, int] | None:
    if not ticks:
        return None
    t = np.asarray(ticks, dtype=np.int64)
    # inverted_cdf: each percentile is a measured value, as in the single-board campaign.
    return {
        "p50": int(np.percentile(t, 50, method="inverted_cdf")),
        "p90": int(np.percentile(t, 90, method="inverted_cdf")),
        "max": int(t.max()),
    }


def report_json(run: FarmRun, wall_s: float) -> dict[str, Any]:
    models = []
    for m, case in enumerate(run.cases):
        outs = [run.outcomes.get((m, k), Outcome("lost", detail="never run")) for k in range(len(case.xs))]
        kinds = [o.kind for o in outs]
        firsts = [o.first_difference for o in outs if o.first_difference]
        models.append(
            {
                "model": case.name,
                "requested": len(outs),
                "count": kinds.count("ok") + kinds.count("mismatch"),
                "mismatches": kinds.count("mismatch"),
                "errors": kinds.count("status") + kinds.count("lost"),
                "lost": kinds.count("lost"),
                "error_messages": [f"input {k}: {o.detail}" for k, o in enumerate(outs) if o.detail][:10],
                "first_mismatch": firsts[0] if firsts else None,
                "by_place": {p: [o.place for o in outs].count(p) for p in sorted({o.place for o in outs if o.place})},
                "latency": {"ticks": percentiles([o.ticks for o in outs if o.ticks is not None])},
            }
        )
    places = [
        {
            "place": p.link.name,
            "board": p.link.board.name,
            "url": p.link.url,
            "inputs": p.inputs,
            "flashes": p.flashes,
            "failures": p.link_failures,
            "dropped": p.dropped,
            "busy_s": round(p.busy_s, 3),
            "latency": {"ticks": percentiles(p.ticks)},
        }
        for p in run.places
    ]
    total = {k: sum(m[k] for m in models) for k in ("requested", "count", "mismatches", "errors", "lost")}
    return {
        **total,
        "ok": total["count"] == total["requested"] and not total["mismatches"] and not total["errors"],
        "models": models,
        "places": places,
        "wall_s": round(wall_s, 3),
    }


def junit_xml(run: FarmRun, report: dict[str, Any]) -> str:
    """One test case per input (``model/input_K``), failed on a mismatch, an error status, or no answer."""
    from xml.etree import ElementTree as ET

    suite = ET.Element(
        "testsuite",
        name="rlx-edge hil farm",
        tests=str(report["requested"]),
        failures=str(report["mismatches"]),
        errors=str(report["errors"]),
        time=f"{report['wall_s']:.3f}",
    )
    for m, case in enumerate(run.cases):
        for k in range(len(case.xs)):
            o = run.outcomes.get((m, k), Outcome("lost", detail="never run"))
            tc = ET.SubElement(suite, "testcase", classname=f"hil.{case.name}", name=f"input_{k}")
            if o.place:
                props = ET.SubElement(tc, "properties")
                ET.SubElement(props, "property", name="place", value=o.place)
                if o.ticks is not None:
                    ET.SubElement(props, "property", name="ticks", value=str(o.ticks))
            if o.kind == "mismatch":
                d = o.first_difference or {}
                ET.SubElement(tc, "failure", message=f"element {d.get('element_index')}: board {d.get('got')}, "
                              f"reference {d.get('expected')}")  # fmt: skip
            elif o.kind in ("status", "lost"):
                ET.SubElement(tc, "error", message=o.detail)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
