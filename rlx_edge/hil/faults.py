"""A fault-injecting TCP proxy for the HIL link: the wire as a bad cable, a noisy UART, a flaky board.

:class:`FaultProxy` sits between a client and a board's TCP UART (QEMU's
``socket://`` port, a ser2net server): the client connects to
:attr:`FaultProxy.url`, the proxy to the board. Every chunk of bytes that
passes may get one fault, drawn with a seeded generator:

- ``bitflip``: one bit inverted;
- ``drop``: one to four bytes removed;
- ``duplicate``: a run of bytes sent twice;
- ``truncate``: the chunk cut short (the rest of a frame never arrives);
- ``garbage``: random bytes inserted;
- ``reset`` (host to board only): a RESET command slipped in before or after
  the host's bytes, so the board really resets in the middle of a command;
- ``silence``: the board stops answering: nothing passes either way for a
  while.

:attr:`FaultProxy.counts` tells how many of each were injected.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import struct
import threading
import time
from collections import Counter
from urllib.parse import urlparse

from rlx_edge.hil import protocol as P
from rlx_edge.hil.transport import HilError

FAULT_KINDS = ("bitflip", "drop", "duplicate", "truncate", "garbage", "reset", "silence")


def _host_port(url: str) -> tuple[str, int]:
    u = urlparse(url)
    if u.scheme != "socket" or not u.hostname or not u.port:
        raise HilError(f"the fault proxy needs a socket://HOST:PORT upstream, not {url!r}")
    return u.hostname, u.port


def _ends_inside_frame(data: bytes) -> bool:
    """Whether the last frame in ``data`` is still missing bytes (by its header's length field)."""
    i = data.find(P.SOF)
    while i >= 0:
        head = data[i + len(P.SOF) : i + P.HEADER_BYTES]
        if len(head) < P.HEADER_BYTES - len(P.SOF):
            return True
        if P.crc8(head[:-1]) == head[-1]:
            (length,) = struct.unpack_from("<H", head, 2)
            end = i + P.HEADER_BYTES + length + P.CRC_BYTES
            if end > len(data):
                return True
            i = data.find(P.SOF, end)
        else:  # not a frame start: noise that looked like one
            i = data.find(P.SOF, i + 1)
    return data.endswith(P.SOF[:1])


class FaultProxy:
    """Forwards a TCP byte stream both ways, injecting faults with probability ``rate`` per chunk.

    ``kinds`` weights the fault kinds (a name -> weight mapping, or a
    sequence of names weighted equally). ``silence_s`` is how long the board
    stays silent. ``connect_timeout`` bounds connecting to the upstream
    (QEMU listens a moment after it starts).
    """

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.1,
        kinds: dict[str, float] | tuple[str, ...] | list[str] = FAULT_KINDS,
        seed: int = 0,
        silence_s: float = 0.3,
        connect_timeout: float = 10.0,
    ):
        self.upstream = _host_port(upstream)
        weights = dict(kinds) if isinstance(kinds, dict) else dict.fromkeys(kinds, 1.0)
        unknown = set(weights) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        self._kinds = list(weights)
        self._weights = [weights[k] for k in self._kinds]
        self.rate = rate
        self.silence_s = silence_s
        self.connect_timeout = connect_timeout
        self.counts: Counter[str] = Counter()
        self.enabled = True
        """Faults are injected only while this is true (bytes always pass)."""
        self._rng = random.Random(seed)
        self._silent_until = 0.0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def silence(self, seconds: float) -> None:
        """Makes the board unreachable for ``seconds`` (counted as a fault)."""
        with self._lock:
            self._silent_until = time.monotonic() + seconds
            self.counts["silence"] += 1

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._serve, name="rlx-fault-proxy", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        with contextlib.suppress(OSError):
            self._listener.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the proxy thread -------------------------------------------------------
    def _connect_upstream(self) -> socket.socket:
        deadline = time.monotonic() + self.connect_timeout
        while True:
            try:
                s = socket.create_connection(self.upstream, timeout=1.0)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                time.sleep(0.01)

    def _serve(self) -> None:
        client = board = None
        try:
            self._listener.settimeout(0.1)
            while not self._stop.is_set():
                try:
                    client, _ = self._listener.accept()
                    break
                except TimeoutError:
                    continue
            if client is None:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            board = self._connect_upstream()
            peer = {client: board, board: client}
            while not self._stop.is_set():
                ready, _, _ = select.select([client, board], [], [], 0.05)
                for s in ready:
                    data = self._recv_burst(s)
                    if not data:
                        return
                    to_board = s is client
                    for chunk in self._mangle(data, to_board):
                        peer[s].sendall(chunk)
        except BaseException as e:  # reported to the test through .error
            self.error = e
        finally:
            for s in (client, board):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _recv_burst(self, s: socket.socket) -> bytes:
        """What ``s`` sends in one burst: QEMU writes its UART byte by byte (a
        TCP segment each), so bytes that follow within 2 ms are gathered, and
        the rest of a frame cut short within 50 ms (a loaded emulator pauses
        inside long answers), so that a fault rate applies per message rather
        than per byte or per pause."""
        data = s.recv(65536)
        while data:
            more, _, _ = select.select([s], [], [], 0.05 if _ends_inside_frame(data) else 0.002)
            if not more:
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

    def _mangle(self, data: bytes, to_board: bool) -> list[bytes]:
        """The bytes to forward in place of ``data`` (in order; several writes for an injected frame)."""
        with self._lock:
            if time.monotonic() < self._silent_until:
                return []
            rng = self._rng
            if not self.enabled or rng.random() >= self.rate:
                return [data]
            kind = rng.choices(self._kinds, self._weights)[0]
            if kind == "reset" and not to_board:
                kind = "bitflip"
            self.counts[kind] += 1
            b = bytearray(data)
            n = len(b)
            i = rng.randrange(n)
            if kind == "bitflip":
                b[i] ^= 1 << rng.randrange(8)
            elif kind == "drop":
                del b[i : i + rng.randint(1, 4)]
            elif kind == "duplicate":
                j = min(n, i + rng.randint(1, 16))
                b[i:i] = b[i:j]
            elif kind == "truncate":
                del b[i:]
            elif kind == "garbage":
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 24)))
            elif kind == "reset":
                # Sequence number 0 is never a host's: the answer is ignored.
                reset = P.encode(P.RESET, 0)
                return [reset, bytes(b)] if rng.random() < 0.5 else [bytes(b), reset]
            elif kind == "silence":
                self._silent_until = time.monotonic() + self.silence_s
                return []
            return [bytes(b)]
