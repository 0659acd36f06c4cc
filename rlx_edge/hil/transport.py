"""Byte transports for the HIL client: any pyserial URL.

``/dev/ttyACM0`` (a board's USB serial port), ``socket://127.0.0.1:PORT``
(QEMU's emulated UART, or a fault-injecting proxy), ``rfc2217://host:port``
(a networked serial server), ``loop://`` (tests) all open through
:func:`serial.serial_for_url` and give the same two operations:
:meth:`Transport.write` and :meth:`Transport.read_some`.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from rlx_edge.errors import RlxError


class HilError(RlxError):
    """The hardware-in-the-loop link or the board failed."""


class HilTimeout(HilError):
    """The board did not answer within the command's time limit (after every retry)."""


class HilLinkError(HilError):
    """The serial link itself failed: the port vanished, the socket closed."""


def _serial():
    try:
        import serial
    except ImportError as e:  # pragma: no cover - pyserial is a declared extra
        raise HilError("the HIL client needs pyserial: pip install 'rlx-edge[hil]'") from e
    return serial


class Transport:
    """A pyserial port opened from a URL, read with deadlines instead of pyserial's fixed timeout."""

    def __init__(self, url: str, *, baudrate: int = 115200, open_timeout: float = 5.0, **kwargs: Any):
        serial = _serial()
        self.url = url
        try:
            # timeout=0: non-blocking reads; read_some sets a timeout per call.
            self._port = serial.serial_for_url(url, baudrate=baudrate, timeout=0, write_timeout=open_timeout, **kwargs)
        except (serial.SerialException, ValueError, OSError) as e:
            raise HilLinkError(f"cannot open {url}: {e}") from e
        self._timeout = 0.0
        sock = getattr(self._port, "_socket", None)
        if isinstance(sock, socket.socket):
            # Request/answer traffic: without TCP_NODELAY each small frame can
            # wait for a delayed ACK.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write(self, data: bytes) -> None:
        serial = _serial()
        try:
            self._port.write(data)
            self._port.flush()
        except (serial.SerialException, OSError) as e:
            raise HilLinkError(f"writing to {self.url} failed: {e}") from e

    def read_some(self, timeout: float) -> bytes:
        """What arrives within ``timeout`` seconds: at least one byte, or b"" when nothing came."""
        serial = _serial()
        try:
            self._set_timeout(max(timeout, 0.0))
            first = self._port.read(1)
            if not first:
                return b""
            self._set_timeout(0.0)
            return first + self._port.read(65536)
        except (serial.SerialException, OSError) as e:
            raise HilLinkError(f"reading from {self.url} failed: {e}") from e

    def _set_timeout(self, t: float) -> None:
        # Setting pyserial's timeout reconfigures a real port (tcsetattr):
        # only when it changes.
        if t != self._timeout:
            self._port.timeout = t
            self._timeout = t

    def close(self) -> None:
        port = self._port
        sock = getattr(port, "_socket", None)
        if isinstance(sock, socket.socket):
            # pyserial's socket:// close sleeps 0.3 s "for quick reconnects";
            # nobody reconnects to a closed QEMU or proxy port, so close the
            # socket directly and mark the port closed.
            with contextlib.suppress(OSError):
                sock.close()
            port._socket = None
            port.is_open = False
            return
        with contextlib.suppress(Exception):
            port.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
