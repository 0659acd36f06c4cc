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


def test_processes_sharing_the_cache_build_each_image_once(tmp_path, monkeypatch):
    """Two builders of one image at once (two xdist workers, two campaigns): one builds, the other waits for it."""
    import threading
    import time

    from rlx_edge.targets.cortexm import firmware

    g = load_tflite(TFLM / "hello_world_int8.tflite")
    real, calls = firmware.build_firmware, []

    def slow_build(*args, **kwargs):
        calls.append(threading.current_thread().name)
        time.sleep(0.5)  # both builders are inside build_model_firmware by now
        return real(*args, **kwargs)

    monkeypatch.setattr(firmware, "build_firmware", slow_build)
    elves: dict[str, object] = {}

    def build(name: str) -> None:
        elves[name] = build_model_firmware(g, "qemu-m4", tmp_path)[0]

    threads = [threading.Thread(target=build, args=(f"builder-{k}",), name=f"builder-{k}") for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1, calls
    assert elves["builder-0"] == elves["builder-1"] and elves["builder-0"].exists()
