"""The host side of the HIL protocol: commands with timeouts, bounded retries and end-to-end checks.

Every command is sent as one frame with a fresh sequence number and waits for
the answer carrying that number; frames with another number (late answers to
earlier attempts) are skipped. A command is sent again, with the same number,
when its attempt times out or the board reports a transmission error, at most
``retries`` times. Retrying is safe because every command is idempotent:
WRITE_INPUT writes at an offset, RUN recomputes the same output, READ_OUTPUT
reads.

:meth:`HilClient.infer` adds checks across commands, so a corrupted or stale
result is never returned: the RUN answer carries the CRC-32 of the input the
board ran on and of the output it produced, the host compares both with what
it sent and what it read back, and a board reset in between (a BOOT frame,
or READ_OUTPUT refused for want of a run) restarts the inference.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from dataclasses import asdict, dataclass

import numpy as np

from rlx_edge.hil import protocol as P
from rlx_edge.hil.transport import HilError, HilLinkError, HilTimeout, Transport


class HilProtocolError(HilError):
    """The board answered with something the protocol does not allow (wrong firmware?)."""


class HilCommandError(HilError):
    """The board refused a command (bad offset, unknown command): retrying cannot help."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class HilBoardReset(HilError):
    """The board reset while a multi-command operation was under way; its state is gone."""


class HilResultError(HilError):
    """An end-to-end check failed: the input or output the board reports differs from what was sent or read."""


@dataclass
class ClientStats:
    commands: int = 0
    retries: int = 0
    timeouts: int = 0
    board_errors: int = 0
    damaged_answers: int = 0
    """Frames from the board dropped for a bad header or CRC."""
    """ERROR frames for transmission errors (CRC, header, length) the board saw."""
    boots: int = 0
    """BOOT frames seen: board resets."""
    restarts: int = 0
    """Inferences started over after an end-to-end check or a reset."""
    bytes_sent: int = 0
    bytes_received: int = 0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class InferResult:
    status: int
    """What the model returned (0 is success)."""
    ticks: int
    """Cycles (DWT) or SysTick ticks the model call took."""
    tick_source: str
    output: bytes


class HilClient:
    """Talks to the firmware's HIL server over ``port`` (a pyserial URL or an open :class:`Transport`).

    ``timeout`` bounds each attempt of a command (seconds); ``run_timeout``
    bounds one inference once the board has acknowledged RUN; ``retries`` is
    how many times an attempt is repeated. So no call blocks longer than
    ``(retries + 1) * timeout`` (plus ``run_timeout`` for RUN).

    Once runs have been timed, an acknowledged RUN whose answer is overdue
    (twice the longest run seen, plus ``timeout``) is sent again rather than
    waited for up to ``run_timeout``: an answer lost on the wire would
    otherwise cost the whole ``run_timeout``. Sending RUN again is safe (it
    recomputes the same output; the run's CRCs are checked end to end).
    """

    def __init__(
        self,
        port: str | Transport,
        *,
        baudrate: int = 115200,
        timeout: float = 2.0,
        run_timeout: float = 60.0,
        retries: int = 4,
        restarts: int = 3,
    ):
        self.transport = port if isinstance(port, Transport) else Transport(port, baudrate=baudrate)
        self.url = self.transport.url
        self.timeout = float(timeout)
        self.run_timeout = float(run_timeout)
        self.retries = int(retries)
        self.restarts = int(restarts)
        self.info: P.BoardInfo | None = None
        self.stats = ClientStats()
        self._decoder = P.FrameDecoder()
        self._frames: deque[P.Frame] = deque()
        self._seq = 0
        self._heard = False
        """Whether any valid frame came from the board on this link."""
        self._stalls = 0
        self._longest_run: float | None = None
        """Seconds from BUSY to the RUN answer, the longest seen on this link."""
        self.console = bytearray()
        """Bytes that were not frames (text a fault handler printed, noise), last 4 KB."""

    # -- lifetime -----------------------------------------------------------
    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> HilClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- commands -------------------------------------------------------------
    def hello(self) -> P.BoardInfo:
        """Identifies the firmware: protocol version, model, sizes, shapes, clock."""
        info = P.parse_hello(self._command(P.HELLO))
        if info.version != P.VERSION:
            raise HilProtocolError(
                f"{self.url}: firmware speaks HIL protocol version {info.version}, this host {P.VERSION}; "
                "rebuild and flash the firmware"
            )
        self.info = info
        return info

    def write_input(self, data: bytes) -> None:
        info = self._info()
        if len(data) != info.input_bytes:
            raise HilError(f"input has {len(data)} bytes; the firmware's model takes {info.input_bytes}")
        chunk = min(info.max_payload, P.MAX_PAYLOAD) - P.WRITE_HEADER_BYTES
        for off in range(0, len(data), chunk):
            part = data[off : off + chunk]
            (end,) = self._unpack("<I", self._command(P.WRITE_INPUT, struct.pack("<I", off) + part), "WRITE_INPUT")
            if end != off + len(part):
                raise HilProtocolError(f"{self.url}: WRITE_INPUT at {off} acknowledged up to {end}")

    def run(self) -> P.RunAnswer:
        """Runs the model on the input written last; status, ticks and the CRCs of input and output."""
        return P.parse_run(self._command(P.RUN))

    def read_output(self) -> tuple[bytes, int]:
        """The output of the last run, and the run id every chunk carried."""
        info = self._info()
        chunk = min(info.max_payload, P.MAX_PAYLOAD) - P.READ_HEADER_BYTES
        out = bytearray()
        run_ids = set()
        for off in range(0, info.output_bytes, chunk):
            n = min(chunk, info.output_bytes - off)
            payload = self._command(P.READ_OUTPUT, struct.pack("<IH", off, n))
            if len(payload) != P.READ_HEADER_BYTES + n:
                raise HilProtocolError(f"{self.url}: READ_OUTPUT of {n} bytes answered with {len(payload)}")
            run_id, got_off = struct.unpack_from("<II", payload)
            if got_off != off:
                raise HilProtocolError(f"{self.url}: READ_OUTPUT at {off} answered for offset {got_off}")
            run_ids.add(run_id)
            out += payload[P.READ_HEADER_BYTES :]
        if len(run_ids) > 1:
            raise HilResultError(f"{self.url}: output chunks came from different runs {sorted(run_ids)}")
        return bytes(out), run_ids.pop() if run_ids else 0

    def reset(self, *, wait: bool = True) -> None:
        """Resets the board (a system reset); with ``wait``, waits for it to boot and identify itself."""
        boots = self.stats.boots
        self._command(P.RESET)
        if not wait:
            return
        deadline = time.monotonic() + self.timeout * (self.retries + 1)
        while self.stats.boots == boots and time.monotonic() < deadline:
            self._pump(deadline)
        self.hello()

    def exit(self, status: int = 0) -> None:
        """Asks the firmware to stop with ``status`` (QEMU exits with it; a real board halts)."""
        self._command(P.EXIT, struct.pack("<i", status))

    def infer(self, data: bytes | np.ndarray) -> InferResult:
        """One inference: writes the input, runs, reads the output, checking it end to end.

        Restarted from the write (at most ``restarts`` times) when the board
        reset meanwhile or a CRC of the input or output disagrees.
        """
        raw = np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data)
        want_in = P.crc32(raw)
        problem = ""
        for attempt in range(self.restarts + 1):
            if attempt:
                self.stats.restarts += 1
            boots = self.stats.boots
            try:
                self.write_input(raw)
                ran = self.run()
                if ran.input_crc != want_in:
                    problem = "the input the board ran on differs from the input sent"
                    continue
                out, _ = self.read_output()
            except HilCommandError as e:
                if e.code != P.E_NO_OUTPUT:
                    raise
                problem = "the board lost its output (reset between RUN and READ_OUTPUT)"
                continue
            except HilBoardReset as e:
                problem = str(e)
                continue
            if self.stats.boots != boots:
                problem = "the board reset during the inference"
                continue
            if P.crc32(out) != ran.output_crc:
                problem = "the output read back differs from the output the board computed"
                continue
            return InferResult(ran.status, ran.ticks, ran.tick_source, out)
        raise HilResultError(f"{self.url}: inference failed {self.restarts + 1} times; last: {problem}")

    def exchange(self, data: bytes, *, seq: int | None = None, wait: float = 1.0) -> list[P.Frame]:
        """Sends raw bytes (a hand-made, possibly malformed frame) and returns the frames that came back.

        Waits until a frame with sequence number ``seq`` arrives or ``wait``
        seconds pass. For testing the firmware's defenses; no retries.
        """
        self.transport.write(data)
        deadline = time.monotonic() + wait
        got: list[P.Frame] = []
        while self._pump(deadline):
            while self._frames:
                f = self._frames.popleft()
                got.append(f)
                if seq is not None and f.seq == seq and f.type != P.BUSY:
                    return got
        return got

    # -- plumbing -------------------------------------------------------------
    def _info(self) -> P.BoardInfo:
        if self.info is None:
            self.hello()
        assert self.info is not None
        return self.info

    def _unpack(self, fmt: str, payload: bytes, what: str) -> tuple:
        if len(payload) != struct.calcsize(fmt):
            raise HilProtocolError(f"{self.url}: {what} answer has {len(payload)} bytes")
        return struct.unpack(fmt, payload)

    def _next_seq(self) -> int:
        # 0 is the BOOT frame's: never used for a command.
        self._seq = self._seq % 255 + 1
        return self._seq

    def _run_wait(self) -> float:
        """How long to wait for a RUN answer after BUSY."""
        if self._longest_run is None:
            return self.run_timeout
        return min(self.run_timeout, 2 * self._longest_run + self.timeout)

    def _damage(self) -> int:
        s = self._decoder.stats
        return s.bad_headers + s.bad_crcs + s.too_long + self._stalls

    def _pump(self, deadline: float, damage: int | None = None) -> bool:
        """Reads until ``deadline``, until frames arrive or (with ``damage``, the
        damaged-frame count to compare with) until a damaged frame was dropped;
        False when no frame came.

        A frame whose bytes stop coming for ``gap`` seconds was truncated on
        the way (a board sends a frame without pauses): it is dropped and
        counted as damage, so the command is retried without waiting out
        the whole timeout.
        """
        if self._frames:
            return True
        gap = min(0.05, self.timeout / 2)
        last = time.monotonic()
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or (damage is not None and self._damage() > damage):
                return False
            data = self.transport.read_some(min(left, gap, 0.5))
            if not data:
                if self._decoder.pending() and time.monotonic() - last >= gap:
                    self._decoder.clear()
                    self._stalls += 1
                continue
            last = time.monotonic()
            self.stats.bytes_received += len(data)
            garbage = self._decoder.stats.garbage_bytes
            for f in self._decoder.feed(data):
                self._heard = True
                if f.type == P.BOOT:
                    self.stats.boots += 1
                self._frames.append(f)
            if self._decoder.stats.garbage_bytes > garbage:
                # Text the firmware printed outside frames (a fault report).
                self.console += data
                del self.console[:-4096]
            if self._frames:
                return True

    def _command(self, cmd: int, payload: bytes = b"") -> bytes:
        name = P.COMMAND_NAMES.get(cmd, hex(cmd))
        seq = self._next_seq()
        frame = P.encode(cmd, seq, payload)
        self.stats.commands += 1
        problem = f"no answer after {self.timeout:g} s"
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats.retries += 1
            boots = self.stats.boots
            damage = self._damage()
            self.transport.write(frame)
            self.stats.bytes_sent += len(frame)
            deadline = time.monotonic() + self.timeout
            busy_at: float | None = None
            while True:
                if not self._pump(deadline, damage):
                    if self._damage() > damage:
                        # Probably our answer, damaged on the way: ask again
                        # now instead of waiting out the timeout.
                        self.stats.damaged_answers += 1
                        problem = "the answer arrived damaged"
                    else:
                        self.stats.timeouts += 1
                        problem = f"no answer after {self.timeout:g} s"
                    break
                f = self._frames.popleft()
                if f.type == P.BOOT:
                    if cmd in (P.RESET, P.HELLO):
                        continue
                    # The command (and whatever state it relied on) was lost
                    # with the reset: resend at once rather than time out.
                    problem = "the board reset"
                    break
                if f.seq != seq:
                    continue  # a late answer to an earlier command
                if f.type == P.ERROR:
                    code, _, msg = P.parse_error(f.payload)
                    if code in P.TRANSIENT_ERRORS:
                        self.stats.board_errors += 1
                        problem = f"the board saw a damaged frame ({P.ERROR_NAMES.get(code, code)})"
                        break
                    raise HilCommandError(f"{self.url}: {name} refused: {msg} ({P.ERROR_NAMES.get(code, code)})", code)
                if f.type == P.BUSY and cmd == P.RUN:
                    busy_at = time.monotonic()
                    deadline = busy_at + self._run_wait()
                    continue
                if f.type == (cmd | P.ANSWER):
                    if cmd == P.RUN and busy_at is not None:
                        took = time.monotonic() - busy_at
                        self._longest_run = max(self._longest_run or 0.0, took)
                    if self.stats.boots != boots and cmd not in (P.RESET, P.HELLO):
                        # Answered, then reset (or reset, then answered a
                        # retry): the caller's multi-command state is gone.
                        raise HilBoardReset(f"{self.url}: the board reset during {name}")
                    return f.payload
                if f.type == cmd and f.payload == payload:
                    raise HilProtocolError(
                        f"{self.url} echoes what is sent (a loopback or an echoing terminal), not a board"
                    )
                # Our sequence number on a frame of another type: a corrupted
                # stream cannot produce it (CRC), so the firmware is not ours.
                raise HilProtocolError(f"{self.url}: {name} answered with frame type {f.type:#04x}")
        if not self._heard:
            raise HilTimeout(
                f"no answer from {self.url} after {self.timeout:g} s — is the firmware flashed and running? "
                f"({self.retries + 1} attempts of {name})"
            )
        raise HilTimeout(f"{self.url}: {name} failed after {self.retries + 1} attempts; last: {problem}")


def open_client(port: str, **kwargs) -> HilClient:
    """A client on ``port`` that has identified the firmware (HELLO answered)."""
    client = HilClient(port, **kwargs)
    try:
        client.hello()
    except BaseException:
        client.close()
        raise
    return client


__all__ = [
    "ClientStats",
    "HilBoardReset",
    "HilClient",
    "HilCommandError",
    "HilError",
    "HilLinkError",
    "HilProtocolError",
    "HilResultError",
    "HilTimeout",
    "InferResult",
    "open_client",
]
