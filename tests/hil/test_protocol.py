"""The HIL frame format on the host: encoding, decoding, resynchronization, the C header's numbers, link errors."""

from __future__ import annotations

import random
import re
import socket
import threading
import time

import pytest

from rlx_edge.hil import protocol as P
from rlx_edge.hil.client import HilClient, HilProtocolError
from rlx_edge.hil.transport import HilLinkError, HilTimeout
from rlx_edge.targets.cortexm import firmware_dir


def test_c_header_agrees_with_python():
    text = (firmware_dir() / "hil" / "rlx_hil.h").read_text()
    defs = {m[1]: int(m[2], 0) for m in re.finditer(r"#define RLX_HIL_(\w+) (0x[0-9A-Fa-f]+|\d+)u", text)}
    names = {
        "VERSION": P.VERSION, "HEADER_BYTES": P.HEADER_BYTES, "CRC_BYTES": P.CRC_BYTES,
        "MAX_PAYLOAD": P.MAX_PAYLOAD, "HELLO": P.HELLO, "WRITE_INPUT": P.WRITE_INPUT, "RUN": P.RUN,
        "READ_OUTPUT": P.READ_OUTPUT, "RESET": P.RESET, "EXIT": P.EXIT, "ANSWER": P.ANSWER, "BUSY": P.BUSY,
        "BOOT": P.BOOT, "ERROR": P.ERROR, "E_CRC": P.E_CRC, "E_HEADER": P.E_HEADER, "E_TOO_LONG": P.E_TOO_LONG,
        "E_UNKNOWN": P.E_UNKNOWN, "E_LENGTH": P.E_LENGTH, "E_RANGE": P.E_RANGE, "E_NO_OUTPUT": P.E_NO_OUTPUT,
        "TICKS_SYSTICK": P.TICKS_SYSTICK, "TICKS_DWT": P.TICKS_DWT,
    }  # fmt: skip
    assert {k: defs[k] for k in names} == names
    assert bytes([defs["SOF0"], defs["SOF1"]]) == P.SOF


def test_checksums_match_known_values():
    assert P.crc32(b"123456789") == 0xCBF43926
    assert P.crc8(b"123456789") == 0xF4  # CRC-8/SMBUS check value


def test_round_trip_and_byte_by_byte():
    big = (bytes(range(256)) * 4)[: P.MAX_PAYLOAD]
    frames = [P.encode(1, 1), P.encode(0x82, 9, b"\x00abc\xa5"), P.encode(3, 255, big)]
    stream = b"".join(frames)
    d = P.FrameDecoder()
    got = [f for b in stream for f in d.feed(bytes([b]))]
    assert [(f.type, f.seq) for f in got] == [(1, 1), (0x82, 9), (3, 255)]
    assert got[1].payload == b"\x00abc\xa5"
    assert got[2].payload == big
    assert d.pending() == 0


def test_oversized_payload_is_refused():
    with pytest.raises(ValueError, match="exceeds"):
        P.encode(P.WRITE_INPUT, 1, bytes(P.MAX_PAYLOAD + 1))


def test_resync_after_garbage_and_damage():
    rng = random.Random(3)
    want = [P.encode(P.HELLO | P.ANSWER, k, bytes(rng.randrange(256) for _ in range(k * 7))) for k in range(1, 40)]
    stream = bytearray()
    for k, f in enumerate(want):
        stream += bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20)))  # noise
        if k % 5 == 1:
            stream += f[: rng.randrange(2, len(f))]  # a truncated copy first
        if k % 7 == 3:
            bad = bytearray(f)
            bad[rng.randrange(2, len(bad))] ^= 1 << rng.randrange(8)
            stream += bad  # a damaged copy first
        stream += f
    d = P.FrameDecoder()
    got = d.feed(bytes(stream))
    # Every intact frame is found; damaged and truncated copies never pass.
    assert [f.seq for f in got] == list(range(1, 40))
    assert [P.encode(f.type, f.seq, f.payload) for f in got] == want
    assert d.stats.garbage_bytes > 0
    assert d.stats.bad_crcs + d.stats.bad_headers > 0


def test_bit_flips_are_always_detected():
    f = P.encode(P.READ_OUTPUT | P.ANSWER, 7, bytes(range(100)))
    for i in range(2, len(f)):
        for bit in range(8):
            bad = bytearray(f)
            bad[i] ^= 1 << bit
            assert P.FrameDecoder().feed(bytes(bad)) == [], (i, bit)


def test_payload_parsers_reject_bad_layouts():
    with pytest.raises(P.PayloadError):
        P.parse_run(b"\x00" * 10)
    with pytest.raises(P.PayloadError):
        P.parse_hello(b"\x01\x00")


class _SilentServer:
    """A TCP server that accepts and never answers: a port with nothing behind it."""

    def __init__(self, echo=False):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.sock.getsockname()[1]}"
        self.echo = echo
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.echo:
                threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c):
        while data := c.recv(4096):
            c.sendall(data)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def test_silent_port_is_a_clear_timeout():
    srv = _SilentServer()
    try:
        client = HilClient(srv.url, timeout=0.2, retries=2)
        t0 = time.monotonic()
        with pytest.raises(
            HilTimeout, match=r"no answer from socket://127\.0\.0\.1:\d+ after 0\.2 s — is the firmware"
        ):
            client.hello()
        # Three attempts of 0.2 s, not a hang.
        assert 0.55 < time.monotonic() - t0 < 2.0
        client.close()
    finally:
        srv.close()


def test_loopback_is_not_a_board():
    # loop:// returns what is written: the client sees its own HELLO command.
    client = HilClient("loop://", timeout=0.2, retries=1)
    with pytest.raises(HilProtocolError, match="echoes"):
        client.hello()
    client.close()


def test_unopenable_port_is_a_link_error():
    with pytest.raises(HilLinkError, match="cannot open /dev/no-such-tty"):
        HilClient("/dev/no-such-tty")
