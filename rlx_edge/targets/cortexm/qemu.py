"""Running Cortex-M firmware under QEMU: standalone runs, the UART on a loopback port, instruction counts.

:class:`QemuBoard` boots a firmware built by
:func:`~rlx_edge.targets.cortexm.firmware.build_firmware` with its console
UART on a free loopback TCP port (QEMU's ``-serial tcp:...,server=on``;
pyserial's ``socket://127.0.0.1:PORT`` reaches it); the HIL client
(:mod:`rlx_edge.hil.qemu`) talks to the model runner there.
:func:`run_firmware` boots a firmware that runs to completion by itself.

Instruction counts come from a TCG plugin (``firmware/qemu_plugin``) that is
compiled with the host gcc on first use into a cache directory;
:class:`InstructionCounter` sets it up for one ELF and reads its counts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rlx_edge.boards import Board, get_board
from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.targets.cortexm._tools import find_tool, run_tool
from rlx_edge.targets.cortexm.firmware import firmware_dir, symbols

T = TypeVar("T")


class QemuError(ToolchainError):
    """QEMU failed, or the firmware in it misbehaved (died, spoke garbage)."""


class QemuTimeout(QemuError):
    """The firmware did not answer in time; QEMU has been killed."""


@dataclass(frozen=True)
class FirmwareRun:
    returncode: int
    """QEMU's exit status: the firmware's exit status, modulo 256."""
    output: str
    """Everything the firmware wrote on its console UART."""


# What QEMU prints once the UART port of -serial tcp:...,server=on,wait=on is open.
_LISTENING = "waiting for connection"


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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuBoard:
    """QEMU running a firmware with its UART on a free loopback TCP port.

    :attr:`url` (``socket://127.0.0.1:PORT``) is what the HIL client or a
    proxy connects to; QEMU starts the guest only once the first client
    has connected (``wait=on``), so nothing the firmware sends at boot is
    lost. Use as a context manager: QEMU is always stopped on exit, killed
    when it does not stop by itself.
    """

    def __init__(
        self,
        elf: str | os.PathLike,
        board: str | Board,
        *,
        timeout: float = 30.0,
        plugin: Sequence[str] | None = None,
        extra_args: Sequence[str] = (),
        port: int | None = None,
    ):
        """``port``: a fixed loopback port for the UART (a farm place's exported serial port) instead of a free one."""
        self.elf = Path(elf)
        self.board = get_board(board)
        self.timeout = timeout
        self._argv = [*_qemu_base_argv(self.elf, self.board), *(plugin or ()), *extra_args]
        self._proc: subprocess.Popen | None = None
        self._log_dir: tempfile.TemporaryDirectory | None = None
        self._fixed_port = port
        self.port: int | None = None
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise QemuError("QEMU is not running")
        return f"socket://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> QemuBoard:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Starts QEMU; :meth:`connect` then opens its UART."""
        self._log_dir = tempfile.TemporaryDirectory(prefix="rlx-qemu-")
        self._spawn()

    def _spawn(self) -> None:
        self.port = self._fixed_port or _free_port()
        # nodelay=on: each answer is a small write that Nagle's algorithm
        # would hold back for a delayed ACK.
        serial = f"tcp:127.0.0.1:{self.port},server=on,wait=on,nodelay=on"
        with open(Path(self._log_dir.name) / "qemu.log", "wb") as log:
            self._proc = subprocess.Popen(
                [*self._argv, "-serial", serial], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def connect(self, opener: Callable[[str], T], retry_on: tuple[type[BaseException], ...] = (OSError,)) -> T:
        """Connects to the UART, retrying until QEMU listens; returns what ``opener(url)`` returns.

        ``opener`` raises one of ``retry_on`` while QEMU does not listen yet
        (:func:`rlx_edge.hil.qemu.open_uart` passes the HIL transport).
        Another process may take the port between choosing and QEMU's bind:
        QEMU then exits and is started again on another port.
        """
        deadline = time.monotonic() + self.timeout
        for _attempt in range(3):
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    return opener(self.url)
                except retry_on:
                    time.sleep(0.01)
            if self._proc.poll() is None:
                self.close()
                raise QemuTimeout(f"QEMU did not open its UART port within {self.timeout:g} s")
            if "Address already in use" not in self.log() or self._fixed_port:
                self.fail(f"QEMU exited with status {self._proc.returncode} before the UART connected")
            self._spawn()
        self.fail("QEMU could not get a free TCP port for its UART")

    def wait(self, timeout: float) -> int | None:
        """QEMU's exit status once it exits within ``timeout`` seconds, else None."""
        if self._proc is None:
            return self.returncode
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc is not None else self.returncode

    def close(self) -> None:
        """Stops QEMU (killed when it has not exited by itself) and removes its log."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self.returncode = self._proc.wait()
            self._proc = None
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    def log(self) -> str:
        # QEMU always announces that it waits for the UART client; not news.
        return "\n".join(line for line in self._raw_log().splitlines() if _LISTENING not in line)

    def listening(self) -> bool:
        """Whether QEMU has opened its UART port: it says so before it waits for the first client."""
        return _LISTENING in self._raw_log()

    def _raw_log(self) -> str:
        if self._log_dir is None:
            return ""
        try:
            return (Path(self._log_dir.name) / "qemu.log").read_text(errors="replace")
        except OSError:
            return ""

    def fail(self, message: str):
        log = self.log().strip()
        self.close()
        raise QemuError(message + (f"\nQEMU said:\n{log[-2000:]}" if log else ""))


# -- instruction counting -----------------------------------------------------


def plugin_source() -> Path:
    """The instruction-count plugin's C source (``firmware/qemu_plugin/rlx_icount.c``)."""
    return firmware_dir() / "qemu_plugin" / "rlx_icount.c"


def _cache_dir() -> Path:
    root = os.environ.get("RLX_EDGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rlx-edge"
    )
    return Path(root)


def build_plugin(cache_dir: str | os.PathLike | None = None) -> Path:
    """The instruction-count TCG plugin, compiled with the host gcc once per source version."""
    gcc = find_tool("gcc")
    source_path = plugin_source()
    source = source_path.read_bytes()
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
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(tmp), str(source_path)],
        "gcc (QEMU instruction-count plugin)",
    )
    os.replace(tmp, lib)
    return lib


_CALL = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{4} [0-9a-f]{4}\s+bl\s+[0-9a-f]+ <(\S+)>\s*$")


def disassemble(elf: str | os.PathLike) -> str:
    """``arm-none-eabi-objdump -d`` of an ELF."""
    objdump = find_tool("arm-none-eabi-objdump")
    return run_tool([objdump, "-d", str(elf)], "arm-none-eabi-objdump")


def call_return_sites(elf: str | os.PathLike, function: str) -> list[int]:
    """Addresses right after every direct call (``bl``) to ``function``: where each call returns."""
    out = disassemble(elf)
    # A Thumb BL is always 32 bits, so the return address is the call's + 4.
    return sorted({int(m[1], 16) + 4 for m in map(_CALL.match, out.splitlines()) if m and m[2] == function})


@dataclass(frozen=True)
class InstructionCounter:
    """The instruction-count plugin set up for one ELF: give :attr:`qemu_args` to QEMU, read :meth:`windows` after.

    A window opens when the instruction at ``start`` executes and closes when
    one of ``stops`` executes. ``ranges`` restricts the count to address
    ranges; the SysTick handler is never counted (its runs depend on the host
    clock), so counts are exact and the same on every run.
    """

    plugin: Path
    args: tuple[str, ...]
    result: Path

    @classmethod
    def window(
        cls,
        elf: str | os.PathLike,
        result: str | os.PathLike,
        start: int,
        stops: Sequence[int],
        ranges: Sequence[tuple[int, int]] = (),
        splits: Sequence[int] = (),
        histogram: bool = False,
    ) -> InstructionCounter:
        """``splits``: addresses that start the window's next segment (:meth:`segments`);
        ``histogram``: also count each instruction address per segment (:meth:`histogram`)."""
        args = [f"start={start:#x}", *(f"stop={a:#x}" for a in stops), *(f"range={lo:#x}:{hi:#x}" for lo, hi in ranges)]
        args += [f"split={a:#x}" for a in splits] + (["hist=1"] if histogram else [])
        syms = symbols(elf)
        if "SysTick_Handler" in syms:
            lo, size = syms["SysTick_Handler"]
            args.append(f"skip={lo:#x}:{lo + max(size, 2):#x}")
        return cls(build_plugin(), tuple(args), Path(result))

    @classmethod
    def calls(
        cls,
        elf: str | os.PathLike,
        result: str | os.PathLike,
        function: str = "rlx_model_invoke",
        only: Sequence[str | tuple[int, int]] | None = None,
        splits: Sequence[int] = (),
        histogram: bool = False,
    ) -> InstructionCounter:
        """Each call of ``function``, callees included and the caller not; ``only``: functions or ranges;
        ``splits`` and ``histogram`` as for :meth:`window`."""
        syms = symbols(elf)
        if function not in syms:
            raise RlxError(f"{elf}: no symbol {function!r}")
        stops = call_return_sites(elf, function)
        if not stops:
            raise RlxError(f"{elf}: no direct call to {function!r} to measure")
        ranges = []
        for item in only or ():
            if isinstance(item, str):
                if item not in syms or syms[item][1] == 0:
                    raise RlxError(f"{elf}: no function {item!r} with a size")
                lo, size = syms[item]
                item = (lo, lo + size)
            ranges.append(item)
        return cls.window(elf, result, syms[function][0], stops, ranges, splits, histogram)

    @property
    def qemu_args(self) -> list[str]:
        spec = ",".join([str(self.plugin), *self.args, f"out={self.result}"])
        if spec.count(",") != len(self.args) + 1:
            raise RlxError(f"paths with commas cannot be passed to a QEMU plugin: {self.plugin}, {self.result}")
        return ["-plugin", spec]

    def windows(self) -> list[int]:
        """The count of every window, in order; QEMU must have exited."""
        return [int(v) for v in re.findall(r"^window (\d+)$", self._text(), re.M)]

    def segments(self) -> list[int]:
        """The count of every segment of every window, in order (with ``splits``)."""
        return [int(v) for v in re.findall(r"^segment \d+ (\d+)$", self._text(), re.M)]

    def histogram(self) -> dict[int, dict[int, int]]:
        """Segment -> instruction address -> times it ran (with ``histogram``)."""
        out: dict[int, dict[int, int]] = {}
        for seg, addr, n in re.findall(r"^pc (\d+) (0x[0-9a-f]+|0) (\d+)$", self._text(), re.M):
            counts = out.setdefault(int(seg), {})
            a = int(addr, 16)
            counts[a] = counts.get(a, 0) + int(n)
        return out

    def _text(self) -> str:
        if not self.result.is_file():
            raise QemuError("the instruction-count plugin wrote no result")
        return self.result.read_text()


def qemu_available() -> bool:
    """Whether qemu-system-arm is on PATH."""
    return shutil.which("qemu-system-arm") is not None
