"""Firmware under QEMU on every emulated board: model outputs over the UART, exit status, faults, timeouts."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.boards import get_board
from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.hil.qemu import QemuSession, run_qemu
from rlx_edge.targets.cortexm import QemuError, QemuTimeout, build_firmware, run_firmware

_spec = importlib.util.spec_from_file_location(
    "_standin", Path(__file__).resolve().parents[1] / "firmware" / "_standin.py"
)
_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_standin)
FIXTURES = _standin.FIXTURES
reference = _standin.standin_reference

QEMU_BOARDS = ["qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps2-an500", "qemu-mps2-an505"]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """Builds each (fixture, board, options) once for the module."""
    root = tmp_path_factory.mktemp("qemu-fw")
    cache: dict = {}

    def get(fixture: str, board: str, **kw) -> Path:
        key = (fixture, board, repr(sorted(kw.items())))
        if key not in cache:
            out = root / f"{fixture}-{board}-{len(cache)}"
            srcs = FIXTURES / fixture
            if fixture == "exit_status":
                kw = {"with_main": False, **kw}
                srcs = [srcs / "app.c"]
            cache[key] = build_firmware(srcs, board, out, **kw)
        return cache[key]

    return get


def _inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-128, 128, size=16, dtype=np.int8) for _ in range(4)]
    return [*xs, np.full(16, -128, np.int8), np.full(16, 127, np.int8), np.zeros(16, np.int8)]


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_standin_model_matches_numpy(build, board):
    xs = _inputs()
    ys = run_qemu(build("standin", board), board, xs, timeout=20)
    assert len(ys) == len(xs)
    for x, y in zip(xs, ys):
        assert y.dtype == np.int8
        assert np.array_equal(y, reference(x)), (x, y)
    # The outputs differ between inputs: a runner echoing a constant fails.
    assert len({y.tobytes() for y in ys}) > 3


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_exit_status_and_console(build, board):
    run = run_firmware(build("exit_status", board, defines={"EXIT_STATUS": 42}), board, timeout=20)
    assert run.returncode == 42
    assert run.output == "hello from rlx-edge\n"


def test_zero_exit_status(build):
    run = run_firmware(build("exit_status", "qemu-m3", defines={"EXIT_STATUS": 0}), "qemu-m3", timeout=20)
    assert run.returncode == 0
    assert "hello" in run.output


def test_session_exit_status_and_banner(build):
    with QemuSession(build("standin", "qemu-mps2-an386"), "qemu-m4", timeout=20) as s:
        assert (s.input_bytes, s.output_bytes, s.arena_bytes) == (16, 4, 64)
        r = s.invoke(np.arange(16, dtype=np.int8))
        assert r.status == 0
        assert r.ticks > 0
        assert r.output == reference(np.arange(16, dtype=np.int8)).tobytes()
        assert s.exit(7) == 7
    assert s.returncode == 7


def test_exit_whose_answer_is_lost_still_returns_the_status(build):
    """The firmware exits right after answering EXIT; QEMU may close the socket before the answer
    leaves it. The answer is dropped here on purpose: QEMU's exit status is the answer."""
    from rlx_edge.hil.transport import HilLinkError

    with QemuSession(build("standin", "qemu-mps2-an386"), "qemu-m4", timeout=20) as s:
        real_exit = s.client.exit

        def exit_then_lose_the_answer(status: int) -> None:
            real_exit(status)
            raise HilLinkError("read failed: socket disconnected")

        s.client.exit = exit_then_lose_the_answer
        assert s.exit(5) == 5
    assert s.returncode == 5


def test_clock_comes_from_the_board_table(tmp_path):
    """The firmware reports the table's clock (BOARD_CORE_HZ), whatever the board's."""
    for board in (get_board("qemu-m33"), dataclasses.replace(get_board("qemu-m33"), clock_hz=10_000_000)):
        with QemuSession(build_firmware(FIXTURES / "standin", board, tmp_path / str(board.clock_hz)), board) as s:
            assert s.info.core_hz == board.clock_hz
            assert s.exit(0) == 0


@pytest.mark.parametrize("board", ["qemu-mps2-an386", "qemu-mps2-an505"])
def test_test_vector_mode(build, board):
    x = _inputs(1)[0]
    good = build("standin", board, test_input=x, expected_output=reference(x))
    wrong = reference(x).copy()
    wrong[2] ^= 1
    bad = build("standin", board, test_input=x, expected_output=wrong)
    ok_run = run_firmware(good, board, timeout=20)
    assert ok_run.returncode == 0
    assert ok_run.output.startswith("O 0 ")
    assert ok_run.output.split()[3] == reference(x).tobytes().hex()
    assert run_firmware(bad, board, timeout=20).returncode == 1


def test_fault_is_reported_with_status(build):
    with pytest.raises(QemuError, match=r"faulted \(exit status 131"):
        run_qemu(build("fault", "qemu-m3"), "qemu-m3", [np.zeros(1, np.int8)], timeout=20)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_hanging_model_times_out_and_qemu_is_killed(build):
    elf = build("hang", "qemu-m3")
    with QemuSession(elf, "qemu-m3", timeout=1.0) as s:
        pid = s.pid
        with pytest.raises(QemuTimeout):
            s.invoke(np.zeros(1, np.int8))
        assert _gone(pid)


def test_session_is_torn_down_on_error(build):
    with pytest.raises(RuntimeError), QemuSession(build("standin", "qemu-m3"), "qemu-m3", timeout=20) as s:
        pid = s.pid
        raise RuntimeError("user code failed")
    assert _gone(pid)


def test_firmware_that_never_exits_times_out(build):
    with pytest.raises(QemuTimeout):
        run_firmware(build("standin", "qemu-m3"), "qemu-m3", timeout=1.0)


def test_wrong_input_size_is_refused(build):
    with QemuSession(build("standin", "qemu-m3"), "qemu-m3", timeout=20) as s, pytest.raises(RlxError, match="16"):
        s.invoke(np.zeros(15, np.int8))


def test_real_board_is_not_a_qemu_machine(build, tmp_path):
    with pytest.raises(RlxError, match="real board"):
        run_qemu(tmp_path / "x.elf", "nucleo-l4r5zi", [])


def test_missing_qemu_is_a_clear_error(build, monkeypatch, tmp_path):
    elf = build("standin", "qemu-m3")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="apt-get install qemu-system-arm"):
        run_qemu(elf, "qemu-m3", [np.zeros(16, np.int8)])
