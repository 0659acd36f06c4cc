"""HIL at farm scale: campaigns sharded across labgrid places, and QEMU boards served as places.

labgrid (``pip install 'rlx-edge[farm]'``) runs board farms: a coordinator
knows the *places*, exporters on each host publish the resources a place is
made of (serial ports, debug probes), and a client *acquires* a place, uses
it and *releases* it. Here:

- :func:`run_farm_campaign` (``rlx-edge hil MODEL... --places P1,P2 |
  --farm``) acquires the places, builds each model's firmware for each
  place's board, and runs the models x inputs matrix as a work queue with
  one worker thread per place: flash (a QEMU place restarts its QEMU with
  the ELF, a real board goes through its debug probe), talk over the place's
  exported serial port with the framed HIL protocol, compare every output
  bit-exactly with the integer reference. A place that fails is dropped and
  the inputs it had not finished go to the others. Every place is released
  at the end, also on failure or interruption.
- :class:`QemuFarm` serves N QEMU boards as places on this host: it starts a
  coordinator and an exporter on the loopback interface, plus the place
  server (:mod:`rlx_edge.hil._qemu_places`) that restarts a place's QEMU
  when the place is flashed, and stops them all on exit.

Without labgrid, nothing here is importable beyond :func:`require_labgrid`,
which says how to install it; the single-board ``rlx-edge hil`` never needs it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from rlx_edge._io import atomic_write_text
from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError
from rlx_edge.hil.transport import HilError
from rlx_edge.ir.graph import Graph

INSTALL_HINT = "pip install 'rlx-edge[farm]'"
DEFAULT_CHUNK = 5
"""Inputs per work item: small enough that a dropped place leaves little to redo, large enough to amortize a take."""


class FarmUnavailable(RlxError):
    """labgrid is not installed."""


def require_labgrid() -> None:
    """Raises :class:`FarmUnavailable` with the install command when labgrid cannot be imported."""
    try:
        found = importlib.util.find_spec("labgrid") is not None
    except ValueError:  # sys.modules["labgrid"] is None: imports of it are blocked
        found = False
    if not found or sys.modules.get("labgrid", True) is None:
        raise FarmUnavailable(f"board farms need labgrid: {INSTALL_HINT}")


# -- a local farm of QEMU places ---------------------------------------------------


class _Daemon:
    """A helper process whose output goes to a log file; :meth:`wait_for` reads a line it prints."""

    def __init__(self, argv: list[str], log: Path, cwd: Path, stdin: bool = False):
        self.log = log
        self._file = open(log, "wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=self._file,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def send_line(self, line: str) -> None:
        """Writes a line to the process' standard input (a daemon started with ``stdin=True``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.close()

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_text(errors="replace")
            m = re.search(pattern, text)
            if m:
                return m
            if self.proc.poll() is not None or time.monotonic() > deadline:
                what = "exited" if self.proc.poll() is not None else f"did not start within {timeout:g} s"
                raise HilError(f"{self.log.stem} {what}:\n{text[-1500:]}")
            time.sleep(0.05)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._file.close()


# labgrid-exporter, started before its arguments (the coordinator's address) are known: its
# imports take as long as the coordinator's start.
_EXPORTER_LAUNCHER = (
    "import json, sys\n"
    "from labgrid.remote import exporter\n"
    "line = sys.stdin.readline()\n"
    "if line:\n"
    "    sys.argv = ['labgrid-exporter', *json.loads(line)]\n"
    "    exporter.main()\n"
)


@dataclass(frozen=True)
class QemuPlace:
    name: str
    board: Board
    uart_port: int


class QemuFarm:
    """N QEMU boards as labgrid places on this host: a coordinator, an exporter and the QEMU place server.

    ``boards``: one board name or alias per place (``qemu-m4``); the places
    are named ``{prefix}-{alias}-{i}``. Use as a context manager; every
    process is stopped on exit, also when starting failed half-way.
    :attr:`coordinator` is the address to give :func:`run_farm_campaign` (or
    ``LG_COORDINATOR`` / ``rlx-edge hil --coordinator``).

    The exporter configuration (:attr:`exporter_config`) gives each place a
    group of two resources: ``NetworkSerialPort`` (``protocol: raw``: the
    QEMU UART's loopback TCP port) and ``RlxQemuPlace`` (host, port and
    slot of the place server, and the board), which is how a client flashes
    the place. Both are plain resources to the exporter: it publishes them
    as written.
    """

    def __init__(self, boards: Sequence[str], *, prefix: str = "rlx", startup_timeout: float = 60.0):
        require_labgrid()
        self.places: list[QemuPlace] = []
        seen: dict[str, int] = {}
        for spec in boards:
            b = get_board(spec)
            if not b.is_qemu:
                raise RlxError(f"{spec} is a real board; a QEMU farm serves qemu-mps2-* boards")
            alias = b.aliases[0] if b.aliases else b.name
            i = seen[alias] = seen.get(alias, -1) + 1
            self.places.append(QemuPlace(f"{prefix}-{alias}-{i}", b, 0))
        self.startup_timeout = startup_timeout
        self.exporter_name = f"{prefix}-exporter-{os.getpid()}"
        self.coordinator = ""
        self.exporter_config: Path | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._daemons: dict[str, _Daemon] = {}
        self._server_port = 0

    def __enter__(self) -> QemuFarm:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> QemuFarm:
        from rlx_edge.hil import _labgrid

        self._tmp = tempfile.TemporaryDirectory(prefix="rlx-farm-")
        root = Path(self._tmp.name)
        try:
            # Port 0: the coordinator binds a free port and prints it; no race for it.
            coord = self._daemon(
                "coordinator", [sys.executable, "-m", "labgrid.remote.coordinator", "-l", "127.0.0.1:0"], root
            )
            self.places = [QemuPlace(p.name, p.board, _free_tcp_port()) for p in self.places]
            cfg = root / "qemu-places.json"
            cfg.write_text(
                json.dumps({"places": {p.name: {"board": p.board.name, "uart_port": p.uart_port} for p in self.places}})
            )
            # Started before the coordinator is up: the two need nothing of each other, and each takes
            # about a second of Python imports. So does the exporter, which needs the coordinator's
            # address: it imports labgrid meanwhile and reads its arguments once the address is known.
            server = self._daemon("qemu-places", [sys.executable, "-m", "rlx_edge.hil._qemu_places", str(cfg)], root)
            exporter = self._daemon("exporter", [sys.executable, "-c", _EXPORTER_LAUNCHER], root, stdin=True)
            port = coord.wait_for(r"listening on \S+:(\d+)", self.startup_timeout)[1]
            self.coordinator = f"127.0.0.1:{port}"
            self._server_port = int(server.wait_for(r"listening (\d+)", self.startup_timeout)[1])
            self.exporter_config = root / "exporter.yaml"
            self.exporter_config.write_text(self.exporter_yaml())
            session = _labgrid.Session(self.coordinator)
            try:
                for p in self.places:
                    session.add_place(p.name, [f"{self.exporter_name}/{p.name}/*"], {"board": p.board.name})
                args = ["-c", self.coordinator, "-n", self.exporter_name, "--hostname", "127.0.0.1"]
                exporter.send_line(json.dumps([*args, str(self.exporter_config)]))
                for p in self.places:
                    session.wait_for_resources(p.name, {"NetworkSerialPort", _labgrid.QEMU_RESOURCE}, 30.0)
            finally:
                session.close()
        except BaseException:
            self.close()
            raise
        return self

    def _daemon(self, name: str, argv: list[str], root: Path, stdin: bool = False) -> _Daemon:
        d = self._daemons[name] = _Daemon(argv, root / f"{name}.log", root, stdin)
        return d

    def exporter_yaml(self) -> str:
        """The exporter configuration: one resource group per place (YAML, which JSON is a subset of)."""
        from rlx_edge.hil._labgrid import QEMU_RESOURCE

        groups = {
            p.name: {
                "NetworkSerialPort": {"host": "127.0.0.1", "port": p.uart_port, "speed": 115200, "protocol": "raw"},
                QEMU_RESOURCE: {"host": "127.0.0.1", "port": self._server_port, "slot": p.name, "board": p.board.name},
            }
            for p in self.places
        }
        return json.dumps(groups, indent=2) + "\n"

    def kill(self, place: str) -> None:
        """Kills the QEMU of ``place``, as if its board died (tests the campaign's failover)."""
        from rlx_edge.hil._qemu_places import request

        answer = request("127.0.0.1", self._server_port, {"op": "kill", "place": place})
        if not answer.get("ok"):
            raise HilError(f"killing {place}: {answer.get('error')}")

    def status(self) -> dict[str, Any]:
        """Each place's QEMU pid (None when not running), flash count and log tail."""
        from rlx_edge.hil._qemu_places import request

        return request("127.0.0.1", self._server_port, {"op": "status"})["places"]

    def close(self) -> None:
        """Stops the exporter, the place server (and with it every QEMU) and the coordinator."""
        # The exporter and the place server stop at the same time (both told first), the coordinator
        # after them: an exporter unregisters its places on the way out.
        for group in (("exporter", "qemu-places"), ("coordinator",)):
            daemons = [d for d in (self._daemons.pop(n, None) for n in group) if d is not None]
            for d in daemons:
                d.terminate()
            for d in daemons:
                d.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _free_tcp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- campaigns across places -------------------------------------------------------


@dataclass
class FarmReport:
    """The merged result of a farm campaign: :meth:`to_json` and :meth:`junit_xml`."""

    data: dict[str, Any]
    junit: str = field(repr=False, default="")

    @property
    def ok(self) -> bool:
        return bool(self.data["ok"])

    def to_json(self) -> dict[str, Any]:
        return self.data

    def junit_xml(self) -> str:
        return self.junit

    def write_junit(self, path: str | os.PathLike) -> Path:
        return atomic_write_text(path, self.junit)


def _case(model: Graph | str | os.PathLike, data: Any, count: int | None, seed: int):
    from rlx_edge.frontends import load_model
    from rlx_edge.hil._farm_campaign import ModelCase
    from rlx_edge.hil.campaign import campaign_inputs
    from rlx_edge.targets.reference import run as reference_run

    graph = model if isinstance(model, Graph) else load_model(model)
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise RlxError(f"{graph.name}: HIL campaigns handle models with one input and one output")
    xs, _ = campaign_inputs(graph, data, None, count, seed)
    i, o = graph.inputs[0], graph.outputs[0]
    expected = [np.asarray(reference_run(graph, {i: x})[o]) for x in xs]
    t = graph.types[o]
    return ModelCase(graph.name, graph, xs, expected, np.dtype(t.dtype.numpy), tuple(int(d) for d in t.shape))


def run_farm_campaign(
    models: Sequence[Graph | str | os.PathLike],
    places: Sequence[str] | None = None,
    *,
    coordinator: str | None = None,
    env: str | os.PathLike | None = None,
    data: Any = None,
    count: int | None = None,
    seed: int = 0,
    chunk: int = DEFAULT_CHUNK,
    workdir: str | os.PathLike | None = None,
    timeout: float = 2.0,
    run_timeout: float = 120.0,
    connect_timeout: float = 30.0,
    flash_tool: str | None = None,
    stream: TextIO | None = None,
    on_result: Callable[[str, str, int], None] | None = None,
) -> FarmReport:
    """Every model's inputs across labgrid places, each output compared bit-exactly with the reference.

    ``places``: place names on the coordinator; None takes the RemotePlaces
    of the labgrid environment ``env``, or without one every idle place on
    the coordinator (``--farm``). ``coordinator``: ``HOST[:PORT]`` (default:
    ``env``'s ``coordinator_address``, ``LG_COORDINATOR``, 127.0.0.1:20408).
    ``data``/``count``/``seed`` give each model's inputs as for
    :func:`~rlx_edge.hil.campaign.run_campaign` (``data`` must then fit every
    model). ``chunk``: inputs per work item. ``stream``: progress lines.
    ``on_result(place, model, k)`` is called from the workers after each input.
    Places are released at the end, also when the campaign fails or is interrupted.
    """
    require_labgrid()
    from rlx_edge.hil import _labgrid
    from rlx_edge.hil._farm_campaign import FarmRun, junit_xml, report_json

    if chunk < 1:
        raise RlxError(f"chunk must be >= 1, not {chunk}")
    if not models:
        raise RlxError("a farm campaign needs at least one model")
    t0 = time.monotonic()
    cases = [_case(m, data, count, seed) for m in models]
    if env is not None:
        env_names, env_coordinator = _labgrid.env_places(env)
        places = list(places) if places else env_names
        coordinator = coordinator or env_coordinator
    session = _labgrid.Session(coordinator)
    acquired: list[str] = []
    try:
        if places:
            names = list(dict.fromkeys(places))
        else:
            names = sorted(n for n, p in session.places().items() if not p.acquired)
            if not names:
                raise _labgrid.FarmError(f"no idle place on the coordinator at {session.address}")
        for name in names:
            session.acquire(name)
            acquired.append(name)
        links = [_labgrid.resolve(session, name, flash_tool) for name in names]
        run = FarmRun(
            cases,
            links,
            chunk=chunk,
            timeout=timeout,
            run_timeout=run_timeout,
            connect_timeout=connect_timeout,
            workdir=Path(workdir) if workdir is not None else None,
            stream=stream,
            on_result=on_result,
        )
        if stream is not None:
            stream.write(f"farm: {run.requested} inputs of {len(cases)} models on {len(links)} places\n")
        run.run()
        data_json = report_json(run, time.monotonic() - t0)
        return FarmReport(data_json, junit_xml(run, data_json))
    finally:
        for name in acquired:
            with contextlib.suppress(HilError):
                session.release(name)
        session.close()
