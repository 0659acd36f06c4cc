"""Options and fixtures of the HIL campaign suite.

    pytest hil/                                  # QEMU: qemu-mps2-an386 and qemu-mps2-an385
    pytest hil/ --board qemu-mps2-an505          # another emulated board
    pytest hil/ --board nucleo-l4r5zi --port /dev/ttyACM0   # a real board, flashed by its definition's tool
    pytest hil/ -n 4 --farm 4                    # 4 QEMU places of a labgrid farm, one xdist worker each
    pytest hil/ -n 2 --places lab-1,lab-2 --lg-coordinator HOST:20408   # places of an existing farm

``--board`` takes board names of :mod:`rlx_edge.boards` (comma-separated) or
definition files (``*.toml``, see hil/boards/). The options are prefixed nowhere
else in the repository (tests/ defines none), so collecting tests/ and hil/
together is safe.

Places (``--places``, ``--lg-env``, ``--farm N``; labgrid, the ``farm``
extra): the tests run on the boards of the places (their tag ``board``)
instead of ``--board``'s. ``--farm N`` starts one :class:`QemuFarm` of N
places (the ``--board`` boards in turn) in the process that pytest was started
as (the xdist controller), and stops it at the end. Under xdist (``-n N``,
exactly one worker per place) the controller hands worker K place K, and a
scheduler of its own sends each test only to a worker whose place has the
test's board; each worker acquires its place through the coordinator while
it starts (in a thread, so that it overlaps the worker's collection) and
releases it at the end of its session, also when tests failed. Without xdist
the one process acquires every place.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rlx_edge._io import atomic_write_text
from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError

DEFAULT_BOARDS = "qemu-mps2-an386,qemu-mps2-an385"
# QemuFarm's own limit for each of its processes is 60 s; the three come up one after another at worst.
FARM_START_TIMEOUT_S = 200.0
_FARM_KEY = pytest.StashKey["_Farm | None"]()


def pytest_addoption(parser, pluginmanager):
    group = parser.getgroup("hil", "hardware-in-the-loop campaigns (hil/)")
    if not pluginmanager.has_plugin("labgrid"):
        # labgrid's own pytest plugin is off (pyproject.toml: it costs a second of imports in every
        # process); these are its two options that hil/ reads, under the same names.
        group.addoption("--lg-env", dest="lg_env", default=None, help="labgrid environment config file (places)")
        group.addoption(
            "--lg-coordinator",
            dest="lg_coordinator",
            default=None,
            metavar="COORDINATOR_ADDRESS",
            help="labgrid coordinator HOST[:PORT] (default $LG_COORDINATOR)",
        )
    group.addoption(
        "--board", default=DEFAULT_BOARDS, help=f"boards to run on, comma-separated (default {DEFAULT_BOARDS})"
    )
    group.addoption(
        "--port", default=None, help="serial URL of the board (/dev/ttyACM0, socket://host:port, rfc2217://...)"
    )
    group.addoption("--probe", default=None, help="debug probe serial number for the flasher")
    group.addoption("--no-flash", action="store_true", help="the board already runs the right firmware")
    group.addoption(
        "--places",
        default=None,
        help="labgrid places to run on, comma-separated (coordinator: --lg-coordinator or $LG_COORDINATOR); "
        "with -n N, one per xdist worker",
    )
    group.addoption(
        "--inputs",
        type=int,
        default=None,
        metavar="N",
        help="inputs per model campaign (default: each model's own, hil/test_mlperf_campaigns.py COUNTS); "
        "large campaigns are split into tests of PER_TEST inputs that places run in parallel",
    )
    group.addoption(
        "--farm",
        type=int,
        default=None,
        metavar="N",
        help="start a local labgrid farm of N QEMU places (the --board boards in turn) and run on it",
    )


def board_definition(spec: str) -> Board:
    try:
        return get_board(spec)
    except RlxError as e:
        raise pytest.UsageError(str(e)) from None


# -- labgrid places ------------------------------------------------------------------


@dataclass(frozen=True)
class _Farm:
    """The places of this run: all of them (``places``: name -> board), and the ones this process holds.

    ``coordinator`` is empty while a ``--farm`` started by the controller is
    still coming up: ``ready`` names the file it writes then (the address, or
    why the farm did not start), which a worker waits for before its first test.
    """

    coordinator: str
    places: dict[str, str]
    mine: tuple[str, ...]
    ready: str | None = None

    @property
    def boards(self) -> list[str]:
        return list(dict.fromkeys(self.places.values()))

    def address(self, timeout: float) -> str:
        """The coordinator's address, once the farm is up (``pytest.fail`` if it did not come up)."""
        if self.coordinator or self.ready is None:
            return self.coordinator
        deadline = time.monotonic() + timeout
        while (state := _ready_state(self.ready)) is None:
            if time.monotonic() > deadline:
                pytest.fail(f"hil: the QEMU farm did not come up within {timeout:g} s")
            time.sleep(0.05)
        if "error" in state:
            pytest.fail(f"hil: the QEMU farm did not start: {state['error']}")
        return state["coordinator"]


def _ready_state(ready: str) -> dict[str, str] | None:
    """What a farm started in the background wrote to ``ready`` (its address or its error); None: not yet."""
    try:
        return json.loads(Path(ready).read_text())
    except (OSError, ValueError):
        return None


def _xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this (controller) process starts; 0 without xdist."""
    if config.getoption("dist", "no") == "no":
        return 0
    from xdist.workermanage import parse_tx_spec_config

    return len(parse_tx_spec_config(config))


def _lg_option(config: pytest.Config, name: str) -> str | None:
    # --lg-env/--lg-coordinator: this conftest's, or labgrid's plugin's where it is on (`-p labgrid`).
    return config.getoption(name, None)


def pytest_configure(config: pytest.Config) -> None:
    inputs = config.getoption("--inputs")
    if inputs is not None and inputs < 4:
        # fewer would be the three edge inputs only (or part of them), no random one
        raise pytest.UsageError(f"--inputs {inputs}: give at least 4 (3 edge inputs and at least 1 random one)")
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        spec = worker.get("hil_farm")
        config.stash[_FARM_KEY] = (
            None if spec is None else _Farm(spec["coordinator"], spec["places"], (spec["mine"],), spec["ready"])
        )
        if spec is not None:
            config.stash[_ACQUISITION_KEY] = _Acquisition(config.stash[_FARM_KEY])
        return
    names, farm_n, env = config.getoption("--places"), config.getoption("--farm"), _lg_option(config, "lg_env")
    if names is None and farm_n is None and env is None:
        config.stash[_FARM_KEY] = None
        return
    if farm_n is not None and (names or env):
        raise pytest.UsageError("--farm starts its own places: give it without --places/--lg-env")
    from rlx_edge.hil.farm import require_labgrid

    n = _xdist_workers(config)
    _share_cores(n)
    if farm_n is not None:
        _check_workers(farm_n, n)  # before a farm is started for nothing
    try:
        require_labgrid()
        farm = _start_farm(config, farm_n, n) if farm_n is not None else _read_places(config, names, env)
    except RlxError as e:
        raise pytest.UsageError(f"hil: {e}") from None
    _check_workers(len(farm.places), n)
    config.stash[_FARM_KEY] = farm
    if n:
        config.pluginmanager.register(_PlacesXdist(farm), "hil-places-xdist")
    else:  # this process runs the tests: it holds every place
        config.stash[_ACQUISITION_KEY] = _Acquisition(farm)


def _share_cores(workers: int) -> None:
    """Gives each xdist worker's BLAS its share of the cores (the workers inherit this environment).

    The integer reference runs its convolutions as exact float64 GEMMs; with
    one BLAS thread per core in every worker, N workers and their N QEMUs
    would oversubscribe the host. A value the user set is kept.
    """
    if not workers:
        return
    share = str(max(1, (os.cpu_count() or 1) // (2 * workers)))  # half the cores: the other half run QEMU
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, share)


def _check_workers(places: int, workers: int) -> None:
    if workers and workers != places:
        raise pytest.UsageError(
            f"hil: {places} places and {workers} xdist workers: give one worker per place (-n {places})"
        )


def _start_farm(config: pytest.Config, n: int, workers: int) -> _Farm:
    from rlx_edge.hil.farm import QemuFarm

    if n < 1:
        raise RlxError(f"--farm takes the number of QEMU places, at least 1, not {n}")
    specs = [s.strip() for s in config.getoption("--board").split(",") if s.strip()]
    qemu_farm = QemuFarm([specs[i % len(specs)] for i in range(n)])
    places = {p.name: p.board.name for p in qemu_farm.places}
    if not workers:
        qemu_farm.start()
        # Stopped when pytest ends.
        config.add_cleanup(qemu_farm.close)
        return _Farm(qemu_farm.coordinator, places, tuple(places))
    # Under xdist the farm comes up while the workers start (both take seconds of Python imports);
    # each worker waits for the ready file before its first test.
    ready = Path(tempfile.mkdtemp(prefix="rlx-farm-ready-")) / "ready.json"

    def start() -> None:
        try:
            qemu_farm.start()
            state = {"coordinator": qemu_farm.coordinator}
        except Exception as e:  # the workers fail their tests with this reason
            state = {"error": str(e)}
        atomic_write_text(ready, json.dumps(state))

    starting = threading.Thread(target=start, name="hil-farm-start", daemon=True)
    starting.start()

    def stop() -> None:
        # When pytest ends, after the workers (which release their places) are gone.
        starting.join()
        qemu_farm.close()
        shutil.rmtree(ready.parent, ignore_errors=True)

    config.add_cleanup(stop)
    return _Farm("", places, tuple(places), str(ready))


def _read_places(config: pytest.Config, names: str | None, env: str | None) -> _Farm:
    from rlx_edge.hil import _labgrid

    coordinator = _lg_option(config, "lg_coordinator")
    wanted = [s.strip() for s in (names or "").split(",") if s.strip()]
    if env is not None:
        env_names, env_coordinator = _labgrid.env_places(env)
        wanted = wanted or env_names
        coordinator = coordinator or env_coordinator
    session = _labgrid.Session(coordinator)
    try:
        known = session.places()
        places = {}
        for name in dict.fromkeys(wanted):
            if name not in known:
                raise RlxError(f"no place {name!r} on the coordinator at {session.address} (`labgrid-client places`)")
            board = known[name].tags.get("board")
            if not board:
                raise RlxError(f"place {name} names no board: `labgrid-client -p {name} set-tags board=<name>`")
            places[name] = get_board(board).name
        return _Farm(session.address, places, tuple(places))
    finally:
        session.close()


def _board_of(nodeid: str, boards: Sequence[str]) -> str | None:
    """The board a collected test runs on: hil_board is one parameter of its id (None: not board-bound)."""
    # rpartition: --dist loadgroup appends "@group" after the parameters.
    params = nodeid.partition("::")[2].partition("[")[2].rpartition("]")[0]
    fits = [b for b in boards if f"-{b}-" in f"-{params}-"]
    return max(fits, key=len) if fits else None


class _PlacesXdist:
    """xdist controller hooks: worker K gets place K, and tests go only to workers holding their board."""

    def __init__(self, farm: _Farm):
        self.farm = farm
        self.free = list(farm.places)

    def pytest_configure_node(self, node: Any) -> None:
        # A worker restarted after a crash takes the place its predecessor gave back (pytest_testnodedown).
        place = self.free.pop(0)
        node.workerinput["hil_farm"] = {
            "coordinator": self.farm.coordinator,
            "places": self.farm.places,
            "mine": place,
            "ready": self.farm.ready,
        }

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        place = node.workerinput["hil_farm"]["mine"]
        if error is not None:
            # The worker died holding its place (a crash, os._exit, a kill): the coordinator keeps a place
            # acquired until it is released, so the worker that replaces it could not acquire it.
            self._release_for_the_dead(place)
        self.free.append(place)

    def _release_for_the_dead(self, place: str) -> None:
        from rlx_edge.hil import _labgrid

        state = _ready_state(self.farm.ready) if self.farm.ready else None
        coordinator = self.farm.coordinator or (state or {}).get("coordinator", "")
        if not coordinator:
            return
        try:
            session = _labgrid.Session(coordinator)
            try:
                if session.acquired_by(place) is not None:
                    session.release(place)
            finally:
                session.close()
        except Exception as e:  # best effort in an xdist hook: the replacement worker then says who holds it
            warnings.warn(f"hil: releasing {place} after its worker died: {e}", stacklevel=1)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return _place_scheduler(config, log, self.farm)


def _place_scheduler(config: pytest.Config, log: Any, farm: _Farm) -> Any:
    from xdist.scheduler import LoadScheduling

    class PlaceScheduling(LoadScheduling):
        """Load scheduling where a test goes only to a worker whose place has the test's board.

        Each worker gets one test at a time beyond the one it runs (an xdist
        worker needs the next test to start one), so long campaigns are spread
        as they finish; a worker with nothing left for its board is shut down.
        """

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.last_module: dict[Any, str] = {}  # a worker -> the test module of the last test sent to it

        @property
        def collection_is_completed(self) -> bool:
            # A worker starts as soon as its own collection is in: xdist waits for every worker's,
            # which leaves the first ones idle for as long as the slowest takes to start (~1 s).
            return bool(self.node2collection)

        def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
            if self.collection is not None and list(collection) != self.collection:
                # Only a worker whose collection is the first one's can be sent test indices.
                from xdist.report import report_collection_diff

                first = next(iter(self.node2collection))
                msg = report_collection_diff(self.collection, collection, first.gateway.id, node.gateway.id)
                self.log(msg)
                rep = pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=msg, result=[])
                self.config.hook.pytest_collectreport(report=rep)
                node.shutdown()
                return
            self.node2collection[node] = list(collection)

        def _fits(self, node: Any, index: int) -> bool:
            assert self.collection is not None
            board = _board_of(self.collection[index], farm.boards)
            return board is None or farm.places[node.workerinput["hil_farm"]["mine"]] == board

        def _order(self, node: Any, mine: list[int]) -> list[int]:
            # Keep a worker on its test module (module fixtures such as test_link's `link` are set up,
            # and firmware built, once), and start a worker on a module no other worker of its board is
            # on (the long campaigns spread over the board's places); else collection order.
            assert self.collection is not None
            board = farm.places[node.workerinput["hil_farm"]["mine"]]
            last = self.last_module.get(node)
            busy = {
                m
                for n, m in self.last_module.items()
                if n is not node and farm.places[n.workerinput["hil_farm"]["mine"]] == board
            }
            module = [self.collection[i].partition("::")[0] for i in range(len(self.collection))]
            return sorted(mine, key=lambda i: (module[i] != last, module[i] in busy, i))

        def check_schedule(self, node: Any, duration: float = 0) -> None:
            if node.shutting_down or self.collection is None or node not in self.node2collection:
                return
            mine = self._order(node, [i for i in self.pending if self._fits(node, i)])
            take = mine[: max(0, 2 - len(self.node2pending[node]))]
            for i in take:
                self.pending.remove(i)
            if take:
                self.node2pending[node].extend(take)
                self.last_module[node] = self.collection[take[-1]].partition("::")[0]
                node.send_runtest_some(take)
            if len(mine) == len(take):
                node.shutdown()

        def schedule(self) -> None:
            # Called for each worker's collection as it comes in (collection_is_completed).
            assert self.collection_is_completed
            if self.collection is None:
                self.collection = next(iter(self.node2collection.values()))
                self.pending[:] = range(len(self.collection))
            for node in self.nodes:
                self.check_schedule(node)

    return PlaceScheduling(config, log)


@dataclass(frozen=True)
class HilPlace:
    """A labgrid place this process holds: the test flashes it, then talks to its UART.

    The place's name and board are known from the start; :meth:`running`
    waits for the acquisition, so that a test builds its firmware while the
    place is still being acquired (or the farm is still coming up).
    """

    name: str
    board: Board
    _acquisition: _Acquisition

    @contextlib.contextmanager
    def running(self, elf: Path) -> Iterator[str]:
        """Flashes ``elf`` and yields the UART's URL; a QEMU place's QEMU is stopped afterwards.

        An idle model runner polls its UART, so a QEMU left running would keep
        a host core busy while other places' tests need it.
        """
        link = self._acquisition.link(self.name)
        link.flash(elf)  # a QEMU place restarts its QEMU; its UART listens on return
        try:
            yield link.url
        finally:
            if link.power_off is not None:
                link.power_off()


class _Acquisition:
    """The places this process holds, acquired in a thread started once the tests are collected.

    The coordinator's answers (acquire, resolve) and a ``--farm`` still coming
    up then overlap the first test's set-up and firmware build: a place is
    needed only to flash it (:meth:`HilPlace.running`). Started earlier, the
    thread's imports (labgrid, grpc) would share the interpreter with the
    collection and delay it as much. :meth:`link` waits for the thread and
    raises what it raised; :meth:`release` gives back what it acquired (at
    pytest_unconfigure, also when tests failed).
    """

    def __init__(self, farm: _Farm):
        self.farm = farm
        self.session: Any = None
        self.acquired: list[str] = []
        self.links: dict[str, Any] = {}  # place -> its _labgrid.PlaceLink (url, flash, power_off)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._acquire, name="hil-acquire", daemon=True)

    def start(self) -> None:
        if self._thread.ident is not None:
            return
        # The rlx_edge modules the thread needs are imported here, before it starts: a test's
        # set-up imports modules too, and two threads importing modules that import each other can
        # each be handed the other's half-initialized module (seen on a farm: KeyError
        # 'rlx_edge.targets.cortexm' in one worker). Only labgrid's and grpc's modules, which no
        # test imports, are left to the thread.
        import rlx_edge.hil._qemu_places  # noqa: F401  (and with it rlx_edge.targets.cortexm)

        self._thread.start()

    def _acquire(self) -> None:
        try:
            from rlx_edge.hil import _labgrid

            self.session = _labgrid.Session(self.farm.address(FARM_START_TIMEOUT_S))
            for name in self.farm.mine:
                self.session.acquire(name)
                self.acquired.append(name)
                self.links[name] = _labgrid.resolve(self.session, name)
        except BaseException as e:  # pytest.fail's Failed too: the tests that need a place report it
            self.error = e

    def place_of(self, board: str) -> str | None:
        """The place of ``board`` this process holds (the first, if several): known before they are acquired."""
        return next((name for name in self.farm.mine if self.farm.places[name] == board), None)

    def link(self, name: str) -> Any:
        """How to reach place ``name``, once the places are acquired (raises what acquiring raised)."""
        self.start()  # a test run without collection_finish (never, with pytest as it is)
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.links[name]

    def release(self) -> None:
        if self._thread.ident is not None:
            self._thread.join()
        for name in self.acquired:
            try:
                self.session.release(name)
            except RlxError as e:  # the coordinator is gone: nothing holds the place any more
                warnings.warn(f"hil: releasing {name}: {e}", stacklevel=1)
        self.acquired = []
        if self.session is not None:
            self.session.close()
            self.session = None


_ACQUISITION_KEY = pytest.StashKey[_Acquisition]()


def pytest_collection_finish(session: pytest.Session) -> None:
    acquisition = session.config.stash.get(_ACQUISITION_KEY, None)
    if acquisition is not None:
        acquisition.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    acquisition = config.stash.get(_ACQUISITION_KEY, None)
    if acquisition is not None:
        acquisition.release()


def pytest_generate_tests(metafunc):
    if "hil_board" in metafunc.fixturenames:
        farm = metafunc.config.stash[_FARM_KEY]
        if farm is not None:
            specs = farm.boards
        else:
            specs = [s.strip() for s in metafunc.config.getoption("--board").split(",") if s.strip()]
        boards = [board_definition(s) for s in specs]
        metafunc.parametrize("hil_board", boards, ids=[b.name for b in boards], scope="session")


@pytest.fixture(scope="session")
def hil_place(hil_board, request) -> HilPlace | None:
    """The place this test runs on (None without --places/--farm: QEMU started here, or --port)."""
    acquisition = request.config.stash.get(_ACQUISITION_KEY, None)
    if acquisition is None:
        return None
    name = acquisition.place_of(hil_board.name)
    if name is None:
        pytest.fail(f"this process holds no place of board {hil_board.name} (held: {list(acquisition.farm.mine)})")
    return HilPlace(name, hil_board, acquisition)


@pytest.fixture(autouse=True)
def _record_place(request) -> None:
    # Which place and worker ran the test, in the JUnit XML (--junitxml): how a farm run is checked.
    if "hil_place" in request.fixturenames:
        place = request.getfixturevalue("hil_place")
        if place is not None:
            request.node.user_properties.append(("hil_place", place.name))
            request.node.user_properties.append(("hil_worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))


@pytest.fixture(scope="session")
def hil_options(request) -> dict:
    cfg = request.config
    return {
        "port": cfg.getoption("--port"),
        "probe": cfg.getoption("--probe"),
        "flash": not cfg.getoption("--no-flash"),
    }


@pytest.fixture(scope="session")
def firmware_cache(tmp_path_factory) -> Path:
    # $RLX_EDGE_CACHE, the library's own firmware cache, when the user names one
    # (a farm host whose firmware was built elsewhere); else the session's
    # directory, which tests/targets/cortexm uses too: a firmware built there in
    # the same session is not built again here. Under xdist the workers share
    # the controller's directory (each image is built once, under a lock): two
    # places of one board that run parts of one campaign need the same image.
    named = os.environ.get("RLX_EDGE_CACHE")
    if named:
        return Path(named)
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "fw"
