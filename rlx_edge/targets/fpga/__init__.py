"""FPGA target: Amaranth streaming datapaths, cocotb simulation, Yosys resource counts, nextpnr Fmax.

>>> result = build_fpga(graph, "out/fpga", parallelism=64, simulate=True, synth="ice40")  # doctest: +SKIP
>>> result["cycles"], result["resources"]["lut"], result["mismatches"]

``build_fpga`` writes ``<top>.v`` (amaranth.back.verilog), the ``$readmemh``
files ``<top>_rom<N>.hex`` holding weights and constants (keep them next to
the Verilog: simulators and Yosys read them from the working directory),
``<top>_axis.sv`` (a documented AXI-Stream wrapper) and ``layers.json``; with ``simulate`` it
streams inputs through the RTL on Verilator (or Icarus) and compares every
output with the integer reference bit-exactly; with ``synth`` it runs Yosys;
with ``pnr`` (a device of ``devices.DEVICES``) Yosys and nextpnr place and route
it (``pnr.py``) and the result gains Fmax, utilization and latency in µs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge._io import atomic_dir
from rlx_edge.targets.fpga.design import PRESETS, FpgaConfigError, FpgaDesign, rules
from rlx_edge.targets.fpga.emit import rom_files, to_verilog, wrapper_sv, write

__all__ = [
    "PRESETS",
    "FpgaConfigError",
    "FpgaDesign",
    "build_fpga",
    "design_key",
    "rom_files",
    "rules",
    "run",
    "to_verilog",
    "verilog_cached",
    "wrapper_sv",
    "write",
]


def _generator_sources() -> list[Path]:
    """Every source the Verilog depends on: this package, and the IR whose op parameters
    (``prepare``), liveness and pipeline decide the layers and buffers."""
    pkg = Path(__file__).resolve().parents[2]  # rlx_edge/
    files = [*(pkg / "targets" / "fpga").glob("*.py"), *(pkg / "ir").rglob("*.py"), pkg / "pipeline.py"]
    return sorted(files)


def dsp_family(synth: str | None, pnr: str | None) -> str | None:
    """The family whose DSP primitives a design built for Yosys family ``synth`` or device ``pnr``
    instantiates (:class:`FpgaDesign`'s ``dsp``): ECP5's, where the design is for ECP5."""
    from rlx_edge.targets.fpga.arith import DSP_FAMILIES
    from rlx_edge.targets.fpga.devices import device

    family = device(pnr).family if pnr else synth
    return family if family in DSP_FAMILIES else None


def design_key(graph, parallelism: Any, dsp: str | None = None) -> str:
    """Content hash of everything the Verilog depends on: generator and IR code, graph, parallelism.

    (The IR is part of it: a cached design once outlived a change of the parameters
    prepare computes, and a stale datapath deadlocked in simulation.)
    """
    from rlx_edge.ir.plan.program import Program

    g = graph.graph if isinstance(graph, Program) else graph
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parents[2]
    for path in _generator_sources():
        h.update(str(path.relative_to(pkg)).encode())
        h.update(path.read_bytes())
    h.update(repr(sorted(parallelism.items()) if isinstance(parallelism, dict) else parallelism).encode())
    h.update(repr(dsp).encode())
    h.update(g.name.encode())
    for n in g.nodes:
        h.update(repr((n.name, n.op, n.inputs, n.outputs, sorted(n.attrs.items()))).encode())
    for v in sorted(g.types):
        t = g.types[v]
        h.update(repr((v, t.shape, t.dtype.value, t.quant.to_json() if t.quant is not None else None)).encode())
    for k in sorted(g.params):
        h.update(k.encode())
        h.update(np.ascontiguousarray(g.params[k]).tobytes())
    h.update(repr((g.inputs, g.outputs)).encode())
    return h.hexdigest()[:20]


def verilog_cached(design: FpgaDesign, key: str) -> tuple[str, dict[str, str]]:
    """``(to_verilog(design), rom_files(design))``, cached on disk by ``key``.

    Elaborating and converting a model takes seconds to minutes; the cache
    holds one folder per key with the Verilog and its ``$readmemh`` files.
    """
    import shutil
    import tempfile

    from rlx_edge.targets.fpga.sim import cache_root

    folder = cache_root() / "verilog" / f"{design.top_name}-{key}"
    vname = f"{design.top_name}.v"
    if (folder / "rlx_done").is_file():
        roms = {p.name: p.read_text() for p in sorted(folder.glob("*.hex"))}
        return (folder / vname).read_text(), roms
    text = to_verilog(design)
    roms = rom_files(design)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    (tmp / vname).write_text(text)
    for name, hex_text in roms.items():
        (tmp / name).write_text(hex_text)
    (tmp / "rlx_done").write_text("ok\n")
    try:
        tmp.rename(folder)
    except OSError:  # another process finished first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return text, roms


def _random_inputs(design: FpgaDesign, count: int, seed: int) -> list[np.ndarray]:
    """Seeded model inputs: int8 over its whole range; a float one (quantized on the host) over a
    quarter more than its int8 stream represents, so that the quantizer's saturation is exercised."""
    from rlx_edge.targets.fpga.edges import float_range

    graph = design.source_graph
    rng = np.random.default_rng(seed)
    out = []
    for v in graph.inputs:
        t = graph.types[v]
        shape = (count, *[int(d) for d in t.shape])
        if t.dtype.is_float:
            lo, hi = float_range(design.edges, v)
            margin = (hi - lo) / 8
            out.append(rng.uniform(lo - margin, hi + margin, shape).astype(t.dtype.numpy))
        else:
            out.append(rng.integers(-128, 128, shape).astype(np.int8))
    return out


def build_fpga(
    graph,
    out_dir: str | Path,
    *,
    parallelism: Any = "latency",
    simulate: bool = False,
    data: np.ndarray | list[np.ndarray] | None = None,
    synth: str | None = None,
    simulator: str = "verilator",
    inferences: int = 5,
    seed: int = 0,
    pnr: str | None = None,
    clock_mhz: float | None = None,
    progress: Callable[[str], None] | None = None,
    pnr_timeout: float = 3600,
    pnr_seed: int = 1,
) -> dict[str, Any]:
    """Generate, and optionally simulate, synthesize, place and route the datapath of a quantized graph.

    Parameters
    ----------
    graph:
        Quantized int8 Graph or Program.
    out_dir:
        Where ``<top>.v``, ``<top>_axis.sv`` and ``layers.json`` go.
    parallelism:
        Preset name (``area``, ``balanced``, ``latency``), target PE x SIMD per
        layer, or a dict of layer name -> (PE, SIMD).
    simulate:
        Run the cocotb bench on ``simulator`` and compare with the reference.
    data:
        Inputs for the simulation, one array per graph input with a leading
        inference axis (a single array for single-input graphs); default
        ``inferences`` seeded random inputs.
    synth:
        ``ice40``, ``ecp5`` or ``xilinx``: Yosys resource counts.
    pnr:
        A device of ``devices.DEVICES`` (``ecp5-25k``, ``ecp5-85k``, ``up5k``):
        Yosys and nextpnr for it (``pnr.place_and_route``, cached), its work
        files in ``out_dir/pnr``.
    clock_mhz:
        With ``pnr``: nextpnr's timing target (default: the device's), and the
        clock of ``latency_us_at_clock``.
    progress:
        Called with one line per stage of long runs (synthesis, place, route).
    pnr_timeout:
        Seconds each of Yosys and nextpnr may run for ``pnr``.
    pnr_seed:
        nextpnr's placement seed (Fmax varies with placement: routing one design at a few seeds
        shows by how much).

    Returns
    -------
    dict with ``top``, ``files``, ``per_layer`` (PE, SIMD, MACs, ideal and
    measured cycles), ``macs``, ``ideal_cycles``, and when simulated
    ``cycles`` (mean per inference, first input beat to last output beat),
    ``mismatches``, ``first_mismatch``, ``sim_wall_s``, ``outputs``; when
    synthesized ``resources`` (lut, ff, bram, dsp, cells); when placed and
    routed ``fmax_mhz``, ``utilization`` (lut/ff/bram/dsp/io used and available
    in the routed design), ``latency_us`` = ``cycles`` / ``fmax_mhz`` (per layer
    too, ``per_layer[i]["latency_us"]``), ``cycles_source`` (``simulation``, or
    ``model`` without ``simulate``: each layer's loop steps and pipeline fill
    plus the stream beats) and ``pnr`` (nextpnr's clocks, critical path, caveats, wall times).

    ``out_dir`` is written whole: built under a temporary name beside it and
    renamed in (replacing an earlier one), so a failure or a kill never
    leaves a partial design there.
    """
    final = Path(out_dir)
    dsp = dsp_family(synth, pnr)
    with atomic_dir(final) as work:
        result = _build_into(work, graph, parallelism, simulate, data, synth, simulator, inferences, seed, dsp)
        if pnr:
            _place_and_route(result, work, pnr, clock_mhz, progress, pnr_timeout, pnr_seed)
    # Report where the files are now, not where they were built.
    files = result["files"]
    for key, value in files.items():
        moved = [str(final / Path(v).relative_to(work)) for v in (value if isinstance(value, list) else [value])]
        files[key] = moved if isinstance(value, list) else moved[0]
    return result


def _place_and_route(
    result: dict[str, Any],
    out: Path,
    device: str,
    clock_mhz: float | None,
    progress: Callable[[str], None] | None,
    timeout: float,
    seed: int,
) -> None:
    """Route the design in ``out`` for ``device``; add Fmax, utilization and latency in µs to ``result``."""
    from rlx_edge.targets.fpga.pnr import place_and_route

    table = result["per_layer"]
    rep = place_and_route(
        out / f"{result['top']}.v",
        result["top"],
        device,
        out / "pnr",
        clock_mhz=clock_mhz,
        seed=seed,
        progress=progress,
        timeout=timeout,
    )
    result["files"].update({f"pnr_{k}": v for k, v in rep.pop("files").items()})
    simulated = result["cycles"] is not None
    if not simulated:
        # the cycle model (fold.cycles): every layer's loop steps and pipeline fill, plus the beats that
        # stream the inputs in and the outputs out
        streams = result["streams"]
        beats = sum(s["beats"] for s in (*streams["inputs"], *streams["outputs"]))
        for row in table:
            row["cycles"] = row["steps"] + row["fill"]
        result["cycles"] = sum(r["cycles"] for r in table) + beats
    fmax = rep["fmax_mhz"]
    for row in table:
        row["latency_us"] = row["cycles"] / fmax if row.get("cycles") is not None else None
    result.update(
        cycles_source="simulation" if simulated else "model",
        fmax_mhz=fmax,
        latency_us=result["cycles"] / fmax,
        utilization=rep["utilization"],
        pnr=rep,
    )
    if clock_mhz is not None:
        result.update(latency_us_at_clock=result["cycles"] / clock_mhz, timing_met=fmax >= clock_mhz)
    (out / "layers.json").write_text(json.dumps(table, indent=1) + "\n")


def as_program(graph) -> Any:
    """A graph through the one pipeline for this target: legalized, its nodes prepared
    (``Program.quant``, which the layers read), planned in graph order (the buffers
    come from the planner's liveness)."""
    from dataclasses import replace

    from rlx_edge.pipeline import AS_GIVEN, to_program

    return to_program(graph, "fpga", replace(AS_GIVEN, schedule="topological"))


def _build_into(
    out: Path,
    graph,
    parallelism: Any,
    simulate: bool,
    data: np.ndarray | list[np.ndarray] | None,
    synth: str | None,
    simulator: str,
    inferences: int,
    seed: int,
    dsp: str | None,
) -> dict[str, Any]:
    from rlx_edge.ir.plan.program import Program

    if not isinstance(graph, Program):
        graph = as_program(graph)
    g = graph.graph
    design = FpgaDesign(graph, parallelism, dsp=dsp)
    key = design_key(graph, parallelism, dsp)
    vpath = out / f"{design.top_name}.v"
    text, roms = verilog_cached(design, key)
    vpath.write_text(text)
    rom_paths = []
    for name, hex_text in roms.items():
        (out / name).write_text(hex_text)
        rom_paths.append(out / name)
    svpath = out / f"{design.top_name}_axis.sv"
    svpath.write_text(wrapper_sv(design))
    table = design.layer_table()
    macs = sum(r["macs"] for r in table)
    result: dict[str, Any] = {
        "top": design.top_name,
        "files": {
            "verilog": str(vpath),
            "roms": [str(p) for p in rom_paths],
            "wrapper": str(svpath),
            "layers": str(out / "layers.json"),
        },
        "parallelism": parallelism if isinstance(parallelism, (int, str)) else "custom",
        "macs": macs,
        "ideal_cycles": sum(r["ideal_cycles"] or 0 for r in table),
        "per_layer": table,
        "streams": design.stream_info(),
        "cycles": None,
        "mismatches": None,
        "resources": None,
    }
    if simulate:
        from rlx_edge.targets.fpga import sim
        from rlx_edge.targets.fpga.edges import from_streams, model_mismatches, to_streams
        from rlx_edge.targets.reference import run as ref_run

        if data is None:
            inputs = _random_inputs(design, inferences, seed)
        else:
            inputs = [np.asarray(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
        if len(inputs) != len(g.inputs):
            raise FpgaConfigError(f"graph {g.name!r} takes {len(g.inputs)} inputs, got {len(inputs)} arrays")
        for v, arr in zip(g.inputs, inputs):
            shape = tuple(int(d) for d in g.types[v].shape)
            want = g.types[v].dtype.numpy
            if arr.dtype != want or tuple(arr.shape[1:]) != shape:
                raise FpgaConfigError(
                    f"input {v!r}: expected {want} [N, {', '.join(map(str, shape))}], got {arr.dtype} {list(arr.shape)}"
                )
        n = inputs[0].shape[0]
        # the datapath's int8 streams: the model's inputs, quantized on the host where the model quantizes
        d = design.graph
        streams = to_streams(g, d, design.edges, inputs)
        expected = [[] for _ in d.outputs]
        for i in range(n):
            outs = ref_run(d, [a[i] for a in streams])
            for k, o in enumerate(d.outputs):
                expected[k].append(outs[o])
        expected = [np.stack(e) for e in expected]
        bdir = sim.build([vpath], design.top_name, simulator)
        res = sim.run_vectors(
            bdir, design.top_name, design.stream_info(), streams, expected, simulator=simulator, data_files=rom_paths
        )
        outputs = from_streams(g, d, design.edges, [o.reshape(e.shape) for o, e in zip(res["outputs"], expected)])
        if design.edges:  # the float interface end to end: against the reference run on the whole model
            model_mismatches(g, inputs, outputs, res)
        phases = res["phase_cycles"]
        for i, row in enumerate(table):
            row["cycles"] = phases.get(str(i + 1))
        result.update(
            cycles=float(np.mean(res["cycles"])),
            cycles_per_inference=res["cycles"],
            compute_cycles=sum(phases.get(str(i + 1), 0.0) for i in range(len(table))),
            mismatches=res["mismatches"],
            first_mismatch=res["first_mismatch"],
            inferences=n,
            simulator=simulator,
            sim_wall_s=res["sim_wall_s"],
            build_wall_s=sim.build_seconds(bdir),  # of the build that made the (possibly cached) model
            outputs=outputs,
        )
    if synth:
        from rlx_edge.targets.fpga.synth import synthesize

        result["resources"] = synthesize(vpath, design.top_name, synth)  # reads the ROM files beside vpath
    (out / "layers.json").write_text(json.dumps(table, indent=1) + "\n")
    return result


def run(graph, inputs, *, parallelism: Any = "latency", simulator: str = "verilator", out_dir=None):
    """Run inputs through the simulated hardware (the ``fpga-sim`` target); returns outputs by name.

    ``inputs`` is one array per graph input (or a single array), with a leading
    batch axis when it has one more dimension than the graph input.
    """
    import tempfile

    from rlx_edge.ir.plan.program import Program

    g = graph.graph if isinstance(graph, Program) else graph
    arrs = [np.asarray(a) for a in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
    batched = arrs[0].ndim == len(g.types[g.inputs[0]].shape) + 1
    data = arrs if batched else [a[None] for a in arrs]
    with tempfile.TemporaryDirectory(prefix="rlx-fpga-") as td:
        res = build_fpga(graph, out_dir or td, parallelism=parallelism, simulate=True, data=data, simulator=simulator)
    outs = {o: (arr if batched else arr[0]) for o, arr in zip(g.outputs, res["outputs"])}
    return outs


def fpga_runner(graph, workdir=None, *, parallelism: Any = "latency", simulator: str = "verilator"):
    """``rlx-edge run --target fpga-sim``: one input dict in, the simulated outputs out."""

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = [inputs[v] for v in graph.inputs]  # one stream per graph input
        return run(graph, xs, parallelism=parallelism, simulator=simulator, out_dir=workdir)

    return run_one
