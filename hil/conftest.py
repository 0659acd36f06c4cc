"""Options and fixtures of the HIL campaign suite.

    pytest hil/                                  # QEMU: qemu-mps2-an386 and qemu-mps2-an385
    pytest hil/ --board qemu-mps2-an505          # another emulated board
    pytest hil/ --board nucleo-l4r5zi --port /dev/ttyACM0   # a real board, flashed by its definition's tool

``--board`` takes board names of :mod:`rlx_edge.boards` (comma-separated) or
definition files (``*.toml``, see hil/boards/). The options are prefixed nowhere
else in the repository (tests/ defines none), so collecting tests/ and hil/
together is safe.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError

DEFAULT_BOARDS = "qemu-mps2-an386,qemu-mps2-an385"


def pytest_addoption(parser):
    group = parser.getgroup("hil", "hardware-in-the-loop campaigns (hil/)")
    group.addoption(
        "--board", default=DEFAULT_BOARDS, help=f"boards to run on, comma-separated (default {DEFAULT_BOARDS})"
    )
    group.addoption(
        "--port", default=None, help="serial URL of the board (/dev/ttyACM0, socket://host:port, rfc2217://...)"
    )
    group.addoption("--probe", default=None, help="debug probe serial number for the flasher")
    group.addoption("--no-flash", action="store_true", help="the board already runs the right firmware")


def board_definition(spec: str) -> Board:
    try:
        return get_board(spec)
    except RlxError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_generate_tests(metafunc):
    if "hil_board" in metafunc.fixturenames:
        specs = [s.strip() for s in metafunc.config.getoption("--board").split(",") if s.strip()]
        boards = [board_definition(s) for s in specs]
        metafunc.parametrize("hil_board", boards, ids=[b.name for b in boards], scope="session")


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
    # The directory tests/targets/cortexm uses too: a firmware built there in
    # the same session is not built again here.
    return tmp_path_factory.getbasetemp() / "fw"
