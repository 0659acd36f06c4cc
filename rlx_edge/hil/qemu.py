"""The HIL protocol over QEMU: a model-runner firmware driven through its emulated UART.

:class:`QemuSession` boots a firmware on a
:class:`~rlx_edge.targets.cortexm.qemu.QemuBoard` and talks to it with a
:class:`~rlx_edge.hil.client.HilClient`; :func:`run_qemu` streams inputs
through it, :func:`count_instructions_many` counts the instructions of each
inference with the Cortex-M target's instruction-count plugin, and
:func:`qemu_runner` is the ``qemu-m*`` run targets' runner.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlx_edge.boards import Board
from rlx_edge.errors import RlxError
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.protocol import BoardInfo
from rlx_edge.hil.transport import HilError, HilLinkError, HilTimeout, Transport
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm.firmware import IoLayout, build_model_firmware
from rlx_edge.targets.cortexm.qemu import InstructionCounter, QemuBoard, QemuError, QemuTimeout


def open_uart(qemu: QemuBoard) -> Transport:
    """A transport on a started QEMU's UART, once QEMU listens."""
    return qemu.connect(Transport, retry_on=(HilLinkError, OSError))


@dataclass(frozen=True)
class InvokeResult:
    status: int
    """What rlx_model_invoke returned (0 is success)."""
    ticks: int
    """SysTick ticks the call took: core cycles on hardware, virtual time under QEMU."""
    output: bytes


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
        transport = open_uart(self.qemu)
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
        self._guard(lambda: self.client.exit(status), exiting=status)
        rc = self.qemu.wait(self.timeout)
        if rc is None:
            self.close()
            raise QemuTimeout(f"firmware did not exit within {self.timeout:g} s")
        self.close()
        return rc

    def _guard(self, call, exiting: int | None = None):
        """Runs a client call; a dead or silent QEMU becomes a QemuError/QemuTimeout with its story.

        ``exiting``: the call asks the firmware to exit with that status. The firmware exits
        right after sending its answer, and QEMU can close the UART's socket before the answer
        leaves it (seen under load): QEMU gone with that status is then the answer.
        """
        if self.client is None:
            raise QemuError("QEMU session is not running")
        try:
            return call()
        except (HilTimeout, HilLinkError) as e:
            if exiting is not None and self.qemu.wait(min(self.timeout, 5.0)) == exiting:
                return None
            if isinstance(e, HilTimeout) and self.qemu.poll() is None:
                self.close()
                raise QemuTimeout(f"no answer from the firmware within {self.timeout:g} s: {e}") from None
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
    with tempfile.TemporaryDirectory(prefix="rlx-icount-") as tmp:
        counter = InstructionCounter.calls(elf, Path(tmp) / "icount.txt", function, only)
        n = 0
        with QemuSession(elf, board, timeout=timeout, plugin=counter.qemu_args) as session:
            for k, x in enumerate(inputs):
                r = session.invoke(x)
                if r.status != 0:
                    raise QemuError(f"{function} returned {r.status} for input {k}")
                n += 1
            rc = session.exit(0)
        if rc != 0:
            raise QemuError(f"firmware exited with status {rc}")
        windows = counter.windows()
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


def qemu_runner(
    graph: Graph, board: str | Board, workdir: str | os.PathLike | None = None
) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """A function running one input dict through the firmware under QEMU (one boot per call).

    Any number of inputs and outputs (up to
    :data:`~rlx_edge.targets.cortexm.firmware.MAX_IO`), laid out as
    :class:`~rlx_edge.targets.cortexm.firmware.IoLayout` says.
    """
    layout = IoLayout.of(graph)
    elf, _ = build_model_firmware(graph, board, workdir)

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (raw,) = run_qemu(elf, board, [layout.pack(inputs)], output_dtype=np.uint8)
        return layout.unpack(raw.tobytes())

    return run_one
