"""The model firmware cache: keyed by what is compiled in, not by how the host reaches the board."""

from __future__ import annotations

from dataclasses import replace

from modelfiles import TFLM
from rlx_edge.boards import get_board
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.cortexm import build_model_firmware


def test_a_serial_url_does_not_rebuild_but_a_baud_rate_does(tmp_path):
    g = load_tflite(TFLM / "hello_world_int8.tflite")
    board = get_board("qemu-m4")
    elf, _ = build_model_firmware(g, board, tmp_path)
    stamp = elf.stat().st_mtime_ns
    # a farm place names its exported UART: the same firmware, from the cache
    again, _ = build_model_firmware(g, board.with_port("socket://127.0.0.1:5555"), tmp_path)
    assert again == elf and again.stat().st_mtime_ns == stamp
    # the baud rate is compiled into the firmware: another build
    slower = replace(board, console=replace(board.console, baudrate=57600))
    other, _ = build_model_firmware(g, slower, tmp_path)
    assert other != elf and other.exists()
