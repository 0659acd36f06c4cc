"""Running Cortex-M firmware under QEMU: model outputs, exit status, exact instruction counts.

The firmware built by :func:`rlx_edge.targets.cortexm_fw.build_firmware`
prints ``RLX READY in=.. out=.. arena=..`` on its console UART and then serves
``I <hex>`` (run one input, answer ``O <status> <ticks> <hex>``) and
``X <status>`` (exit with that status). :class:`QemuSession` boots it once,
with the UART on a local TCP port (QEMU's ``-serial tcp:...,server=on``;
pyserial's ``socket://127.0.0.1:PORT`` reaches the same port), and streams
inputs.

Instruction counts come from a TCG plugin (``rlx_edge/_data/qemu_plugin``)
that is compiled with the host gcc on first use into a cache directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rlx_edge
from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.targets.cortexm_fw._tools import find_tool, run_tool
from rlx_edge.targets.cortexm_fw.boards import Board, get_board


class QemuError(ToolchainError):
    """QEMU failed, or the firmware in it misbehaved (died, spoke garbage)."""


class QemuTimeout(QemuError):
    """The firmware did not answer in time; QEMU has been killed."""


@dataclass(frozen=True)
class InvokeResult:
    status: int
    """What rlx_model_invoke returned (0 is success)."""
    ticks: int
    """SysTick ticks the call took: core cycles on hardware, virtual time under QEMU."""
    output: bytes


@dataclass(frozen=True)
class FirmwareRun:
    returncode: int
    """QEMU's exit status: the firmware's exit status, modulo 256."""
    output: str
    """Everything the firmware wrote on its console UART."""


def _qemu_base_argv(elf: Path, board: Board) -> list[str]:
    if not board.is_qemu:
        raise RlxError(f"board {board.name} is a real board, not a QEMU machine; use a qemu-mps2-* board")
    if not Path(elf).is_file():
        raise RlxError(f"firmware not found: {elf}")
    return [
        find_tool("qemu-system-arm"),
        "-M",
        board.qemu_machine,
        "-nographic",
        "-monitor",
        "none",
        # The runtime exits through semihosting; without this QEMU aborts on
        # the first semihosting call.
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
        str(Path(elf).resolve()),
    ]


def run_firmware(elf: str | os.PathLike, board: str | Board, *, timeout: float = 30.0) -> FirmwareRun:
    """Boots a firmware that runs to completion by itself (a test-vector build, a test program).

    Returns its exit status and console output; kills QEMU and raises
    :class:`QemuTimeout` when it does not exit within ``timeout`` seconds.
    """
    argv = [*_qemu_base_argv(Path(elf), get_board(board)), "-serial", "stdio"]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        # subprocess.run has killed QEMU already.
        raise QemuTimeout(f"firmware {elf} did not exit within {timeout:g} s") from e
    return FirmwareRun(proc.returncode, proc.stdout.decode("latin-1"))


class _TcpLink:
    """The emulated UART as QEMU exposes it: a TCP stream to a local port.

    A plain socket rather than pyserial's ``socket://`` handler, which sleeps
    0.3 s on every close and offers no TCP_NODELAY; the protocol above only
    needs write and read-with-timeout, which a pyserial port to a real board
    provides the same way.
    """

    def __init__(self, port: int):
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        # Each command is one small write answered by a small write: with
        # Nagle's algorithm on either side every exchange would wait for a
        # delayed ACK (40 ms). QEMU's side gets nodelay=on.
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def read(self, timeout: float) -> bytes | None:
        """Whatever arrived within ``timeout`` (maybe b""), or None once QEMU closed the stream."""
        self._sock.settimeout(timeout)
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            return b""
        except OSError:
            return None
        return data or None

    def close(self) -> None:
        self._sock.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuSession:
    """One QEMU boot of a model-runner firmware, fed inputs over its UART.

    Use as a context manager: QEMU is always torn down on exit, and killed if
    it does not stop by itself. Each operation waits at most ``timeout``
    seconds, then kills QEMU and raises :class:`QemuTimeout`.
    """

    def __init__(
        self,
        elf: str | os.PathLike,
        board: str | Board,
        *,
        timeout: float = 30.0,
        plugin: Sequence[str] | None = None,
        extra_args: Sequence[str] = (),
    ):
        self.elf = Path(elf)
        self.board = get_board(board)
        self.timeout = timeout
        self._argv = [*_qemu_base_argv(self.elf, self.board), *(plugin or ()), *extra_args]
        self._proc: subprocess.Popen | None = None
        self._port = None
        self._buf = b""
        self._log_dir: tempfile.TemporaryDirectory | None = None
        self.input_bytes = self.output_bytes = self.arena_bytes = 0
        self.returncode: int | None = None

    # -- lifetime ---------------------------------------------------------
    def __enter__(self) -> QemuSession:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self._log_dir = tempfile.TemporaryDirectory(prefix="rlx-qemu-")
        deadline = time.monotonic() + self.timeout
        for _attempt in range(3):
            port = _free_port()
            # wait=on: the guest does not start before the host is connected,
            # so no early output is lost.
            argv = [*self._argv, "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on"]
            with open(Path(self._log_dir.name) / "qemu.log", "wb") as log:
                self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    self._port = _TcpLink(port)
                    break
                except OSError:
                    time.sleep(0.01)
            if self._port is not None:
                break
            if self._proc.poll() is None:
                self.close()
                raise QemuTimeout(f"QEMU did not open its UART port within {self.timeout:g} s")
            # Another process took the port between _free_port and QEMU's
            # bind: try another one.
            if "Address already in use" not in self._log():
                self._fail(f"QEMU exited with status {self._proc.returncode} before the UART connected")
        else:
            self._fail("QEMU could not get a free TCP port for its UART")
        line = self._read_line()
        m = re.fullmatch(r"RLX READY in=(\d+) out=(\d+) arena=(\d+)", line)
        if not m:
            self._fail(f"unexpected boot line from the firmware: {line!r}")
        self.input_bytes, self.output_bytes, self.arena_bytes = map(int, m.groups())

    def close(self) -> None:
        """Stops QEMU (killing it when it does not exit by itself) and releases the UART."""
        if self._port is not None:
            with contextlib.suppress(OSError):
                self._port.close()
            self._port = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self.returncode = self._proc.wait()
            self._proc = None
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- protocol ---------------------------------------------------------
    def invoke(self, data: bytes | np.ndarray) -> InvokeResult:
        """Runs the model once on ``data`` (raw input bytes or an array of them)."""
        raw = np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data)
        if len(raw) != self.input_bytes:
            raise RlxError(f"input has {len(raw)} bytes; the firmware's model takes {self.input_bytes}")
        self._write(b"I " + raw.hex().encode() + b"\n")
        line = self._read_line()
        if line == "E fault":
            # The runtime's fault handler exits right after this line with
            # 128 + the exception number; report that status.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=min(self.timeout, 5.0))
            self._fail(f"the firmware faulted (exit status {self._proc.poll()}: 128 + exception number)")
        m = re.fullmatch(r"O (-?\d+) (\d+) ([0-9a-f]*)", line)
        if not m or len(m[3]) != 2 * self.output_bytes:
            self._fail(f"unexpected answer from the firmware: {line[:200]!r}")
        return InvokeResult(int(m[1]), int(m[2]), bytes.fromhex(m[3]))

    def exit(self, status: int = 0) -> int:
        """Asks the firmware to exit with ``status``; returns QEMU's exit status."""
        self._write(f"X {status}\n".encode())
        try:
            rc = self._proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise QemuTimeout(f"firmware did not exit within {self.timeout:g} s") from None
        self.close()
        return rc

    # -- plumbing ---------------------------------------------------------
    def _log(self) -> str:
        if self._log_dir is None:
            return ""
        try:
            text = (Path(self._log_dir.name) / "qemu.log").read_text(errors="replace")
        except OSError:
            return ""
        # QEMU always announces that it waits for the UART client; not news.
        return "\n".join(line for line in text.splitlines() if "waiting for connection" not in line)

    def _fail(self, message: str):
        log = self._log().strip()
        self.close()
        raise QemuError(message + (f"\nQEMU said:\n{log[-2000:]}" if log else ""))

    def _write(self, data: bytes) -> None:
        if self._port is None:
            raise QemuError("QEMU session is not running")
        self._port.write(data)

    def _read_line(self) -> str:
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buf:
            if self._port is None:
                raise QemuError("QEMU session is not running")
            chunk = self._port.read(0.05)
            if chunk:
                self._buf += chunk
                continue
            if chunk is None or self._proc.poll() is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=1.0)
                self._fail(f"firmware stopped (QEMU exit status {self._proc.poll()}); console: {self._buf[-200:]!r}")
            if time.monotonic() > deadline:
                self.close()
                raise QemuTimeout(f"no answer from the firmware within {self.timeout:g} s")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("latin-1").rstrip("\r")


def run_qemu(
    elf: str | os.PathLike,
    board: str | Board,
    inputs: Iterable[np.ndarray | bytes],
    *,
    timeout: float = 30.0,
    output_dtype: np.dtype | type = np.int8,
    output_shape: Sequence[int] | None = None,
) -> list[np.ndarray]:
    """Runs each input through the model-runner firmware in one QEMU boot; returns the outputs.

    Inputs are sent as their raw bytes (so an int8 array of the model's input
    shape). Outputs come back as ``output_dtype`` arrays, flat unless
    ``output_shape`` is given. A nonzero status from the model is a
    :class:`QemuError`.
    """
    outputs = []
    with QemuSession(elf, board, timeout=timeout) as session:
        for k, x in enumerate(inputs):
            r = session.invoke(x)
            if r.status != 0:
                raise QemuError(f"rlx_model_invoke returned {r.status} for input {k}")
            y = np.frombuffer(r.output, dtype=output_dtype).copy()
            outputs.append(y.reshape(output_shape) if output_shape is not None else y)
        rc = session.exit(0)
    if rc != 0:
        raise QemuError(f"firmware exited with status {rc} after the last input")
    return outputs


# -- instruction counting -----------------------------------------------------

_PLUGIN_SOURCE = Path(rlx_edge.__file__).resolve().parent / "_data" / "qemu_plugin" / "rlx_icount.c"


def _cache_dir() -> Path:
    root = os.environ.get("RLX_EDGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rlx-edge"
    )
    return Path(root)


def build_plugin(cache_dir: str | os.PathLike | None = None) -> Path:
    """The instruction-count TCG plugin, compiled with the host gcc once per source version."""
    gcc = find_tool("gcc")
    source = _PLUGIN_SOURCE.read_bytes()
    version = run_tool([gcc, "--version"], "gcc --version").splitlines()[0]
    key = hashlib.sha256(source + version.encode()).hexdigest()[:16]
    target = Path(cache_dir) if cache_dir is not None else _cache_dir() / "qemu-plugin" / key
    lib = target / "librlx_icount.so"
    if lib.is_file():
        return lib
    target.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed, so concurrent first uses never
    # load a half-written library.
    tmp = target / f".librlx_icount.{os.getpid()}.so"
    run_tool(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(tmp), str(_PLUGIN_SOURCE)],
        "gcc (QEMU instruction-count plugin)",
    )
    os.replace(tmp, lib)
    return lib


def symbols(elf: str | os.PathLike) -> dict[str, tuple[int, int]]:
    """Defined symbols of an ELF: name -> (address, size), Thumb bit cleared."""
    nm = find_tool("arm-none-eabi-nm")
    out = run_tool([nm, "-S", "--defined-only", str(elf)], "arm-none-eabi-nm")
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            table[parts[3]] = (int(parts[0], 16) & ~1, int(parts[1], 16))
        elif len(parts) == 3:
            table.setdefault(parts[2], (int(parts[0], 16) & ~1, 0))
    return table


_CALL = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{4} [0-9a-f]{4}\s+bl\s+[0-9a-f]+ <(\S+)>\s*$")


def call_return_sites(elf: str | os.PathLike, function: str) -> list[int]:
    """Addresses right after every direct call (``bl``) to ``function``: where each call returns."""
    objdump = find_tool("arm-none-eabi-objdump")
    out = run_tool([objdump, "-d", str(elf)], "arm-none-eabi-objdump")
    # A Thumb BL is always 32 bits, so the return address is the call's + 4.
    return sorted({int(m[1], 16) + 4 for m in map(_CALL.match, out.splitlines()) if m and m[2] == function})


def count_instructions_many(
    elf: str | os.PathLike,
    board: str | Board,
    inputs: Iterable[np.ndarray | bytes],
    *,
    function: str = "rlx_model_invoke",
    only: Sequence[str | tuple[int, int]] | None = None,
    timeout: float = 60.0,
) -> list[int]:
    """Instructions executed by each call of ``function``, one input each, in one QEMU boot.

    A window opens when the first instruction of ``function`` executes and
    closes when the call returns, so callees count and the caller does not.
    ``only`` restricts the count to some functions (names) or address ranges
    (``(lo, hi)``), e.g. one kernel of the model. The SysTick handler is never
    counted: its runs depend on the host clock. Counts are exact and the same
    on every run.
    """
    syms = symbols(elf)
    if function not in syms:
        raise RlxError(f"{elf}: no symbol {function!r}")
    stops = call_return_sites(elf, function)
    if not stops:
        raise RlxError(f"{elf}: no direct call to {function!r} to measure")
    args = [f"start={syms[function][0]:#x}", *(f"stop={a:#x}" for a in stops)]
    for item in only or ():
        if isinstance(item, str):
            if item not in syms or syms[item][1] == 0:
                raise RlxError(f"{elf}: no function {item!r} with a size")
            lo, size = syms[item]
            item = (lo, lo + size)
        args.append(f"range={item[0]:#x}:{item[1]:#x}")
    if "SysTick_Handler" in syms:
        lo, size = syms["SysTick_Handler"]
        args.append(f"skip={lo:#x}:{lo + max(size, 2):#x}")
    lib = build_plugin()
    with tempfile.TemporaryDirectory(prefix="rlx-icount-") as tmp:
        result = Path(tmp) / "icount.txt"
        spec = ",".join([str(lib), *args, f"out={result}"])
        if spec.count(",") != len(args) + 1:
            raise RlxError(f"paths with commas cannot be passed to a QEMU plugin: {lib}, {tmp}")
        n = 0
        with QemuSession(elf, board, timeout=timeout, plugin=["-plugin", spec]) as session:
            for k, x in enumerate(inputs):
                r = session.invoke(x)
                if r.status != 0:
                    raise QemuError(f"{function} returned {r.status} for input {k}")
                n += 1
            rc = session.exit(0)
        if rc != 0:
            raise QemuError(f"firmware exited with status {rc}")
        if not result.is_file():
            raise QemuError("the instruction-count plugin wrote no result")
        windows = [int(v) for v in re.findall(r"^window (\d+)$", result.read_text(), re.M)]
    if len(windows) != n:
        raise QemuError(f"expected {n} measured calls of {function}, the plugin saw {len(windows)}")
    return windows


def count_instructions(
    elf: str | os.PathLike,
    board: str | Board,
    input: np.ndarray | bytes,
    *,
    function: str = "rlx_model_invoke",
    only: Sequence[str | tuple[int, int]] | None = None,
    timeout: float = 60.0,
) -> int:
    """Instructions one call of ``function`` (the model) executes on ``input``; see count_instructions_many."""
    return count_instructions_many(elf, board, [input], function=function, only=only, timeout=timeout)[0]


def qemu_available() -> bool:
    """Whether qemu-system-arm is on PATH."""
    return shutil.which("qemu-system-arm") is not None
