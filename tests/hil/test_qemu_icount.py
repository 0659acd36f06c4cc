"""The instruction-count TCG plugin: exact, repeatable, windows around the model call, ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.hil.qemu import count_instructions, count_instructions_many
from rlx_edge.targets.cortexm import build_firmware
from rlx_edge.targets.cortexm.firmware import symbols
from rlx_edge.targets.cortexm.qemu import build_plugin

FIXTURES = Path(__file__).resolve().parents[1] / "firmware" / "fixtures"
QEMU_BOARDS = ["qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps2-an500", "qemu-mps2-an505"]


@pytest.fixture(scope="module")
def loop_elves(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("icount")
    return {b: build_firmware(FIXTURES / "loop", b, root / b) for b in QEMU_BOARDS}


@pytest.fixture(scope="module")
def standin_elf(tmp_path_factory) -> Path:
    return build_firmware(FIXTURES / "standin", "qemu-m4", tmp_path_factory.mktemp("icount-standin"))


def _n(n: int) -> np.ndarray:
    return np.array([n, 0, 0, 0], dtype=np.uint8).view(np.int8)


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_loop_count_is_exact(loop_elves, board):
    # fixtures/loop/model.c executes exactly 6 + 4n instructions.
    ns = [0, 1, 2, 7, 100, 255]
    counts = count_instructions_many(loop_elves[board], board, [_n(n) for n in ns])
    assert counts == [6 + 4 * n for n in ns]


def test_counts_repeat_exactly_across_boots(standin_elf):
    xs = [np.arange(16, dtype=np.int8), np.full(16, -7, np.int8)]
    first = count_instructions_many(standin_elf, "qemu-m4", xs)
    second = count_instructions_many(standin_elf, "qemu-m4", xs)
    assert first == second
    assert first[0] > 100
    # The stand-in's work does not depend on the data.
    assert first[0] == first[1]


def test_single_input_count(loop_elves):
    assert count_instructions(loop_elves["qemu-mps2-an385"], "qemu-m3", _n(10)) == 46


def test_only_restricts_to_a_range(standin_elf):
    syms = symbols(standin_elf)
    whole = count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8))
    inside = count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8), only=["rlx_model_invoke"])
    # The stand-in calls nothing, so all of its instructions lie inside it.
    assert inside == whole
    # Only its first instruction: counted once per call.
    lo = syms["rlx_model_invoke"][0]
    assert count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8), only=[(lo, lo + 2)]) == 1
    # A function the model never calls.
    assert count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8), only=["board_exit"]) == 0


def test_unknown_function_is_an_error(standin_elf):
    with pytest.raises(RlxError, match="no symbol"):
        count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8), function="no_such_function")
    with pytest.raises(RlxError, match="no direct call"):
        count_instructions(standin_elf, "qemu-m4", np.zeros(16, np.int8), function="Reset_Handler")


def test_plugin_is_built_once(tmp_path):
    lib = build_plugin(tmp_path)
    mtime = lib.stat().st_mtime_ns
    assert build_plugin(tmp_path) == lib
    assert lib.stat().st_mtime_ns == mtime
    assert b"qemu_plugin_install" in lib.read_bytes()


def test_plugin_needs_gcc(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="apt-get install gcc"):
        build_plugin(tmp_path / "cache")
