"""The exporter side of QEMU farm places: one server that (re)starts a QEMU per place on request.

A QEMU board has no debug probe to flash through, so a farm place's "flash"
is this server: the client sends the ELF over TCP (one JSON line, then the
bytes), the server writes it to its own directory and restarts that place's
QEMU with it, the UART on the place's fixed loopback port (the port the
exporter publishes as the place's ``NetworkSerialPort``). QEMU waits for the
first client before it runs the guest, so no boot output is lost.

Run as ``python -m rlx_edge.hil._qemu_places CONFIG.json``; it prints
``listening PORT`` once its control port is open and stops every QEMU on
SIGTERM/SIGINT. Requests (one per connection, a JSON line each way):
``{"op": "flash", "place": P, "size": N}`` + N bytes; ``{"op": "kill",
"place": P}`` (kills that QEMU: a board that died, for tests);
``{"op": "status"}`` (each place's QEMU pid, or null, and its log tail).
"""

from __future__ import annotations

import json
import signal
import socket
import socketserver
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx_edge.targets.cortexm.qemu import QemuBoard

# A firmware ELF of the model runner is a few hundred KB; anything far larger is not one.
MAX_ELF_BYTES = 64 << 20
# QEMU opens its UART port within a second even on a loaded host; this is far past that.
LISTEN_TIMEOUT_S = 30.0


@dataclass
class _Slot:
    board: str
    uart_port: int
    qemu: QemuBoard | None = None
    flashes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, slots: dict[str, _Slot], workdir: Path):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.slots = slots
        self.workdir = workdir

    def close_all(self) -> None:
        for slot in self.slots.values():
            with slot.lock:
                if slot.qemu is not None:
                    slot.qemu.close()
                    slot.qemu = None


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            request = json.loads(self.rfile.readline(4096))
            answer = self._answer(request)
        except Exception as e:  # the client gets the reason; the server keeps serving
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "status":
            return {"ok": True, "places": {name: _status(s) for name, s in self.server.slots.items()}}
        slot = self.server.slots.get(request.get("place", ""))
        if slot is None:
            return {"ok": False, "error": f"no QEMU place {request.get('place')!r} here"}
        if op == "kill":
            with slot.lock:
                if slot.qemu is not None:
                    slot.qemu.close()
                    slot.qemu = None
            return {"ok": True}
        if op != "flash":
            return {"ok": False, "error": f"unknown request {op!r}"}
        size = int(request["size"])
        if not 0 < size <= MAX_ELF_BYTES:
            return {"ok": False, "error": f"an ELF of {size} bytes is not a firmware"}
        data = self.rfile.read(size)
        if len(data) != size:
            return {"ok": False, "error": f"got {len(data)} of {size} bytes"}
        with slot.lock:
            if slot.qemu is not None:
                slot.qemu.close()
                slot.qemu = None
            slot.flashes += 1
            elf = self.server.workdir / f"{request['place']}-{slot.flashes}.elf"
            elf.write_bytes(data)
            qemu = QemuBoard(elf, slot.board, port=slot.uart_port)
            qemu.start()
            slot.qemu = qemu
            if not _wait_listening(qemu, LISTEN_TIMEOUT_S):
                tail = qemu.log()[-500:]
                qemu.close()
                slot.qemu = None
                return {"ok": False, "error": f"QEMU did not open its UART port {slot.uart_port}: {tail}"}
            return {"ok": True, "pid": qemu.pid, "port": slot.uart_port}


def _wait_listening(qemu: QemuBoard, timeout: float) -> bool:
    """Whether QEMU announced its listening UART (before it accepts its first client) within ``timeout``.

    Answering a flash only then lets the client open the place's port at once
    (``run_campaign(port=...)`` does not retry); probing the port instead would
    be QEMU's first client and lose the boot output.
    """
    deadline = time.monotonic() + timeout
    while qemu.poll() is None and time.monotonic() < deadline:
        if qemu.listening():
            return True
        time.sleep(0.02)
    return False


def _status(slot: _Slot) -> dict[str, Any]:
    with slot.lock:
        q = slot.qemu
        running = q is not None and q.poll() is None
        return {"pid": q.pid if running else None, "flashes": slot.flashes, "log": q.log()[-500:] if q else ""}


def serve(config: dict[str, Any]) -> None:
    slots = {name: _Slot(p["board"], int(p["uart_port"])) for name, p in config["places"].items()}
    with tempfile.TemporaryDirectory(prefix="rlx-qemu-places-") as tmp:
        server = _Server(slots, Path(tmp))

        def stop(signum, frame):
            # serve_forever must be stopped from another thread.
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            print(f"listening {server.server_address[1]}", flush=True)
            server.serve_forever(poll_interval=0.1)
        finally:
            server.close_all()
            server.server_close()


def request(host: str, port: int, message: dict[str, Any], payload: bytes = b"", timeout: float = 30.0) -> dict:
    """One request to a place server; raises OSError when it cannot be reached."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(json.dumps(message).encode() + b"\n" + payload)
        with s.makefile("rb") as f:
            line = f.readline(1 << 20)
    if not line:
        raise OSError(f"the QEMU place server at {host}:{port} closed the connection without an answer")
    return json.loads(line)


if __name__ == "__main__":
    serve(json.loads(Path(sys.argv[1]).read_text()))
