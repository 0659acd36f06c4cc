"""Seeded mutants of small int8 ``.tflite`` models, and a worker that runs the CLI on many of them.

Mutants are byte-level (flipped bytes, overwritten words) or structure-aware:
edits through the object API of the TFLite schema (the generated
``schema_py_generated`` that ships with ``tflite-micro``; the ``tflite``
package has readers only) that TFLite Micro trusts and the loaders must check:
buffer indices past the buffer list, options type 127, dropped quantization,
shape and type changes, rewired operators.

Run as a script, this is the worker of ``tests/test_cli_mutants.py``:
``python _mutants.py RESULTS.jsonl DIR CMD...`` calls ``rlx_edge.cli.main``
in-process once per ``*.tflite`` in DIR and per command, and writes one JSON
line per call (exit code, whether stderr held a traceback, stderr's lines).
In-process is fine for the claim under test because TFLite Micro runs in its
own child process; the worker itself dying (a signal) fails the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

import flatbuffers
import numpy as np

# Object-API readers and writers of the TFLite schema (the `tflite` package has readers only).
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

Mutation = Callable[[np.random.Generator, "schema.ModelT"], str]

_TYPES = [0, 2, 3, 4, 7, 9, 6]  # FLOAT32, INT32, UINT8, INT64, INT16, INT8, BOOL
_OPS = [
    0,
    3,
    4,
    9,
    14,
    17,
    18,
    22,
    25,
    39,
    40,
]  # ADD, CONV_2D, DEPTHWISE, FC, LOGISTIC, MAX_POOL, MUL, RESHAPE, SOFTMAX


def _sg(m: schema.ModelT) -> schema.SubGraphT:
    return m.subgraphs[0]


def _pick(rng: np.random.Generator, items: list):
    return items[int(rng.integers(len(items)))]


def _activations(m: schema.ModelT) -> list[int]:
    """Tensors an operator writes (TFLite Micro allocates them in its arena)."""
    return sorted({int(t) for op in _sg(m).operators for t in op.outputs})


def _buffer_past_list(rng, m) -> str:
    t = _pick(rng, _activations(m) if rng.random() < 0.7 else list(range(len(_sg(m).tensors))))
    _sg(m).tensors[t].buffer = len(m.buffers) + int(rng.integers(0, 4))
    return f"buffer of tensor {t} past the list"


def _options_127(rng, m) -> str:
    k = int(rng.integers(len(_sg(m).operators)))
    _sg(m).operators[k].builtinOptionsType = 127
    return f"options type 127 on operator {k}"


def _drop_quantization(rng, m) -> str:
    quantized = [i for i, t in enumerate(_sg(m).tensors) if t.quantization is not None]
    t = _pick(rng, quantized)
    _sg(m).tensors[t].quantization = None
    return f"quantization of tensor {t} dropped"


def _bad_quantization(rng, m) -> str:
    quantized = [
        i for i, t in enumerate(_sg(m).tensors) if t.quantization is not None and t.quantization.scale is not None
    ]
    t = _pick(rng, quantized)
    q = _sg(m).tensors[t].quantization
    if rng.random() < 0.5:
        q.scale = np.full(len(q.scale), _pick(rng, [0.0, -1.0, np.nan, np.inf, 1e30, 1e-30]), np.float32)
        return f"scale of tensor {t} changed"
    q.zeroPoint = np.full(len(q.zeroPoint), _pick(rng, [300, -1000, 127, -128, 2**40]), np.int64)
    return f"zero point of tensor {t} changed"


def _change_shape(rng, m) -> str:
    t = int(rng.integers(len(_sg(m).tensors)))
    tensor = _sg(m).tensors[t]
    shape = [int(d) for d in (tensor.shape if tensor.shape is not None else [])]
    how = _pick(rng, ["grow", "shrink", "double", "zero", "drop", "add"])
    if shape and how in ("grow", "shrink", "double", "zero"):
        d = int(rng.integers(len(shape)))
        shape[d] = {"grow": shape[d] + 1, "shrink": max(shape[d] - 1, 1), "double": 2 * shape[d], "zero": 0}[how]
    elif shape and how == "drop":
        shape.pop(int(rng.integers(len(shape))))
    else:
        shape.insert(0, int(_pick(rng, [1, 2, 3])))
    tensor.shape = np.array(shape, np.int32)
    return f"shape of tensor {t} -> {shape}"


def _change_type(rng, m) -> str:
    t = int(rng.integers(len(_sg(m).tensors)))
    _sg(m).tensors[t].type = _pick(rng, _TYPES)
    return f"type of tensor {t} changed"


def _change_opcode(rng, m) -> str:
    k = int(rng.integers(len(m.operatorCodes)))
    code = _pick(rng, _OPS)
    m.operatorCodes[k].builtinCode = code
    m.operatorCodes[k].deprecatedBuiltinCode = min(code, 127)
    return f"opcode {k} -> {code}"


def _rewire(rng, m) -> str:
    op = _pick(rng, _sg(m).operators)
    ios = op.inputs if rng.random() < 0.7 or op.outputs is None else op.outputs
    j = int(rng.integers(len(ios)))
    ios[j] = _pick(rng, [-1, len(_sg(m).tensors), int(rng.integers(len(_sg(m).tensors)))])
    return "operator rewired"


def _drop_operator(rng, m) -> str:
    k = int(rng.integers(len(_sg(m).operators)))
    del _sg(m).operators[k]
    return f"operator {k} dropped"


def _truncate_buffer(rng, m) -> str:
    full = [i for i, b in enumerate(m.buffers) if b.data is not None and len(b.data) > 1]
    b = _pick(rng, full)
    m.buffers[b].data = m.buffers[b].data[: len(m.buffers[b].data) // 2]
    return f"buffer {b} truncated"


def _change_options(rng, m) -> str:
    op = _pick(rng, _sg(m).operators)
    opts = op.builtinOptions
    fields = [k for k, v in vars(opts).items() if isinstance(v, (int, np.integer))] if opts is not None else []
    if not fields:
        op.builtinOptionsType = int(rng.integers(1, 120))
        return "options type changed"
    f = _pick(rng, fields)
    setattr(opts, f, _pick(rng, [0, 1, 2, 5, 255, -1]))
    return f"option {f} changed"


def _change_io(rng, m) -> str:
    sg = _sg(m)
    which = sg.inputs if rng.random() < 0.5 else sg.outputs
    which[0] = int(rng.integers(len(sg.tensors)))
    return "subgraph input/output changed"


STRUCTURAL: list[Mutation] = [
    _buffer_past_list,
    _options_127,
    _drop_quantization,
    _bad_quantization,
    _change_shape,
    _change_type,
    _change_opcode,
    _rewire,
    _drop_operator,
    _truncate_buffer,
    _change_options,
    _change_io,
]


def activation_buffer_past_list(data: bytes) -> bytes:
    """The first operator's output tensor pointing at a buffer past the list (TFLite Micro crashes loading it)."""
    m = schema.ModelT.InitFromPackedBuf(data, 0)
    sg = _sg(m)
    sg.tensors[int(sg.operators[0].outputs[0])].buffer = len(m.buffers) + 100
    return pack(m)


def empty_subgraph(data: bytes) -> bytes:
    """Subgraph 0's table offset zeroed: an empty subgraph our loader reads, and TFLite Micro crashes on."""
    from tflite.Model import Model

    out = bytearray(data)
    tab = Model.GetRootAs(data, 0)._tab
    at = tab.Vector(tab.Offset(8))  # the subgraphs vector, whose first element is that offset
    out[at : at + 4] = bytes(4)
    return bytes(out)


def bias_scale_off(data: bytes) -> bytes:
    """The last operator's weight scales times 1000: valid numbers, but the bias scale then no longer
    equals input times weight scale, which TFLite Micro's Prepare (``kernel_util.cc``) refuses."""
    m = schema.ModelT.InitFromPackedBuf(data, 0)
    sg = _sg(m)
    q = sg.tensors[int(sg.operators[-1].inputs[1])].quantization
    q.scale = (np.asarray(q.scale, np.float32) * 1000).astype(np.float32)
    return pack(m)


def pack(m: schema.ModelT) -> bytes:
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def structural_mutant(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """One or two object-API edits of ``data`` (drawn again until the result can be written)."""
    while True:
        m = schema.ModelT.InitFromPackedBuf(data, 0)
        what = []
        for _ in range(int(rng.integers(1, 3))):
            mutate = _pick(rng, STRUCTURAL)
            try:
                what.append(mutate(rng, m))
            except (IndexError, ValueError, TypeError, AttributeError):  # nothing of that kind to edit
                what.append(f"{mutate.__name__} (nothing to edit)")
        try:
            return pack(m), "; ".join(what)
        except (TypeError, ValueError, OverflowError, struct.error):  # a value its field cannot hold
            continue


def byte_mutant(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """Flipped bytes or an overwritten aligned word, in the flatbuffer's tables rather than its weights.

    Positions are drawn from the first and last 2 KiB (tables, vectors of
    offsets, shapes) as often as from anywhere, since flips in weight data only
    change numbers.
    """
    out = bytearray(data)
    n = len(out)
    pos = (
        int(rng.integers(n))
        if rng.random() < 0.3 or n < 4096
        else int(_pick(rng, [rng.integers(2048), n - 1 - rng.integers(2048)]))
    )
    if rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 5))):
            p = min(n - 1, pos + int(rng.integers(0, 8)))
            out[p] ^= int(rng.integers(1, 256))
        return bytes(out), f"bytes flipped near {pos}"
    pos -= pos % 4
    word = int(_pick(rng, [0, 1, 127, 255, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, int(rng.integers(0, 2**32))]))
    out[pos : pos + 4] = word.to_bytes(4, "little")[: n - pos]
    return bytes(out), f"word at {pos} set to {word:#x}"


def accepted_mutants(model: Path, quota: int, seed: int, out_dir: Path) -> dict:
    """Write ``quota`` seeded mutants of ``model`` that ``load_model`` accepts into ``out_dir``.

    Structural and byte-level mutants alternate at random; returns how many
    candidates it took and how many of each kind were kept. Gives up after
    ``30 * quota`` candidates (the count then falls short and the test says so).
    """
    from rlx_edge.errors import RlxError
    from rlx_edge.frontends import load_model

    data = model.read_bytes()
    rng = np.random.default_rng(seed)
    kept = {"structural": 0, "byte": 0}
    candidates = 0
    while sum(kept.values()) < quota and candidates < 30 * quota:
        candidates += 1
        kind = "structural" if rng.random() < 0.5 else "byte"
        mutant, _ = (structural_mutant if kind == "structural" else byte_mutant)(data, rng)
        path = out_dir / f"{model.stem}_{candidates:04d}.tflite"
        path.write_bytes(mutant)
        try:
            load_model(path)
        except RlxError:
            path.unlink()
            continue
        kept[kind] += 1
    return {"model": model.name, "candidates": candidates, **kept}


# the worker ------------------------------------------------------------------------------------
def run_cli(argv: list[str]) -> dict:
    """``rlx_edge.cli.main(argv)`` with stdout/stderr captured; the exit code and what stderr said."""
    from rlx_edge.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's --help, never expected here
            code = e.code if isinstance(e.code, int) else 2
    text = err.getvalue()
    return {
        "code": code,
        "traceback": "Traceback" in text,
        "stderr": text.strip().splitlines()[-3:],
        "stderr_lines": len(text.strip().splitlines()),
        "seconds": round(time.perf_counter() - start, 3),
    }


def _stub_firmware_build() -> None:
    """Replace the firmware link that ``compile`` does for its size report (arm-none-eabi-gcc, ~10 s a model).

    The mutants vary the graph, so they exercise loading, lowering and emitting C;
    the C compiler sees the same kernels for all of them. The report's sizes become 0.
    """
    from rlx_edge.targets.cortexm import firmware as build  # cli.cmd_compile imports from this module

    def fake_build(project: Path, board: str, out_dir: Path, **_: object) -> Path:
        assert (Path(project) / "model.c").is_file(), "compile wrote no model.c"
        return Path(out_dir) / "model.elf"

    build.build_firmware = fake_build
    build.size_report = lambda elf, board: {
        "flash_bytes": 0,
        "ram_bytes": 0,
        "ram": {"arena": 0, "stack": 0, "other": 0},
    }


COMMANDS = (
    ("compare", "{model}", "--against", "tflm", "--inputs", "1"),
    ("compile", "{model}", "--target", "cortex-m4", "-o", "{out}"),
)


def worker(results: Path, work_dir: Path, jobs: list[dict]) -> None:
    """For each job ``{"model", "quota", "seed"}``: make the mutants, run every command on each.

    Writes one JSON line per job (``{"job": ...}``, the mutant counts) and per CLI call.
    Paths must be absolute: the worker runs each job inside its mutants' folder.
    """
    _stub_firmware_build()
    with results.open("w") as f:
        for job in jobs:
            model = Path(job["model"])
            out_dir = work_dir / model.stem
            out_dir.mkdir(parents=True)
            f.write(json.dumps({"job": accepted_mutants(model, job["quota"], job["seed"], out_dir)}) + "\n")
            os.chdir(out_dir)  # short relative paths: messages keep them whole
            for mutant in sorted(Path().glob("*.tflite")):
                for cmd in COMMANDS:
                    argv = [a.format(model=mutant, out=mutant.with_suffix(".c")) for a in cmd]
                    rec = run_cli(argv)
                    rec.update(model=mutant.name, command=argv[0])
                    f.write(json.dumps(rec) + "\n")
            f.flush()


if __name__ == "__main__":
    worker(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))
