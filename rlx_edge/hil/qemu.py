"""Running Cortex-M firmware under QEMU: model outputs, exit status, exact instruction counts.

The firmware built by :func:`rlx_edge.targets.cortexm_fw.build_firmware`
serves the framed HIL protocol (:mod:`rlx_edge.hil.protocol`) on its console
UART. :class:`QemuBoard` boots it with the UART on a free loopback TCP port
(QEMU's ``-serial tcp:...,server=on``; pyserial's ``socket://127.0.0.1:PORT``
reaches it); :class:`QemuSession` adds a :class:`~rlx_edge.hil.client.HilClient`
and streams inputs.

Instruction counts come from a TCG plugin (``rlx_edge/_data/qemu_plugin``)
that is compiled with the host gcc on first use into a cache directory.
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rlx_edge
from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.protocol import BoardInfo
from rlx_edge.hil.transport import HilError, HilLinkError, HilTimeout, Transport
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuBoard:
    """QEMU running a firmware with its UART on a free loopback TCP port.

    :attr:`url` (``socket://127.0.0.1:PORT``) is what a :class:`HilClient`
    or a proxy connects to; QEMU starts the guest only once the first client
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
    ):
        self.elf = Path(elf)
        self.board = get_board(board)
        self.timeout = timeout
        self._argv = [*_qemu_base_argv(self.elf, self.board), *(plugin or ()), *extra_args]
        self._proc: subprocess.Popen | None = None
        self._log_dir: tempfile.TemporaryDirectory | None = None
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
        self.port = _free_port()
        # nodelay=on: each answer is a small write that Nagle's algorithm
        # would hold back for a delayed ACK.
        serial = f"tcp:127.0.0.1:{self.port},server=on,wait=on,nodelay=on"
        with open(Path(self._log_dir.name) / "qemu.log", "wb") as log:
            self._proc = subprocess.Popen(
                [*self._argv, "-serial", serial], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def connect(self, opener=None):
        """Connects to the UART, retrying until QEMU listens; returns what ``opener(url)`` returns.

        ``opener`` defaults to :class:`~rlx_edge.hil.transport.Transport`.
        Another process may take the port between choosing and QEMU's bind:
        QEMU then exits and is started again on another port.
        """
        opener = opener or Transport
        deadline = time.monotonic() + self.timeout
        for _attempt in range(3):
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    return opener(self.url)
                except (HilLinkError, OSError):
                    time.sleep(0.01)
            if self._proc.poll() is None:
                self.close()
                raise QemuTimeout(f"QEMU did not open its UART port within {self.timeout:g} s")
            if "Address already in use" not in self.log():
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
        if self._log_dir is None:
            return ""
        try:
            text = (Path(self._log_dir.name) / "qemu.log").read_text(errors="replace")
        except OSError:
            return ""
        # QEMU always announces that it waits for the UART client; not news.
        return "\n".join(line for line in text.splitlines() if "waiting for connection" not in line)

    def fail(self, message: str):
        log = self.log().strip()
        self.close()
        raise QemuError(message + (f"\nQEMU said:\n{log[-2000:]}" if log else ""))


class QemuSession:
    """One QEMU boot of a model-runner firmware, driven over its UART with the HIL protocol.

    Use as a context manager: QEMU is always torn down on exit, and killed if
    it does not stop by itself. Each command waits at most ``timeout``
    seconds (an inference too, once started); a firmware that stops
    answering gets QEMU killed and :class:`QemuTimeout` raised.
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
        self.qemu = QemuBoard(elf, board, timeout=timeout, plugin=plugin, extra_args=extra_args)
        self.elf = self.qemu.elf
        self.board = self.qemu.board
        self.timeout = timeout
        self.client: HilClient | None = None
        self.info: BoardInfo | None = None
        self.input_bytes = self.output_bytes = self.arena_bytes = 0
        self.returncode: int | None = None

    # -- lifetime ---------------------------------------------------------
    def __enter__(self) -> QemuSession:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self.qemu.start()
        transport = self.qemu.connect()
        # Over a local socket nothing is lost, so one retry is plenty; a
        # firmware that does not answer in `timeout` is stuck.
        self.client = HilClient(transport, timeout=self.timeout, run_timeout=self.timeout, retries=1, restarts=1)
        self.info = self._guard(self.client.hello)
        self.input_bytes, self.output_bytes, self.arena_bytes = (
            self.info.input_bytes,
            self.info.output_bytes,
            self.info.arena_bytes,
        )

    def close(self) -> None:
        """Stops QEMU (killing it when it does not exit by itself) and releases the UART."""
        if self.client is not None:
            self.client.close()
            self.client = None
        self.qemu.close()
        if self.qemu.returncode is not None:
            self.returncode = self.qemu.returncode

    @property
    def pid(self) -> int | None:
        return self.qemu.pid

    @property
    def url(self) -> str:
        return self.qemu.url

    # -- protocol ---------------------------------------------------------
    def invoke(self, data: bytes | np.ndarray) -> InvokeResult:
        """Runs the model once on ``data`` (raw input bytes or an array of them)."""
        raw = np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data)
        if len(raw) != self.input_bytes:
            raise RlxError(f"input has {len(raw)} bytes; the firmware's model takes {self.input_bytes}")
        r = self._guard(lambda: self.client.infer(raw))
        return InvokeResult(r.status, r.ticks, r.output)

    def exit(self, status: int = 0) -> int:
        """Asks the firmware to exit with ``status``; returns QEMU's exit status."""
        self._guard(lambda: self.client.exit(status))
        rc = self.qemu.wait(self.timeout)
        if rc is None:
            self.close()
            raise QemuTimeout(f"firmware did not exit within {self.timeout:g} s")
        self.close()
        return rc

    def _guard(self, call):
        """Runs a client call; a dead or silent QEMU becomes a QemuError/QemuTimeout with its story."""
        if self.client is None:
            raise QemuError("QEMU session is not running")
        try:
            return call()
        except HilTimeout as e:
            if self.qemu.poll() is None:
                self.close()
                raise QemuTimeout(f"no answer from the firmware within {self.timeout:g} s: {e}") from None
            self._died()
        except HilLinkError:
            self._died()
        except HilError as e:
            self.qemu.fail(f"firmware misbehaved: {e}")

    def _died(self):
        rc = self.qemu.wait(min(self.timeout, 5.0))
        console = bytes(self.client.console) if self.client is not None else b""
        if b"E fault" in console:
            self.qemu.fail(f"the firmware faulted (exit status {rc}: 128 + exception number)")
        self.qemu.fail(f"firmware stopped (QEMU exit status {rc}); console: {console[-200:]!r}")


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
