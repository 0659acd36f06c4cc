"""labgrid glue: a coordinator session usable from threads, places, and what a place's resources mean to rlx-edge.

Imported only once labgrid is known to be importable (:func:`rlx_edge.hil.farm.require_labgrid`).

labgrid's :class:`~labgrid.remote.client.ClientSession` is asyncio code tied to
one event loop; :class:`Session` runs that loop in a thread of its own, so the
campaign's worker threads (and the main thread) call it synchronously.

A place names its board with the tag ``board`` (a board name or alias of
:mod:`rlx_edge.boards`); a QEMU place of :class:`~rlx_edge.hil.farm.QemuFarm`
also carries it on its ``RlxQemuPlace`` resource. The UART is the place's
``NetworkSerialPort``. Flashing: an ``RlxQemuPlace`` restarts QEMU through the
exporter-side place server (:mod:`rlx_edge.hil._qemu_places`); a real board's
``NetworkUSBDebugger`` (or ``USBDebugger``) is driven through labgrid's
``OpenOCDDriver``, or :class:`RlxPyOCDDriver`, per the board table's flasher.
The real-board path is untested on hardware.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attr
import grpc
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.remote.client import ClientSession
from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2
from labgrid.remote.generated import labgrid_coordinator_pb2_grpc
from labgrid.util.helper import processwrapper
from labgrid.util.managedfile import ManagedFile

from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError
from rlx_edge.hil import _qemu_places
from rlx_edge.hil.transport import HilError

QEMU_RESOURCE = "RlxQemuPlace"
# labgrid's ClientSession channel options (keepalive pings within the coordinator's limits).
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 7500),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.ping_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
]
DEFAULT_COORDINATOR = "127.0.0.1:20408"


class FarmError(HilError):
    """The farm (coordinator, exporter, a place) failed or was misconfigured."""


def coordinator_address(address: str | None) -> str:
    """``HOST[:PORT]`` as labgrid takes it: ``LG_COORDINATOR`` or its default when not given."""
    address = address or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR
    return address if address.rpartition(":")[2].isdigit() else f"{address}:20408"


class Session:
    """A labgrid client session on a private event-loop thread; every method is synchronous and thread-safe."""

    def __init__(self, address: str | None = None, timeout: float = 15.0):
        self.address = coordinator_address(address)
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="labgrid-session", daemon=True)
        self._thread.start()
        self._session: ClientSession | None = None
        # The RemotePlaceManager (real boards) is a process-wide singleton that takes this session.
        self.lock = threading.RLock()

        async def start() -> ClientSession:
            session = ClientSession(self.address, self._loop)
            # gRPC shares one TCP connection among a process's channels to the same address, and the
            # coordinator tells clients apart by that connection (it asserts one stream per peer): a
            # second session in this process (two campaigns, a check while one runs) needs its own.
            options = [*_CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
            session.channel = grpc.aio.insecure_channel(target=self.address, options=options)
            session.stub = labgrid_coordinator_pb2_grpc.CoordinatorStub(session.channel)
            await session.start()
            return session

        try:
            self._session = self._run(start())
        except Exception as e:
            self.close()
            raise FarmError(f"cannot reach the labgrid coordinator at {self.address}: {e}") from None

    def _run(self, coro: Coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout)

    def _grpc(self, call: Callable[[Any], Any], request: Any, what: str) -> None:
        async def go() -> None:
            await call(request)
            await self._session.sync_with_coordinator()

        try:
            self._run(go())
        except grpc.aio.AioRpcError as e:
            raise FarmError(f"{what}: {e.details()}") from None

    @property
    def session(self) -> ClientSession:
        assert self._session is not None
        return self._session

    @property
    def identity(self) -> str:
        return f"{self.session.gethostname()}/{self.session.getuser()}"

    def sync(self) -> None:
        self._run(self.session.sync_with_coordinator())

    def places(self) -> dict[str, Any]:
        self.sync()
        return dict(self.session.places)

    def add_place(self, name: str, matches: list[str], tags: dict[str, str]) -> None:
        stub = self.session.stub
        if name not in self.places():
            self._grpc(stub.AddPlace, pb2.AddPlaceRequest(name=name), f"creating place {name}")
        for pattern in matches:
            req = pb2.AddPlaceMatchRequest(placename=name, pattern=pattern)
            self._grpc(stub.AddPlaceMatch, req, f"place {name}")
        if tags:
            self._grpc(stub.SetPlaceTags, pb2.SetPlaceTagsRequest(placename=name, tags=tags), f"place {name}")

    def wait_for_resources(self, place: str, classes: set[str], timeout: float) -> None:
        """Waits until the exporter's resources matching ``place`` have arrived (an exporter starts after the place)."""
        deadline = time.monotonic() + timeout
        while True:
            p = self.places().get(place)
            found = set()
            if p is not None:
                for exporter, groups in self.session.resources.items():
                    for group, resources in groups.items():
                        for rname, entry in resources.items():
                            if entry.avail and p.getmatch((exporter, group, entry.cls, rname)):
                                found.add(entry.cls)
            if classes <= found:
                return
            if time.monotonic() > deadline:
                raise FarmError(f"place {place}: resources {sorted(classes - found)} did not appear in {timeout:g} s")
            time.sleep(0.1)

    def acquire(self, place: str) -> None:
        p = self.places().get(place)
        if p is None:
            raise FarmError(f"no place {place!r} on the coordinator at {self.address} (`labgrid-client places`)")
        if p.acquired:
            raise FarmError(f"place {place} is acquired by {p.acquired}; wait, or `labgrid-client -p {place} release`")
        self._grpc(self.session.stub.AcquirePlace, pb2.AcquirePlaceRequest(placename=place), f"acquiring {place}")

    def release(self, place: str) -> None:
        self._grpc(self.session.stub.ReleasePlace, pb2.ReleasePlaceRequest(placename=place), f"releasing {place}")

    def acquired_by(self, place: str) -> str | None:
        p = self.places().get(place)
        return p.acquired if p is not None else None

    def resources(self, place: str) -> dict[tuple[str, str], Any]:
        """``(name, cls)`` -> labgrid ResourceEntry of an acquired place."""
        with self.lock:
            return self.session.get_target_resources(self.session.get_place(place))

    def tags(self, place: str) -> dict[str, str]:
        return dict(self.places()[place].tags)

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            try:
                self._run(session.stop())
                self._run(session.close())
            except Exception:  # the coordinator may be gone already: nothing left to tell it
                pass
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()


def env_places(path: str | os.PathLike) -> tuple[list[str], str | None]:
    """The RemotePlace names of a labgrid environment YAML, and its ``coordinator_address`` option."""
    from labgrid.config import Config
    from labgrid.exceptions import NoConfigFoundError

    try:
        config = Config(str(path))
    except (NoConfigFoundError, OSError, ValueError) as e:
        raise RlxError(f"{path}: cannot read the labgrid environment: {e}") from None
    names: list[str] = []
    for role in config.get_targets().values():
        resources, _ = target_factory.normalize_config(role or {})
        names += list(resources.get("RemotePlace", {}))
    if not names:
        raise RlxError(f"{path}: no RemotePlace resource in any target; name the places there")
    return names, config.get_option("coordinator_address", None)


@dataclass
class PlaceLink:
    """What a campaign needs of an acquired place: its board, its UART's URL and a way to flash it."""

    name: str
    board: Board
    url: str
    flash: Callable[[Path], None]
    power_off: Callable[[], None] | None = None
    """Stops the board until it is flashed again (a QEMU place: its QEMU exits); None where the place cannot."""


def resolve(session: Session, place: str, flash_tool: str | None = None) -> PlaceLink:
    """The board, UART and flasher of an acquired place, read off its resources and tags."""
    resources = session.resources(place)
    by_cls = {cls: entry for (_, cls), entry in resources.items()}
    qemu = by_cls.get(QEMU_RESOURCE)
    board_name = session.tags(place).get("board") or (qemu.args.get("board") if qemu else None)
    if not board_name:
        raise FarmError(f"place {place} names no board: `labgrid-client -p {place} set-tags board=<name>`")
    board = get_board(board_name)
    serial = by_cls.get("NetworkSerialPort")
    if serial is None:
        raise FarmError(f"place {place} has no NetworkSerialPort resource (the board's UART)")
    args = serial.args
    scheme = "socket" if args.get("protocol") == "raw" else "rfc2217"
    url = f"{scheme}://{args['host']}:{args['port']}"
    if qemu is not None:
        return PlaceLink(
            place, board.with_port(url), url, _qemu_flasher(place, qemu.args), _qemu_killer(place, qemu.args)
        )
    if board.is_qemu:
        raise FarmError(f"place {place}: board {board.name} is a QEMU machine but the place has no {QEMU_RESOURCE}")
    return PlaceLink(place, board.with_port(url), url, _ProbeFlasher(session, place, board, flash_tool))


def _qemu_flasher(place: str, args: dict[str, Any]) -> Callable[[Path], None]:
    host, port, slot = args["host"], int(args["port"]), args.get("slot", place)

    def flash(elf: Path) -> None:
        data = Path(elf).read_bytes()
        try:
            answer = _qemu_places.request(host, port, {"op": "flash", "place": slot, "size": len(data)}, data)
        except OSError as e:
            raise FarmError(f"place {place}: QEMU place server {host}:{port} unreachable: {e}") from None
        if not answer.get("ok"):
            raise FarmError(f"place {place}: restarting QEMU failed: {answer.get('error')}")

    return flash


def _qemu_killer(place: str, args: dict[str, Any]) -> Callable[[], None]:
    host, port, slot = args["host"], int(args["port"]), args.get("slot", place)

    def power_off() -> None:
        # An idle model runner polls its UART: its QEMU would keep a host core busy until the next flash.
        try:
            answer = _qemu_places.request(host, port, {"op": "kill", "place": slot})
        except OSError as e:
            raise FarmError(f"place {place}: QEMU place server {host}:{port} unreachable: {e}") from None
        if not answer.get("ok"):
            raise FarmError(f"place {place}: stopping QEMU failed: {answer.get('error')}")

    return power_off


class _ProbeFlasher:
    """Flashes a real board through labgrid drivers on its place's debug probe (untested on hardware).

    OpenOCD runs where the probe is (labgrid's OpenOCDDriver prefixes it with
    ssh to the exporter and copies the ELF there); pyOCD the same way through
    :class:`RlxPyOCDDriver`.
    """

    def __init__(self, session: Session, place: str, board: Board, tool: str | None):
        self.session, self.place, self.board = session, place, board
        self.tool = tool or board.flash_tool
        self._driver: Any = None

    def __call__(self, elf: Path) -> None:
        with self.session.lock:
            if self._driver is None:
                self._driver = self._activate()
            try:
                self._driver.load(str(elf))
            except Exception as e:  # labgrid raises ExecutionError and friends, no common base
                raise FarmError(f"place {self.place}: flashing {self.board.name} with {self.tool} failed: {e}") from e

    def _activate(self) -> Any:
        from labgrid.driver import OpenOCDDriver
        from labgrid.resource.remote import RemotePlace, RemotePlaceManager
        from labgrid.target import Target

        manager = RemotePlaceManager.get()
        manager.session = self.session.session
        manager.loop = self.session.session.loop
        target = Target(self.place, env=None)
        RemotePlace(target, name=self.place)
        flasher = self.board.flasher
        if self.tool == "openocd":
            if flasher is None or not flasher.openocd_config:
                raise FarmError(f"board {self.board.name} names no OpenOCD configuration")
            # The board table names scripts on OpenOCD's search path (interface/stlink.cfg), not local files.
            commands = [f"source [find {cfg}]" for cfg in flasher.openocd_config]
            commands += ["init", "program {filename} verify reset", "shutdown"]
            driver = OpenOCDDriver(target, name=None, load_commands=commands)
        elif self.tool == "pyocd":
            if flasher is None or not flasher.pyocd_target:
                raise FarmError(f"board {self.board.name} names no pyOCD target")
            driver = RlxPyOCDDriver(target, name=None, pyocd_target=flasher.pyocd_target)
        else:
            raise FarmError(f"unknown flash tool {self.tool!r} for place {self.place}; use pyocd or openocd")
        target.activate(driver)
        return driver


@target_factory.reg_driver
@attr.s(eq=False)
class RlxPyOCDDriver(Driver):
    """``pyocd flash`` on the host where a place's debug probe is (labgrid has no pyOCD driver)."""

    bindings = {"interface": {"USBDebugger", "NetworkUSBDebugger"}}
    pyocd_target = attr.ib(default="", validator=attr.validators.instance_of(str))

    def load(self, filename: str) -> None:
        mf = ManagedFile(filename, self.interface)
        mf.sync_to_resource()
        cmd = ["pyocd", "flash", "-t", self.pyocd_target]
        serial = getattr(self.interface, "serial", None)
        if serial:
            cmd += ["-u", serial]
        processwrapper.check_output(self.interface.wrap_command([*cmd, mf.get_remote_path()]))
