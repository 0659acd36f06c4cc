"""The HIL wire protocol: frames, checksums, command payloads (host side).

The firmware's copy is ``firmware/hil/rlx_hil.h``; a test
keeps the numbers here equal to its ``#define``s. A frame (little-endian)::

    A5 5A | type | seq | len (u16) | CRC-8 of type..len | payload | CRC-32 of type..payload

:class:`FrameDecoder` parses a byte stream into frames, skipping garbage and
re-scanning after a broken frame, so a host resynchronizes after noise,
dropped or duplicated bytes without any out-of-band signal.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 1
SOF = b"\xa5\x5a"
HEADER_BYTES = 7
CRC_BYTES = 4
MAX_PAYLOAD = 1024

HELLO = 0x01
WRITE_INPUT = 0x02
RUN = 0x03
READ_OUTPUT = 0x04
RESET = 0x05
EXIT = 0x06
ANSWER = 0x80
BUSY = 0x70
BOOT = 0x7E
ERROR = 0x7F

E_CRC = 1
E_HEADER = 2
E_TOO_LONG = 3
E_UNKNOWN = 4
E_LENGTH = 5
E_RANGE = 6
E_NO_OUTPUT = 7

TICKS_SYSTICK = 0
TICKS_DWT = 1
TICK_SOURCES = {TICKS_SYSTICK: "systick", TICKS_DWT: "dwt-cyccnt"}

COMMAND_NAMES = {
    HELLO: "HELLO",
    WRITE_INPUT: "WRITE_INPUT",
    RUN: "RUN",
    READ_OUTPUT: "READ_OUTPUT",
    RESET: "RESET",
    EXIT: "EXIT",
}
ERROR_NAMES = {
    E_CRC: "crc",
    E_HEADER: "header",
    E_TOO_LONG: "too-long",
    E_UNKNOWN: "unknown-command",
    E_LENGTH: "length",
    E_RANGE: "range",
    E_NO_OUTPUT: "no-output",
}
# Errors caused by the wire (retrying the same command may succeed), as
# opposed to errors in what the host asked (retrying cannot help).
TRANSIENT_ERRORS = frozenset({E_CRC, E_HEADER, E_TOO_LONG})

READ_HEADER_BYTES = 8  # run id and offset in front of READ_OUTPUT data
WRITE_HEADER_BYTES = 4  # offset in front of WRITE_INPUT data


def crc8(data: bytes) -> int:
    """CRC-8, polynomial 0x07, initial value 0 (the header check)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3), the same as zlib's and the firmware's."""
    return zlib.crc32(data) & 0xFFFFFFFF


def encode(type_: int, seq: int, payload: bytes = b"") -> bytes:
    """One frame carrying ``payload``."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds the maximum of {MAX_PAYLOAD}")
    fields = struct.pack("<BBH", type_ & 0xFF, seq & 0xFF, len(payload))
    head = fields + bytes([crc8(fields)])
    return SOF + head + payload + struct.pack("<I", crc32(head + payload))


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int
    payload: bytes


@dataclass
class DecoderStats:
    garbage_bytes: int = 0
    """Bytes skipped while hunting for a start of frame."""
    bad_headers: int = 0
    bad_crcs: int = 0
    too_long: int = 0


@dataclass
class FrameDecoder:
    """Turns a byte stream into :class:`Frame`\\ s.

    Feed it whatever arrived; it returns the complete, valid frames. A frame
    whose header or CRC fails is dropped and the stream is re-scanned from
    the byte after its start of frame, so a real frame hidden inside a broken
    one (a truncated frame followed by the next) is still found.
    """

    max_payload: int = MAX_PAYLOAD
    stats: DecoderStats = field(default_factory=DecoderStats)
    _buf: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames = []
        buf = self._buf
        while True:
            start = buf.find(SOF)
            if start < 0:
                # Keep a trailing A5: it may be the first half of a start.
                keep = 1 if buf[-1:] == SOF[:1] else 0
                self.stats.garbage_bytes += len(buf) - keep
                del buf[: len(buf) - keep]
                break
            if start:
                self.stats.garbage_bytes += start
                del buf[:start]
            if len(buf) < HEADER_BYTES:
                break
            head = bytes(buf[2:7])
            if crc8(head[:4]) != head[4]:
                self.stats.bad_headers += 1
                del buf[:2]
                continue
            n = head[2] | head[3] << 8
            if n > self.max_payload:
                self.stats.too_long += 1
                del buf[:2]
                continue
            total = HEADER_BYTES + n + CRC_BYTES
            if len(buf) < total:
                break
            payload = bytes(buf[HEADER_BYTES : HEADER_BYTES + n])
            (crc,) = struct.unpack_from("<I", buf, HEADER_BYTES + n)
            if crc != crc32(head + payload):
                self.stats.bad_crcs += 1
                del buf[:2]
                continue
            frames.append(Frame(head[0], head[1], payload))
            del buf[:total]
        return frames

    def pending(self) -> int:
        """Bytes held back as the beginning of a frame not complete yet."""
        return len(self._buf)

    def clear(self) -> None:
        self._buf.clear()


# ---- payloads ---------------------------------------------------------------


class PayloadError(ValueError):
    """A payload that passed its CRC but does not have the layout of its type."""


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise PayloadError(f"payload ends after {len(self.data)} bytes; {n} more expected at {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def string(self) -> str:
        (n,) = self.unpack("<B")
        return self.take(n).decode("utf-8", "replace")

    def done(self) -> None:
        if self.pos != len(self.data):
            raise PayloadError(f"{len(self.data) - self.pos} unexpected bytes at the end of the payload")


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    scale: float | None
    zero_point: int | None

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "shape": list(self.shape), "scale": self.scale, "zero_point": self.zero_point}


@dataclass(frozen=True)
class BoardInfo:
    """What HELLO returns: the firmware's identity, buffer sizes and clock."""

    version: int
    max_payload: int
    input_bytes: int
    output_bytes: int
    arena_bytes: int
    core_hz: int
    tick_source: str
    model_hash: str
    model_name: str
    core: str
    input: TensorInfo
    output: TensorInfo

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("input", "output")}
        return {**d, "input": self.input.to_json(), "output": self.output.to_json()}


def _tensor(r: _Reader) -> TensorInfo:
    dtype = r.string()
    (rank,) = r.unpack("<B")
    shape = r.unpack(f"<{rank}I") if rank else ()
    has_quant, scale, zp = r.unpack("<Bfi")
    return TensorInfo(dtype, tuple(shape), float(scale) if has_quant else None, int(zp) if has_quant else None)


def parse_hello(payload: bytes) -> BoardInfo:
    r = _Reader(payload)
    version, max_payload, nin, nout, arena, hz, ticks = r.unpack("<HHIIIIB")
    info = BoardInfo(
        version,
        max_payload,
        nin,
        nout,
        arena,
        hz,
        TICK_SOURCES.get(ticks, f"unknown-{ticks}"),
        r.string(),
        r.string(),
        r.string(),
        _tensor(r),
        _tensor(r),
    )
    r.done()
    return info


@dataclass(frozen=True)
class RunAnswer:
    status: int
    run_id: int
    tick_source: str
    ticks: int
    input_crc: int
    output_crc: int


def parse_run(payload: bytes) -> RunAnswer:
    r = _Reader(payload)
    status, run_id, src, ticks, in_crc, out_crc = r.unpack("<iIBQII")
    r.done()
    return RunAnswer(status, run_id, TICK_SOURCES.get(src, f"unknown-{src}"), ticks, in_crc, out_crc)


def parse_error(payload: bytes) -> tuple[int, int, str]:
    """(code, offending command type, message) of an ERROR frame."""
    if len(payload) < 2:
        return (0, 0, payload.decode("latin-1"))
    return payload[0], payload[1], payload[2:].decode("utf-8", "replace")
