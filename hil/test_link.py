"""The HIL protocol against a board: identity, refusal of malformed commands, random frames, reset.

Runs on whatever --board names (QEMU by default); nothing here may leave the
board unable to compute the right answer afterwards.
"""

from __future__ import annotations

import contextlib
import random
import struct

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil import protocol as P
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.flash import flash
from rlx_edge.hil.qemu import open_uart
from rlx_edge.hil.transport import Transport
from rlx_edge.targets.cortexm import QemuBoard, build_model_firmware
from rlx_edge.targets.reference import run

MODEL = MLPERF / "ad01_int8.tflite"


# Module scope: a labgrid place (--places/--farm) is shared with the campaigns,
# which flash it with their own models; a link test run after one of them
# gets the AD firmware flashed again.
@pytest.fixture(scope="module")
def link(hil_board, hil_place, hil_options, firmware_cache):
    """A client on the board running the AD model's firmware, plus the graph and build report."""
    graph = load_tflite(MODEL)
    elf, build = build_model_firmware(graph, hil_board, firmware_cache)
    qemu = None
    port = hil_options["port"] or hil_board.console.port
    with contextlib.ExitStack() as on_place:
        if hil_place is not None:
            url = on_place.enter_context(hil_place.running(elf))
            transport = Transport(url, baudrate=hil_place.board.console.baudrate)
        elif hil_board.is_qemu and hil_options["port"] is None:
            qemu = QemuBoard(elf, hil_board)
            qemu.start()
            transport = open_uart(qemu)
        else:
            if not hil_board.is_qemu and hil_options["flash"]:
                flash(elf, hil_board, probe=hil_options["probe"])
            transport = Transport(port, baudrate=hil_board.console.baudrate)
        client = HilClient(transport, timeout=2.0, run_timeout=30.0)
        try:
            client.hello()
            yield client, graph, build
        finally:
            client.close()
            if qemu is not None:
                qemu.close()


def _check_inference(client, graph, seed=0):
    rng = np.random.default_rng(seed)
    t = graph.types[graph.inputs[0]]
    x = rng.integers(-128, 128, size=tuple(int(d) for d in t.shape), dtype=np.int8)
    r = client.infer(x)
    want = run(graph, {graph.inputs[0]: x})[graph.outputs[0]]
    assert r.status == 0
    assert r.output == np.ascontiguousarray(want).tobytes()


def test_identity(link, hil_board):
    client, graph, build = link
    info = client.hello()
    assert info.version == P.VERSION
    assert info.model_hash == build["model_hash"]
    assert info.model_name == graph.name
    assert info.core == hil_board.core
    assert info.core_hz == hil_board.clock_hz
    t_in = graph.types[graph.inputs[0]]
    assert info.input.shape == tuple(int(d) for d in t_in.shape)
    assert info.input.zero_point == int(t_in.quant.zero_point[0])
    assert info.input.scale == pytest.approx(float(t_in.quant.scale[0]), rel=1e-6)
    assert info.input_bytes == int(np.prod(info.input.shape))
    assert info.arena_bytes == build["arena_bytes"]


def _answer(client, type_, payload=b"", seq=77, raw=None):
    frames = client.exchange(raw if raw is not None else P.encode(type_, seq, payload), seq=seq, wait=2.0)
    mine = [f for f in frames if f.seq == seq and f.type != P.BUSY]
    assert mine, f"no answer to {type_:#x} {payload[:16].hex()}"
    return mine[-1]


def _error_code(frame):
    assert frame.type == P.ERROR, f"expected an error frame, got type {frame.type:#x}"
    return P.parse_error(frame.payload)[0]


def test_malformed_commands_are_refused(link):
    client, graph, _ = link
    info = client.hello()
    n_in, n_out = info.input_bytes, info.output_bytes
    _check_inference(client, graph)  # so READ_OUTPUT has an output to refuse reads of
    cases = [
        (P.WRITE_INPUT, struct.pack("<I", n_in) + b"\x01", P.E_RANGE),  # one past the end
        (P.WRITE_INPUT, struct.pack("<I", n_in - 1) + b"\x01\x02", P.E_RANGE),  # straddles the end
        (P.WRITE_INPUT, struct.pack("<I", 0xFFFFFFFF) + b"\x00" * 8, P.E_RANGE),  # offset + n wraps around
        (P.WRITE_INPUT, b"\x00\x00\x00", P.E_LENGTH),
        (P.WRITE_INPUT, struct.pack("<I", 0), P.E_LENGTH),  # no data
        (P.READ_OUTPUT, struct.pack("<IH", 0, 0), P.E_RANGE),
        (P.READ_OUTPUT, struct.pack("<IH", 0, P.MAX_PAYLOAD), P.E_RANGE),  # more than a frame holds
        (P.READ_OUTPUT, struct.pack("<IH", n_out, 1), P.E_RANGE),
        (P.READ_OUTPUT, struct.pack("<IH", 0xFFFFFFFF, 2), P.E_RANGE),
        (P.READ_OUTPUT, struct.pack("<I", 0), P.E_LENGTH),
        (P.HELLO, b"\x00", P.E_LENGTH),
        (P.RUN, b"\x00", P.E_LENGTH),
        (P.RESET, b"\x00", P.E_LENGTH),  # must not reset
        (P.EXIT, b"\x00", P.E_LENGTH),  # must not exit
        (0x42, b"", P.E_UNKNOWN),
        (P.ERROR, b"", P.E_UNKNOWN),  # the board's own frame types are not commands
    ]
    for type_, payload, code in cases:
        assert _error_code(_answer(client, type_, payload)) == code, (type_, payload.hex())
    # Framing errors: a payload that fails its CRC, a length over the maximum.
    good = bytearray(P.encode(P.HELLO, 78))
    good[-1] ^= 0x40
    assert _error_code(_answer(client, 0, seq=78, raw=bytes(good))) == P.E_CRC
    head = struct.pack("<BBH", P.WRITE_INPUT, 79, 0xFFFF)
    assert _error_code(_answer(client, 0, seq=79, raw=P.SOF + head + bytes([P.crc8(head)]))) == P.E_TOO_LONG
    # A header that fails its check is dropped unanswered, and a frame right
    # behind it (inside its would-be header) is still found.
    broken = P.SOF + bytes([P.HELLO, 80]) + P.encode(P.HELLO, 81)
    assert _answer(client, 0, seq=81, raw=broken).type == P.HELLO | P.ANSWER
    assert client.stats.boots == 1
    _check_inference(client, graph, seed=1)


def test_random_frames_and_noise_do_not_hurt(link):
    client, graph, _ = link
    info = client.hello()
    rng = random.Random(5)
    # Every command type but RESET and EXIT (which would legitimately stop
    # the session), with payloads of random length and content.
    types = [t for t in range(256) if t not in (P.RESET, P.EXIT)]
    answered = 0
    for k in range(300):
        seq = 1 + k % 250
        t = rng.choice(types + [P.WRITE_INPUT, P.READ_OUTPUT] * 40)
        n = rng.choice([0, 1, 2, 4, 5, 6, 7, rng.randrange(1, 64), rng.randrange(64, P.MAX_PAYLOAD + 1)])
        payload = bytes(rng.randrange(256) for _ in range(n))
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 32)))
        frames = client.exchange(noise + P.encode(t, seq, payload), seq=seq, wait=2.0)
        answered += any(f.seq == seq for f in frames)
    # Noise may hide a frame's start now and then; nearly all are answered.
    assert answered >= 290
    assert client.stats.boots == 1
    assert client.hello() == info
    _check_inference(client, graph, seed=2)


def test_reset_command(link):
    client, graph, _ = link
    boots = client.stats.boots
    client.reset()
    assert client.stats.boots == boots + 1
    # The output of the run before the reset is gone.
    frame = _answer(client, P.READ_OUTPUT, struct.pack("<IH", 0, 1), seq=90)
    assert _error_code(frame) == P.E_NO_OUTPUT
    _check_inference(client, graph, seed=3)
