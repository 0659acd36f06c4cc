"""Running ``.tflite`` models in TFLite Micro's Python interpreter (the bit-exact oracle).

TFLite Micro runs its reference kernels, which is this project's integer
contract (ARCHITECTURE.md). Three things need care:

- intermediates: TFLite Micro reuses arena memory, so tensors can only be read
  back from an interpreter made with ``kPreserveAllTensors``;
- ``GetTensor`` with an index past the model's tensor count crashes the
  process, so indices come from the flatbuffer, never from probing;
- the arena actually used is only reported by ``print_allocations()`` on the
  C-level stderr (fd 2), which we capture by redirecting the descriptor.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlx_edge.errors import ModelFileError, ToolchainError

# Room for the interpreter's own bookkeeping on top of tensors; models here are
# small, and a too-small arena only makes allocation fail, it never corrupts.
_MIN_ARENA = 1 << 20


def _runtime():
    try:
        from tflite_micro import runtime
    except ImportError as e:  # optional dependency (rlx-edge[tflite])
        raise ToolchainError("tflite-micro is not installed: pip install 'rlx-edge[tflite]'") from e
    return runtime


def _model_bytes(model: str | os.PathLike | bytes) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    try:
        return Path(model).read_bytes()
    except OSError as e:
        raise ModelFileError(f"{model}: cannot read ({e.strerror or e})") from None


def default_arena_size(data: bytes) -> int:
    """A generous arena for ``data``: ten times the model, at least 1 MiB."""
    return max(10 * len(data), _MIN_ARENA)


def tensor_count(data: bytes) -> int:
    """Number of tensors in subgraph 0, read from the flatbuffer (checked like the importer)."""
    from rlx_edge.frontends.tflite import _Reader

    return _Reader(data, "<model>").n_tensors


def operator_outputs(data: bytes) -> list[int]:
    """Tensor indices written by operators of subgraph 0, in execution order."""
    from rlx_edge.frontends.tflite import _Reader

    r = _Reader(data, "<model>")
    out: list[int] = []
    for i in range(r.sg.OperatorsLength()):
        v = r.vector(r.sg.Operators(i), 8, 4, f"outputs of operator {i}")
        out += [] if v is None else [int(t) for t in v if 0 <= t < r.n_tensors]
    return out


class TflmModel:
    """One TFLite Micro interpreter over a model, reusable across inferences.

    ``preserve=True`` keeps every tensor readable after ``invoke`` (for
    intermediates); it makes the arena larger, so arena measurements use
    ``preserve=False``.
    """

    def __init__(self, model: str | os.PathLike | bytes, *, arena_size: int | None = None, preserve: bool = False):
        rt = _runtime()
        self.data = _model_bytes(model)
        self.n_tensors = tensor_count(self.data)  # also validates the file before the C++ side sees it
        self.preserve = preserve
        config = rt.InterpreterConfig.kPreserveAllTensors if preserve else rt.InterpreterConfig.kAllocationRecording
        self.interp = rt.Interpreter.from_bytes(
            self.data, arena_size=arena_size or default_arena_size(self.data), intrepreter_config=config
        )
        self.input_indices = self._io_indices("input")
        self.output_indices = self._io_indices("output")
        self.n_inputs = len(self.input_indices)
        self.n_outputs = len(self.output_indices)

    def _io_indices(self, kind: str) -> list[int]:
        """Tensor indices of the subgraph's inputs or outputs, read off the flatbuffer."""
        from rlx_edge.frontends.tflite import _Reader

        r = _Reader(self.data, "<model>")
        v = r.vector(r.sg, 6 if kind == "input" else 8, 4, f"subgraph {kind}s")
        return [] if v is None else [int(i) for i in v]

    def __call__(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """Run one inference; returns the outputs in model order (copies)."""
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != self.n_inputs:
            raise ValueError(f"model takes {self.n_inputs} inputs, got {len(inputs)}")
        for i, x in enumerate(inputs):
            self.interp.set_input(np.ascontiguousarray(x), i)
        self.interp.invoke()
        return [np.array(self.interp.get_output(i), copy=True) for i in range(self.n_outputs)]

    def tensor(self, index: int) -> np.ndarray:
        """Tensor ``index`` of subgraph 0 after the last inference (needs ``preserve=True``)."""
        if not self.preserve:
            raise ValueError("reading intermediates needs TflmModel(..., preserve=True)")
        if not 0 <= index < self.n_tensors:  # past the count, GetTensor crashes the process
            raise IndexError(f"tensor {index} out of range: the model has {self.n_tensors}")
        got = self.interp.GetTensor(index, 0)
        return np.array(got["tensor_data"], copy=True).reshape(tuple(got["shape"]))

    def intermediates(self) -> dict[int, np.ndarray]:
        """Every operator output of the last inference, by tensor index."""
        return {t: self.tensor(t) for t in operator_outputs(self.data)}

    def arena_bytes(self) -> int:
        """Arena bytes TFLite Micro used, from ``print_allocations`` (call after an inference)."""
        text = _capture_fd2(self.interp.print_allocations)
        m = re.search(r"Arena allocation total (\d+) bytes", text)
        if m is None:
            raise ToolchainError(f"TFLite Micro printed no arena total; it printed: {text[:500]!r}")
        return int(m.group(1))


def run_tflm(
    model: str | os.PathLike | bytes, inputs: Sequence[np.ndarray] | np.ndarray, *, arena_size: int | None = None
) -> list[np.ndarray]:
    """Run ``model`` (a path or the file's bytes) once on ``inputs`` in TFLite Micro."""
    return TflmModel(model, arena_size=arena_size)(inputs)


def run_tflm_intermediates(
    model: str | os.PathLike | bytes, inputs: Sequence[np.ndarray] | np.ndarray, *, arena_size: int | None = None
) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """Outputs and every operator output (by TFLite tensor index) of one inference."""
    m = TflmModel(model, arena_size=arena_size, preserve=True)
    outs = m(inputs)
    return outs, m.intermediates()


def tflm_arena_bytes(model: str | os.PathLike | bytes, *, arena_size: int | None = None) -> int:
    """Arena bytes TFLite Micro needs for ``model``, measured after one inference on zeros."""
    m = TflmModel(model, arena_size=arena_size)
    inputs = []
    for i in range(m.n_inputs):
        d = m.interp.get_input_details(i)
        inputs.append(np.zeros(tuple(d["shape"]), dtype=d["dtype"]))
    m(inputs)
    return m.arena_bytes()


def _capture_fd2(fn) -> str:
    """Run ``fn`` with the process-level stderr (fd 2) redirected; return what it wrote."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")
