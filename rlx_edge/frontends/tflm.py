"""Running ``.tflite`` models in TFLite Micro's Python interpreter (the bit-exact oracle).

TFLite Micro runs its reference kernels, which is this project's integer
contract (ARCHITECTURE.md). Four things need care:

- isolation: TFLite Micro trusts the flatbuffer, so a malformed model can
  crash it (SIGSEGV/SIGABRT) or make it raise from deep inside its loader.
  Every interpreter therefore lives in a child process (one per model, not per
  inference), forked from a ``forkserver`` that has TFLite Micro imported
  already, so starting one costs milliseconds. A crash or a failure there
  becomes one :class:`TflmError` naming the file and what TFLite Micro said;
- intermediates: TFLite Micro reuses arena memory, so tensors can only be read
  back from an interpreter made with ``kPreserveAllTensors``;
- ``GetTensor`` with an index past the model's tensor count crashes the
  process, so indices come from the flatbuffer, never from probing;
- the arena actually used is only reported by ``print_allocations()`` on the
  C-level stderr (fd 2), which the child captures by redirecting the descriptor.

The child writes everything TFLite Micro prints (fds 1 and 2) to a log file
instead of the user's terminal; its tail explains failures, since the Python
exceptions of ``tflite_micro`` are generic ("TFLM failed to allocate tensors").
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlx_edge.errors import ModelFileError, ToolchainError

__all__ = [
    "HYBRID_MESSAGE",
    "TflmError",
    "TflmModel",
    "find_hybrid_operator",
    "run_tflm",
    "run_tflm_intermediates",
    "tflm_arena_bytes",
]

# Room for the interpreter's own bookkeeping on top of tensors; models here are
# small, and a too-small arena only makes allocation fail, it never corrupts.
_MIN_ARENA = 1 << 20
# TFLite Micro's words when the arena is too small ("Failed to resize buffer. Requested: R, available A,
# missing: M"): a default-sized arena is grown by M and retried, at most this many times
_ARENA_SHORT = re.compile(r"missing: (\d+)")
_ARENA_RETRIES = 2

# A request (load, or all inferences of a comparison) that takes longer than
# this is a hung interpreter: mutated shapes can make kernels loop for ages.
REQUEST_TIMEOUT_S = 300.0

HYBRID_MESSAGE = (
    "TFLite Micro cannot run hybrid models (float activations, int8 weights); "
    "compare a target against our reference instead, e.g. --against jax"
)
# Ops whose TFLite kernels have a "hybrid" variant (float activations, int8
# weights, dequantized on the fly), which TFLite Micro does not implement.
_HYBRID_OPS = frozenset(
    {
        "FULLY_CONNECTED",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "TRANSPOSE_CONV",
        "BATCH_MATMUL",
        "SVDF",
        "UNIDIRECTIONAL_SEQUENCE_LSTM",
        "CONV_3D",
    }
)


class TflmError(ToolchainError):
    """TFLite Micro refused, failed on or crashed on a model."""


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


def _reader(data: bytes, source: str):
    """The importer's bounds-checked reader; a file it rejects is a ModelFileError."""
    from rlx_edge.frontends.tflite import _Bad, _Reader

    try:
        return _Reader(data, source)
    except _Bad as e:
        raise ModelFileError(f"{source}: invalid TFLite model: {e}") from None


def tensor_count(data: bytes, source: str = "<model>") -> int:
    """Number of tensors in subgraph 0, read from the flatbuffer (checked like the importer)."""
    return _reader(data, source).n_tensors


def operator_outputs(data: bytes, source: str = "<model>") -> list[int]:
    """Tensor indices written by operators of subgraph 0, in execution order."""
    r = _reader(data, source)
    out: list[int] = []
    for i in range(r.sg.OperatorsLength()):
        v = r.vector(r.sg.Operators(i), 8, 4, f"outputs of operator {i}")
        out += [] if v is None else [int(t) for t in v if 0 <= t < r.n_tensors]
    return out


def _io_indices(r: Any, kind: str) -> list[int]:
    """Tensor indices of the subgraph's inputs or outputs, read off the flatbuffer."""
    v = r.vector(r.sg, 6 if kind == "input" else 8, 4, f"subgraph {kind}s")
    return [] if v is None else [int(i) for i in v]


def find_hybrid_operator(data: bytes, source: str = "<model>") -> str | None:
    """``"operator K (OP)"`` for the first hybrid operator of subgraph 0, or None.

    Hybrid ("dynamic range") operators take float activations and int8 weights;
    TFLite Micro refuses them when it prepares the kernel, so finding one up front
    gives the clear message without starting an interpreter.
    """
    from tflite.TensorType import TensorType as TflType

    from rlx_edge.frontends._tflite_schema import OP_NAMES

    r = _reader(data, source)
    codes = r.model.OperatorCodesLength()
    for i in range(r.sg.OperatorsLength()):
        op = r.sg.Operators(i)
        idx = op.OpcodeIndex()
        if not 0 <= idx < codes:
            continue  # the loader names this one
        oc = r.model.OperatorCodes(idx)
        name = OP_NAMES.get(max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode())), "")
        ins = r.vector(op, 6, 4, f"inputs of operator {i}")
        if name not in _HYBRID_OPS or ins is None or len(ins) < 2:
            continue
        x, w = (int(t) for t in ins[:2])
        if not (0 <= x < r.n_tensors and 0 <= w < r.n_tensors):
            continue
        types = r.sg.Tensors(x).Type(), r.sg.Tensors(w).Type()
        if types[0] == TflType.FLOAT32 and types[1] in (TflType.INT8, TflType.UINT8, TflType.INT4):
            return f"operator {i} ({name})"
    return None


# the child process ---------------------------------------------------------------------
class _Session:
    """The interpreter inside the child; each public method is one request."""

    interp: Any = None
    n_outputs = 0

    def load(self, data: bytes, arena_size: int, preserve: bool, n_inputs: int, n_outputs: int) -> list:
        rt = _runtime()
        config = rt.InterpreterConfig.kPreserveAllTensors if preserve else rt.InterpreterConfig.kAllocationRecording
        self.interp = rt.Interpreter.from_bytes(data, arena_size=arena_size, intrepreter_config=config)
        self.n_outputs = n_outputs
        details = [self.interp.get_input_details(i) for i in range(n_inputs)]
        return [(tuple(int(s) for s in d["shape"]), np.dtype(d["dtype"]).str) for d in details]

    def invoke(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        for i, x in enumerate(inputs):
            self.interp.set_input(np.asarray(x, order="C"), i)  # not ascontiguousarray: it makes rank 0 rank 1
        self.interp.invoke()
        return [np.array(self.interp.get_output(i), copy=True) for i in range(self.n_outputs)]

    def tensor(self, index: int) -> np.ndarray:
        got = self.interp.GetTensor(index, 0)
        return np.array(got["tensor_data"], copy=True).reshape(tuple(got["shape"]))

    def run_many(self, samples: list[list[np.ndarray]], indices: list[int]) -> list[tuple[list, dict]]:
        out = []
        for s in samples:
            outs = self.invoke(s)
            out.append((outs, {i: self.tensor(i) for i in indices}))
        return out

    def allocations(self) -> str:
        return _capture_fd2(self.interp.print_allocations)


def _serve(conn: Any) -> None:
    """A forked child: answer requests ``(method, args)`` until the parent closes the connection."""
    import sys

    session = _Session()
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple = ("ok", getattr(session, method)(*args))
        except Exception as e:  # reported to the parent, which names the file
            reply = ("error", f"{type(e).__name__}: {e}")
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send(reply)


def _zygote_main(control_fd: int) -> None:
    """The fork server: TFLite Micro imported once, then one forked child per model.

    Requests on the control socket: ``fork`` with two descriptors (the child's
    end of its connection, its log file) answers the child's pid; ``wait PID``
    answers its exit status (negative: the signal that ended it). EOF (the
    parent is gone) ends the server. Its own module namespace is all a child
    inherits: nothing of the parent's ``__main__`` is re-run, unlike
    multiprocessing's spawn and forkserver methods.
    """
    import socket
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; children see EOF
    _runtime()
    control = socket.socket(fileno=control_fd)
    control.sendall(b"ready\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(control, 256, 2)
        except OSError:
            return
        if not msg:
            return
        words = msg.decode().split()
        if words[0] == "fork" and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                control.close()
                os.dup2(fds[1], 1)  # whatever TFLite Micro prints goes to the log, never to the user
                os.dup2(fds[1], 2)
                os.close(fds[1])
                try:
                    _serve(Connection(fds[0]))
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            control.sendall(f"{pid}\n".encode())
        elif words[0] == "wait":
            _, status = os.waitpid(int(words[1]), 0)
            control.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        else:
            return


class _Zygote:
    """The parent's handle on its fork server (started on first use, one per parent process)."""

    _current: _Zygote | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import socket
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        root = str(Path(__file__).resolve().parents[2])  # the server imports this very rlx_edge
        code = (
            f"import sys; sys.path.insert(0, {root!r}); "
            f"from {__name__} import _zygote_main; _zygote_main({theirs.fileno()})"
        )
        # one BLAS thread: the server forks, and forking a thread pool is what makes fork unsafe
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env=env,
        )
        theirs.close()
        self.sock = ours
        self.owner = os.getpid()
        if self._reply() != "ready":
            self.log.seek(0)
            said = " ".join(self.log.read().decode("utf-8", "replace").split()[-40:])
            raise ToolchainError(f"TFLite Micro's server process did not start: {said or 'no output'}")

    def _reply(self) -> str:
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = self.sock.recv(64)
            if not chunk:
                return ""
            buf += chunk
        return buf.decode().strip()

    @classmethod
    def get(cls) -> _Zygote:
        z = cls._current
        if z is None or z.owner != os.getpid() or z.proc.poll() is not None:
            z = cls._current = _Zygote()
        return z

    @classmethod
    def fork(cls, conn_fd: int, log_fd: int) -> int:
        """Start a child serving ``conn_fd`` and printing to ``log_fd``; its pid."""
        import socket

        with cls._lock:
            z = cls.get()
            socket.send_fds(z.sock, [b"fork"], [conn_fd, log_fd])
            reply = z._reply()
        if not reply:
            raise ToolchainError("TFLite Micro's server process ended unexpectedly")
        return int(reply)

    @classmethod
    def wait(cls, pid: int) -> int | None:
        """Exit status of child ``pid`` once it has ended (None: the server is gone)."""
        with cls._lock:
            z = cls._current
            if z is None or z.owner != os.getpid():
                return None
            try:
                z.sock.sendall(f"wait {pid}\n".encode())
                reply = z._reply()
            except OSError:
                return None
        return int(reply) if reply else None


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"crashed with {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited unexpectedly (status {code})"


class _Child:
    """One child process holding one interpreter; :meth:`call` runs a request there."""

    def __init__(self, source: str) -> None:
        import socket
        from multiprocessing.connection import Connection

        self.source = source
        self.log = tempfile.TemporaryFile()
        # the child shares this open file: appending keeps its writes at the end whatever we read
        fcntl.fcntl(self.log.fileno(), fcntl.F_SETFL, fcntl.fcntl(self.log.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.pid: int | None = _Zygote.fork(theirs.fileno(), self.log.fileno())
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.dead: str | None = None

    def call(self, method: str, *args: Any, doing: str, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        if self.dead is not None:
            raise TflmError(self.dead)
        start = os.fstat(self.log.fileno()).st_size
        try:
            self.conn.send((method, args))
            if not self.conn.poll(timeout):
                self._kill()
                self._fail(f"did not finish {doing} within {timeout:.0f} s", start)
            status, value = self.conn.recv()
        except (EOFError, OSError):  # the child is gone: a native crash
            self._fail(f"{_signal_name(self._reap())} while {doing}", start)
        if status == "error":
            self._fail(f"failed while {doing}: {value}", start, keep_alive=True)
        return value

    def _kill(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def _reap(self) -> int | None:
        pid, self.pid = self.pid, None
        return None if pid is None else _Zygote.wait(pid)

    def _fail(self, what: str, log_start: int, keep_alive: bool = False) -> NoReturn:
        said = _log_tail(self.log, log_start)
        if "Hybrid models are not supported" in said:
            message = f"{self.source}: {HYBRID_MESSAGE}"
        else:
            message = f"{self.source}: TFLite Micro {what}" + (f" (it printed: {said})" if said else "")
        if not keep_alive:
            self.dead = message
            self._reap()
        raise TflmError(message)

    def close(self) -> None:
        """End the child (it holds nothing worth a graceful exit, and may be mid-inference) and reap it."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self._kill()
        self._reap()
        self.log.close()


def _log_tail(log: Any, start: int, lines: int = 3, limit: int = 400) -> str:
    """The last few non-empty lines the child printed since ``start``, as one line."""
    log.seek(start)
    text = log.read().decode("utf-8", "replace")
    kept = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-lines:]
    said = "; ".join(kept)
    return said if len(said) <= limit else "..." + said[-limit:]


# the parent's view ---------------------------------------------------------------------
class TflmModel:
    """One TFLite Micro interpreter over a model (in its own process), reusable across inferences.

    ``preserve=True`` keeps every tensor readable after ``invoke`` (for
    intermediates); it makes the arena larger, so arena measurements use
    ``preserve=False``. ``name`` is how errors refer to the model (the path by
    default). Use it as a context manager, or call :meth:`close`, to end the
    child process promptly.
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes,
        *,
        arena_size: int | None = None,
        preserve: bool = False,
        name: str | None = None,
    ):
        _runtime()  # a missing package is a clear error here, not a failure in the child
        self.source = name or ("<model bytes>" if isinstance(model, (bytes, bytearray, memoryview)) else str(model))
        self.data = _model_bytes(model)
        r = _reader(self.data, self.source)  # validates the file before the C++ side sees it
        self.n_tensors = r.n_tensors
        self.input_indices = _io_indices(r, "input")
        self.output_indices = _io_indices(r, "output")
        self.n_inputs = len(self.input_indices)
        self.n_outputs = len(self.output_indices)
        self.preserve = preserve
        hybrid = find_hybrid_operator(self.data, self.source)
        if hybrid is not None:
            raise TflmError(f"{self.source}: {HYBRID_MESSAGE} ({hybrid} has float activations and int8 weights)")
        size = arena_size or default_arena_size(self.data)
        for attempt in range(_ARENA_RETRIES + 1):
            self._child: _Child | None = _Child(self.source)
            try:
                self.input_details = self._call(
                    "load", self.data, size, preserve, self.n_inputs, self.n_outputs, doing="loading the model"
                )
                break
            except TflmError as e:
                self.close()
                short = _ARENA_SHORT.search(str(e))
                if arena_size is not None or short is None or attempt == _ARENA_RETRIES:
                    raise
                # the default arena was too small (models with large activations, e.g. a 640x640
                # detector): TFLite Micro said by how much; its later (scratch) requests may add more
                size += int(short.group(1)) + _MIN_ARENA
            except BaseException:
                self.close()
                raise

    def _call(self, method: str, *args: Any, doing: str) -> Any:
        if self._child is None:
            raise ValueError("this TflmModel is closed")
        return self._child.call(method, *args, doing=doing)

    def _inputs(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != self.n_inputs:
            raise ValueError(f"model takes {self.n_inputs} inputs, got {len(inputs)}")
        return [np.asarray(x, order="C") for x in inputs]  # rank-0 inputs (a loop count) stay rank 0

    def __call__(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """Run one inference; returns the outputs in model order."""
        return self._call("invoke", self._inputs(inputs), doing="invoking the model")

    def run_many(
        self, samples: Sequence[Sequence[np.ndarray]], indices: Sequence[int]
    ) -> list[tuple[list[np.ndarray], dict[int, np.ndarray]]]:
        """One inference per sample, each with tensors ``indices`` read back; one round trip in all.

        Returns (outputs, {tensor index: value}) per sample; reading tensors needs ``preserve=True``.
        """
        if indices and not self.preserve:
            raise ValueError("reading intermediates needs TflmModel(..., preserve=True)")
        for i in indices:
            self._check_index(i)
        feed = [self._inputs(list(s)) for s in samples]
        return self._call("run_many", feed, [int(i) for i in indices], doing="invoking the model")

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.n_tensors:  # past the count, GetTensor crashes the process
            raise IndexError(f"tensor {index} out of range: the model has {self.n_tensors}")

    def tensor(self, index: int) -> np.ndarray:
        """Tensor ``index`` of subgraph 0 after the last inference (needs ``preserve=True``)."""
        if not self.preserve:
            raise ValueError("reading intermediates needs TflmModel(..., preserve=True)")
        self._check_index(index)
        return self._call("tensor", int(index), doing=f"reading tensor {index}")

    def intermediates(self) -> dict[int, np.ndarray]:
        """Every operator output of the last inference, by tensor index."""
        return {t: self.tensor(t) for t in operator_outputs(self.data, self.source)}

    def arena_bytes(self) -> int:
        """Arena bytes TFLite Micro used, from ``print_allocations`` (call after an inference)."""
        text = self._call("allocations", doing="reporting its allocations")
        m = re.search(r"Arena allocation total (\d+) bytes", text)
        if m is None:
            raise ToolchainError(f"TFLite Micro printed no arena total; it printed: {text[:500]!r}")
        return int(m.group(1))

    def zero_inputs(self) -> list[np.ndarray]:
        """All-zero inputs of the shapes and dtypes TFLite Micro expects."""
        return [np.zeros(shape, dtype=np.dtype(dt)) for shape, dt in self.input_details]

    def close(self) -> None:
        """End the child process (idempotent)."""
        child, self._child = getattr(self, "_child", None), None
        if child is not None:
            child.close()

    def __enter__(self) -> TflmModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the daemonic child is ended anyway
            pass


def run_tflm(
    model: str | os.PathLike | bytes, inputs: Sequence[np.ndarray] | np.ndarray, *, arena_size: int | None = None
) -> list[np.ndarray]:
    """Run ``model`` (a path or the file's bytes) once on ``inputs`` in TFLite Micro."""
    with TflmModel(model, arena_size=arena_size) as m:
        return m(inputs)


def run_tflm_intermediates(
    model: str | os.PathLike | bytes, inputs: Sequence[np.ndarray] | np.ndarray, *, arena_size: int | None = None
) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """Outputs and every operator output (by TFLite tensor index) of one inference."""
    with TflmModel(model, arena_size=arena_size, preserve=True) as m:
        ((outs, inter),) = m.run_many([m._inputs(inputs)], operator_outputs(m.data, m.source))
        return outs, inter


def tflm_arena_bytes(model: str | os.PathLike | bytes, *, arena_size: int | None = None) -> int:
    """Arena bytes TFLite Micro needs for ``model``, measured after one inference on zeros."""
    with TflmModel(model, arena_size=arena_size) as m:
        m(m.zero_inputs())
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
