"""The model firmware cache: keyed by what is compiled in, not by how the host reaches the board."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

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


def test_kernel_objects_are_compiled_once_for_every_later_build(tmp_path, monkeypatch):
    """A second model build in another directory compiles only its own files; the image is the same bytes."""
    from rlx_edge.targets.cortexm import firmware

    monkeypatch.setenv("RLX_EDGE_CACHE", str(tmp_path / "cache"))
    compiled: list[str] = []
    real = firmware.run_tool

    def counting(argv, what, **kwargs):
        if "-c" in argv:
            compiled.append(Path(argv[argv.index("-c") + 1]).name)
        return real(argv, what, **kwargs)

    monkeypatch.setattr(firmware, "run_tool", counting)
    g = load_tflite(TFLM / "hello_world_int8.tflite")
    first, _ = build_model_firmware(g, "qemu-m4", tmp_path / "a")
    kernels = {n for n in compiled if n.startswith("rlx_")}
    assert len(kernels) > 10, compiled
    image = first.read_bytes()
    compiled.clear()
    shutil.rmtree(tmp_path / "a")
    again, _ = build_model_firmware(g, "qemu-m4", tmp_path / "a")
    # the kernels came from the cache (the runtime's main.c and the model's own files are compiled)
    assert not kernels & set(compiled), compiled
    assert "model.c" in compiled
    # ... and the objects from the cache are those a compile gives: the same image, byte for byte
    assert again == first and again.read_bytes() == image
    compiled.clear()
    elsewhere, _ = build_model_firmware(g, "qemu-m4", tmp_path / "b")  # another directory: still from the cache
    assert not kernels & set(compiled), compiled
    # The cached objects name no directory of the build that made them: compiled afresh there, the same image.
    warm = elsewhere.read_bytes()
    shutil.rmtree(tmp_path / "b")
    monkeypatch.setenv("RLX_EDGE_CACHE", str(tmp_path / "cold"))
    cold, _ = build_model_firmware(g, "qemu-m4", tmp_path / "b")
    assert kernels <= set(compiled) and cold.read_bytes() == warm


def test_the_object_key_holds_every_file_compiled(tmp_path):
    from rlx_edge.targets.cortexm import firmware

    (tmp_path / "k.c").write_text('#include <stdint.h>\n#include "k.h"\nint f(void) { return K; }\n')
    (tmp_path / "k.h").write_text('#include "deep.h"\n')
    (tmp_path / "deep.h").write_text("#define K 1\n")
    closure = firmware._local_closure(tmp_path / "k.c")
    assert sorted(closure) == ["deep.h", "k.c", "k.h"]
    key = firmware._object_key("arm-none-eabi-gcc", ["-O2"], closure)
    assert firmware._object_key("arm-none-eabi-gcc", ["-Os"], closure) != key
    (tmp_path / "deep.h").write_text("#define K 2\n")  # a header two includes down
    assert firmware._object_key("arm-none-eabi-gcc", ["-O2"], firmware._local_closure(tmp_path / "k.c")) != key
    # a header from elsewhere (found on -I) or a <...> header of the project: not cacheable
    (tmp_path / "k.h").write_text('#include "../model.h"\n')
    assert firmware._local_closure(tmp_path / "k.c") is None
    (tmp_path / "k.h").write_text("#include <model.h>\n")
    assert firmware._local_closure(tmp_path / "k.c") is None
    (tmp_path / "k.h").write_text('#include "missing.h"\n')
    assert firmware._local_closure(tmp_path / "k.c") is None
