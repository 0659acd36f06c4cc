"""``--target cortexm-host``: the generated C built for this machine and run through cffi.

:func:`compile_host` writes the sources, compiles them with the system C
compiler into a shared library (cached by the hash of the sources and
flags) and loads it in ABI mode. :func:`run_sanitized` builds the same
sources with AddressSanitizer and UndefinedBehaviorSanitizer into a small
driver executable (ASan cannot be loaded into a running Python) and runs it
in a subprocess.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import bind_inputs
from rlx_edge.ir.plan import Program
from rlx_edge.targets.cortexm.emit import EmittedModel, emit

__all__ = ["HostModel", "compile_host", "run_sanitized"]

# -ffp-contract=off: the few float kernels must round each operation as numpy does
BASE_FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"]
_POISON = 0xA5


def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise ToolchainError("no C compiler found (install gcc or set CC)")
    return cc


def _write(em: EmittedModel, src: Path) -> list[Path]:
    for rel, text in em.files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return sorted(src / rel for rel in em.files if rel.endswith(".c"))


def _digest(em: EmittedModel, flags: Sequence[str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(em.files):
        h.update(rel.encode() + b"\0" + em.files[rel].encode() + b"\0")
    h.update(" ".join(flags).encode())
    return h.hexdigest()[:20]


def _compile(cmd: list[str], cwd: Path) -> None:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolchainError(f"C build failed ({' '.join(cmd[:3])} ...):\n{res.stderr[-4000:]}")


def _kernel_objects(em: EmittedModel, src: Path, root: Path, flags: Sequence[str]) -> list[Path]:
    """The kernel library compiled once per (kernel sources, flags): models only add model.c and weights.c."""
    kernels = {rel: text for rel, text in em.files.items() if rel.startswith("kernels/")}
    h = hashlib.sha256(" ".join(flags).encode())
    for rel in sorted(kernels):
        h.update(rel.encode() + b"\0" + kernels[rel].encode() + b"\0")
    objdir = root / f"kernels-{h.hexdigest()[:20]}"
    objects = [objdir / (Path(rel).stem + ".o") for rel in sorted(kernels) if rel.endswith(".c")]
    if all(o.exists() for o in objects):
        return objects
    tmpdir = Path(tempfile.mkdtemp(prefix="objs-", dir=root))
    for rel in sorted(kernels):
        if rel.endswith(".c"):
            out = tmpdir / (Path(rel).stem + ".o")
            _compile([_cc(), *flags, "-I", str(src / "kernels"), "-c", str(src / rel), "-o", str(out)], tmpdir)
    objdir.mkdir(parents=True, exist_ok=True)
    for o in objects:
        os.replace(tmpdir / o.name, o)
    shutil.rmtree(tmpdir, ignore_errors=True)
    return objects


class HostModel:
    """A compiled model loaded into this process. ``run(inputs) -> {output name: array}``."""

    def __init__(self, em: EmittedModel, lib_path: Path) -> None:
        import cffi

        self.emitted = em
        self.program = em.program
        self.graph = em.program.graph
        self.path = lib_path
        self._ffi = cffi.FFI()
        self._ffi.cdef("int rlx_model_invoke_multi(const void *const *inputs, void *const *outputs, uint8_t *arena);")
        self._lib = self._ffi.dlopen(str(lib_path))
        align = self.program.alignment
        self._arena_raw = np.zeros(self.program.arena_bytes + align, dtype=np.uint8)
        start = (-self._arena_raw.ctypes.data) % align
        self.arena = self._arena_raw[start : start + self.program.arena_bytes]

    @property
    def arena_bytes(self) -> int:
        return self.program.arena_bytes

    def run(self, inputs: Any) -> dict[str, np.ndarray]:
        g = self.graph
        bound = bind_inputs(g, inputs)
        ffi = self._ffi
        ins = [np.ascontiguousarray(bound[n]) for n in g.inputs]
        outs = [np.empty(tuple(int(d) for d in g.types[o].shape), dtype=g.types[o].dtype.numpy) for o in g.outputs]
        # poison: a kernel reading bytes nobody wrote must not get lucky
        self.arena[...] = _POISON
        in_ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in ins])
        out_ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in outs])
        rc = self._lib.rlx_model_invoke_multi(in_ptrs, out_ptrs, ffi.cast("uint8_t *", self.arena.ctypes.data))
        if rc != 0:
            raise RlxError(f"rlx_model_invoke_multi returned {rc}")
        return dict(zip(g.outputs, outs))


def compile_host(
    program_or_graph: Graph | Program,
    workdir: str | Path | None = None,
    *,
    dsp_emulate: bool = False,
    extra_flags: Sequence[str] = (),
    optimize: str = "balanced",
) -> HostModel:
    """Build the generated C for this machine and load it.

    ``dsp_emulate`` compiles the Cortex-M DSP code path (SXTB16/SMLAD written
    in C) instead of the portable one, so both are testable on the host.
    Builds are cached under ``workdir`` by the hash of sources and flags.
    ``optimize`` is the C's layout level (``emit``).
    """
    em = emit(program_or_graph, optimize)
    flags = [*BASE_FLAGS, "-fPIC", *(["-DRLX_DSP_EMULATE"] if dsp_emulate else []), *extra_flags]
    root = Path(workdir) if workdir is not None else Path(tempfile.gettempdir()) / "rlx-edge-cortexm-host"
    build = root / _digest(em, flags)
    lib = build / "libmodel.so"
    if not lib.exists():
        src = build / "src"
        sources = _write(em, src)
        objects = _kernel_objects(em, src, root, flags)
        model_sources = [s for s in sources if s.parent == src]
        tmp = build / f"libmodel.{os.getpid()}.so"
        cmd = [_cc(), *flags, "-shared", "-I", str(src), "-I", str(src / "kernels"), *map(str, model_sources)]
        _compile([*cmd, *map(str, objects), "-o", str(tmp), "-lm"], build)
        os.replace(tmp, lib)  # atomic: a concurrent build never loads half a file
    return HostModel(em, lib)


_DRIVER = r"""
/* Sanitizer driver: reads N samples from in.bin, runs the model, writes out.bin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

static const size_t in_sizes[RLX_NUM_INPUTS] = {%(in_sizes)s};
static const size_t out_sizes[RLX_NUM_OUTPUTS] = {%(out_sizes)s};

int main(int argc, char **argv)
{
    if (argc != 4) { return 2; }
    long n = strtol(argv[1], NULL, 10);
    FILE *fi = fopen(argv[2], "rb");
    FILE *fo = fopen(argv[3], "wb");
    if (!fi || !fo) { return 2; }
    for (long s = 0; s < n; s++) {
        /* exactly sized heap blocks: ASan reports any access outside them */
        const void *ins[RLX_NUM_INPUTS];
        void *outs[RLX_NUM_OUTPUTS];
        uint8_t *arena = malloc(RLX_ARENA_SIZE);
        memset(arena, 0xA5, RLX_ARENA_SIZE);
        for (int k = 0; k < RLX_NUM_INPUTS; k++) {
            void *b = malloc(in_sizes[k]);
            if (fread(b, 1, in_sizes[k], fi) != in_sizes[k]) { return 3; }
            ins[k] = b;
        }
        for (int k = 0; k < RLX_NUM_OUTPUTS; k++) { outs[k] = malloc(out_sizes[k]); }
        if (rlx_model_invoke_multi(ins, outs, arena) != 0) { return 4; }
        for (int k = 0; k < RLX_NUM_OUTPUTS; k++) {
            fwrite(outs[k], 1, out_sizes[k], fo);
            free(outs[k]);
        }
        for (int k = 0; k < RLX_NUM_INPUTS; k++) { free((void *)ins[k]); }
        free(arena);
    }
    fclose(fi);
    fclose(fo);
    return 0;
}
"""


def run_sanitized(
    program_or_graph: Graph | Program,
    samples: Sequence[Mapping[str, np.ndarray]],
    workdir: str | Path,
    *,
    dsp_emulate: bool = False,
) -> list[dict[str, np.ndarray]]:
    """Run ``samples`` through an ASan+UBSan build in a subprocess; any report is an error."""
    em = emit(program_or_graph)
    g = em.program.graph
    work = Path(workdir)
    src = work / "src"
    sources = _write(em, src)
    in_sizes = [int(np.prod([int(d) for d in g.types[v].shape])) * g.types[v].dtype.storage_bytes for v in g.inputs]
    out_sizes = [int(np.prod([int(d) for d in g.types[v].shape])) * g.types[v].dtype.storage_bytes for v in g.outputs]
    driver = src / "driver.c"
    driver.write_text(
        _DRIVER % {"in_sizes": ", ".join(f"{s}u" for s in in_sizes), "out_sizes": ", ".join(f"{s}u" for s in out_sizes)}
    )
    exe = work / "model_sanitized"
    flags = [
        "-std=c99",
        "-O1",
        "-g",
        "-ffp-contract=off",
        "-fno-omit-frame-pointer",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        *(["-DRLX_DSP_EMULATE"] if dsp_emulate else []),
    ]
    inputs = [*map(str, sources), str(driver), "-lm"]  # -lm: the C library's exp (the detection kernel's)
    _compile([_cc(), *flags, "-I", str(src), "-I", str(src / "kernels"), *inputs, "-o", str(exe)], work)
    blob = bytearray()
    for s in samples:
        bound = bind_inputs(g, s)
        for v in g.inputs:
            blob += np.ascontiguousarray(bound[v]).tobytes()
    (work / "in.bin").write_bytes(bytes(blob))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    res = subprocess.run(
        [str(exe), str(len(samples)), str(work / "in.bin"), str(work / "out.bin")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if res.returncode != 0 or "runtime error" in res.stderr or "AddressSanitizer" in res.stderr:
        raise RlxError(f"sanitized run failed (exit {res.returncode}):\n{res.stderr[-4000:]}")
    data = (work / "out.bin").read_bytes()
    results, pos = [], 0
    for _ in samples:
        outs = {}
        for v, size in zip(g.outputs, out_sizes):
            t = g.types[v]
            outs[v] = (
                np.frombuffer(data[pos : pos + size], dtype=t.dtype.numpy).reshape([int(d) for d in t.shape]).copy()
            )
            pos += size
        results.append(outs)
    return results
