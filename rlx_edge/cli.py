"""The ``rlx-edge`` command (ARCHITECTURE.md, "Command line").

User errors exit with status 2 and one line on stderr; a failed comparison
exits 1; ``--json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlx_edge import __version__
from rlx_edge.errors import RlxError

TARGETS = ("reference", "cortexm-host", "qemu-m3", "qemu-m4", "qemu-m33", "qemu-m7", "fpga-sim", "jax")


class UsageError(RlxError):
    """Bad command-line usage."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints usage plus the error; the contract is one line.
        where = self.prog.removeprefix("rlx-edge").strip()
        raise UsageError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


# helpers -----------------------------------------------------------------------
def _load(path: str):
    from rlx_edge.frontends import load_model

    return load_model(path)


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _read_array_file(path: str) -> dict[str, np.ndarray] | np.ndarray:
    p = Path(path)
    if not p.exists():
        raise RlxError(f"{path}: no such file")
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as e:
        raise RlxError(f"{path}: not a readable .npy/.npz file ({e.__class__.__name__}: {e})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            return {k: data[k] for k in data.files}
    return data


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# commands ------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> int:
    from rlx_edge.ir import inspect

    graph = _load(args.model)
    if args.passes:
        from rlx_edge.ir.passes.manager import passes_report

        graph = _as_mir(graph)
        report = passes_report(graph, as_json=args.json)
        if args.json:
            _emit_json({**inspect.summary(graph), "passes": report})
        else:
            print(inspect.dump(graph))
            print()
            print(report)
        return 0
    if args.json:
        _emit_json(inspect.summary(graph))
    else:
        print(inspect.dump(graph))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from rlx_edge.ir.serialize import save

    graph = _load(args.model)
    if not args.output.endswith(".rlx"):
        raise UsageError(f"convert writes .rlx files; name the output like {Path(args.output).stem}.rlx")
    save(graph, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _run_many(graph, run_one: Callable, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run one input, or many along a leading batch axis (stacked outputs)."""
    if isinstance(x, dict) or len(graph.inputs) != 1:
        if not isinstance(x, dict):
            names = ", ".join(graph.inputs)
            raise RlxError(f"model has {len(graph.inputs)} inputs ({names}); pass an .npz with arrays named so")
        return run_one(x)
    t = graph.types[graph.inputs[0]]
    if x.ndim == t.rank + 1:
        outs = [run_one({graph.inputs[0]: xi}) for xi in x]
        return {k: np.stack([o[k] for o in outs]) for k in outs[0]}
    if x.ndim == t.rank and t.rank and t.shape[0] == 1 and x.shape[0] > 1:
        outs = [run_one({graph.inputs[0]: x[i : i + 1]}) for i in range(x.shape[0])]
        return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    return run_one({graph.inputs[0]: x})


def cmd_run(args: argparse.Namespace) -> int:
    graph = _load(args.model)
    x = _read_array_file(args.input)
    if args.trace and args.target != "reference":
        raise UsageError("--trace needs --target reference (targets return outputs only)")
    graph = _as_mir(graph)
    from rlx_edge.targets.reference import run
    from rlx_edge.targets.registry import prepare

    options = {"device": args.device} if args.target == "jax" else {}
    run_target = None if args.target == "reference" else prepare(args.target, graph, **options)
    traces: list[dict[str, np.ndarray]] = []

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if run_target is not None:
            from rlx_edge.targets.reference.interpreter import bind_inputs

            return run_target(bind_inputs(graph, inputs))
        if args.trace:
            out, tr = run(graph, inputs, trace=True)
            traces.append(tr)
            return out
        return run(graph, inputs)

    outs = _run_many(graph, run_one, x)
    _write_outputs(args.output, outs)
    if args.trace:
        from rlx_edge._io import atomic_write_bytes

        tdir = Path(args.trace)
        for name in traces[0]:
            arr = traces[0][name] if len(traces) == 1 else np.stack([t[name] for t in traces])
            atomic_write_bytes(tdir / f"{_safe_name(name)}.npy", _npy_bytes(arr))
    return 0


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _write_outputs(path: str, outs: dict[str, np.ndarray]) -> None:
    import io

    from rlx_edge._io import atomic_write_bytes

    if path.endswith(".npz"):
        buf = io.BytesIO()
        np.savez(buf, **{_safe_name(k): v for k, v in outs.items()})
        atomic_write_bytes(path, buf.getvalue())
        return
    if len(outs) != 1:
        raise UsageError(f"model has {len(outs)} outputs ({', '.join(outs)}); write them to an .npz file")
    atomic_write_bytes(path, _npy_bytes(next(iter(outs.values()))))


def cmd_plan(args: argparse.Namespace) -> int:
    from rlx_edge.ir.plan import plan

    graph = _float_mir(args.model)
    scratch = None
    if args.target == "cortexm-host" or args.target.startswith("qemu-"):
        from rlx_edge.targets.cortexm import scratch_bytes as scratch
    elif args.target != "reference":
        raise UsageError(f"target {args.target!r} has no planner rules; use reference, cortexm-host or qemu-*")
    program = plan(graph, target=args.target, alignment=args.alignment, scratch=scratch)
    if args.plot:
        from rlx_edge.ir.plan.draw import draw_plan

        draw_plan(program, args.plot)
    if args.json:
        _emit_json({**program.summary(), "buffers": program.table()})
        return 0
    s = program.summary()
    print(f"{graph.name}: arena {s['arena_bytes']:,} B (lower bound {s['lower_bound_bytes']:,} B), "
          f"scratch {s['scratch_bytes']:,} B, weights {s['weight_bytes']:,} B, {s['algorithm']}")  # fmt: skip
    print(f"{'offset':>8} {'bytes':>8} {'steps':>9}  values")
    for r in program.table():
        steps = f"{r['first_step']}..{r['last_step']}"
        print(f"{r['offset']:>8} {r['bytes']:>8} {steps:>9}  {', '.join(r['values']) or r['buffer']}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rlx_edge.frontends.tflite import export_tflite

    if not args.output.endswith(".tflite"):
        raise UsageError(f"export writes .tflite files; name the output like {Path(args.output).stem}.tflite")
    graph = _float_mir(args.model)
    export_tflite(graph, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _compare_target(graph, target: str, n: int, seed: int):
    """Outputs of ``target`` against the reference on seeded and edge inputs, exactly."""
    from rlx_edge.targets.reference import run
    from rlx_edge.targets.reference.compare import CompareResult, Mismatch, make_inputs
    from rlx_edge.targets.registry import prepare

    graph = _as_mir(graph)
    runner = prepare(target, graph)
    samples = make_inputs(graph, n, seed)
    first = None
    bad_inputs: set[int] = set()
    mismatches = 0
    for k, sample in enumerate(samples):
        want = run(graph, sample)
        got = runner(sample)
        for name in graph.outputs:
            a, b = np.asarray(got[name]), want[name]
            if a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b):
                continue
            mismatches += 1
            bad_inputs.add(k)
            if first is None:
                pos = tuple(int(i) for i in np.argwhere(a != b)[0]) if a.shape == b.shape else ()
                ours = a[pos].item() if pos else float("nan")
                theirs = b[pos].item() if pos else float("nan")
                first = Mismatch(name, -1, k, pos, ours, theirs, int((a != b).sum()) if a.shape == b.shape else a.size)
    return CompareResult(
        model=graph.name,
        inputs=len(samples),
        tensors=len(graph.outputs),
        compared=len(samples) * len(graph.outputs),
        mismatches=mismatches,
        mismatched_inputs=len(bad_inputs),
        first_mismatch=first,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    """Bit-exact check of every output and intermediate; exit 1 on any difference."""
    if args.inputs < 0:
        raise UsageError("--inputs must be >= 0")
    path = Path(args.model)
    if args.against in ("tflm", "reference"):
        if path.suffix.lower() != ".tflite":
            raise UsageError(f"--against {args.against} needs a .tflite model (TFLite Micro runs it)")
        from rlx_edge.frontends import load_model
        from rlx_edge.targets.reference.compare import compare_with_tflm

        load_model(path)  # the clear error for a missing or corrupt file comes from the loader
        runner = "interpreter" if args.against == "tflm" else "arena"
        result = compare_with_tflm(path, n_inputs=args.inputs, seed=args.seed, runner=runner)
        report = result.to_json()
        report["against"] = "tflm"
        report["ours"] = "reference" if runner == "interpreter" else "reference (planned arena)"
    else:
        from rlx_edge.targets.registry import TARGETS

        if args.against not in TARGETS:
            raise UsageError(f"--against must be tflm, reference or a target ({', '.join(TARGETS)})")
        result = _compare_target(_load(args.model), args.against, args.inputs, args.seed)
        report = result.to_json()
        report["against"] = "reference"
        report["ours"] = args.against
    if args.json:
        _emit_json(report)
    elif result.ok:
        print(f"bit-exact: {result.inputs}/{result.inputs} inputs, {result.tensors} tensors each ({report['ours']})")
    else:
        m = result.first_mismatch
        print(
            f"MISMATCH: {result.mismatched_inputs}/{result.inputs} inputs differ; first at {m.node} "
            f"(tensor {m.tensor_index}) input {m.input} index {list(m.index)}: {report['ours']} {m.ours}, "
            f"{report['against']} {m.theirs}"
        )
    return 0 if result.ok else 1


def _as_mir(graph):
    """HIR blocks lowered to MIR (every command past inspect works on MIR)."""
    if graph.stage == "hir":
        from rlx_edge.ir.passes.lower_hir import lower_hir

        return lower_hir(graph)
    return graph


def _float_mir(path: str):
    return _as_mir(_load(path))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from rlx_edge.quant.calibrate import cli_calibrate

    if not args.output.endswith(".json"):
        raise UsageError("calibrate writes a JSON calibration record; name it like rec.json")
    cli_calibrate(_float_mir(args.model), args.data, args.output, method=args.method, per_channel=args.per_channel)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from rlx_edge.quant.ptq import cli_quantize

    if not args.output.endswith(".rlx"):
        raise UsageError("quantize writes an .rlx file; name it like model_int8.rlx")
    cli_quantize(
        _float_mir(args.model),
        args.output,
        data=args.data,
        record=args.record,
        scheme=args.scheme,
        method=args.method,
        report=args.report,
        float_interface=args.float_interface,
    )
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


DEFAULT_BOARD = {
    "cortex-m3": "qemu-mps2-an385",
    "cortex-m4": "qemu-mps2-an386",
    "cortex-m7": "qemu-mps2-an500",
    "cortex-m33": "qemu-mps2-an505",
    "cortex-m0plus": "rpi-pico",
}


def cmd_compile(args: argparse.Namespace) -> int:
    """C project for a core; with --firmware also the ELF; sizes from the linked image."""
    import tempfile

    from rlx_edge.targets.cortexm import compile_project
    from rlx_edge.targets.cortexm_fw.boards import get_board
    from rlx_edge.targets.cortexm_fw.build import build_firmware, size_report

    graph = _float_mir(args.model)
    board = get_board(args.board or DEFAULT_BOARD[args.target])
    out = Path(args.output)
    info = compile_project(graph, out, core=args.target)
    report: dict[str, Any] = {
        "target": args.target,
        "board": board.name,
        "arena_bytes": info["arena_bytes"],
        "weight_bytes": info.get("weight_bytes"),
        "files": sorted(info["files"]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        fw_dir = out / "firmware" if args.firmware else Path(tmp)
        elf = build_firmware(out, board.name, fw_dir, opt=args.opt)
        sizes = size_report(elf, board.name)
        report.update(flash_bytes=sizes["flash_bytes"], ram_bytes=sizes["ram_bytes"])
        if args.firmware:
            report["elf"] = str(elf)
    if args.json:
        _emit_json(report)
    else:
        print(
            f"{graph.name}: {len(report['files'])} files in {out}/; flash {report['flash_bytes']:,} B, "
            f"RAM {report['ram_bytes']:,} B (arena {report['arena_bytes']:,} B) on {board.name}"
            + (f"; firmware {report['elf']}" if args.firmware else "")
        )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Accuracy (and agreement with a float model) over a whole dataset, batched."""
    from rlx_edge.targets.jax.evaluate import eval_dataset

    graph = _float_mir(args.model)
    float_graph = _float_mir(args.float_model) if args.float_model else None
    labels: Any = None
    if args.labels is not None:
        labels = True if args.labels == "" else args.labels
    result = eval_dataset(
        graph,
        args.data,
        labels,
        target=args.target,
        device=args.device,
        batch_size=args.batch_size,
        progress=not args.json,
        float_graph=float_graph,
    )
    if args.json:
        _emit_json(result)
    else:
        parts = [f"{result['count']} samples"]
        if result.get("accuracy") is not None:
            parts.append(f"accuracy {100 * result['accuracy']:.2f} %")
        if result.get("agreement") is not None:
            parts.append(f"agreement with the float model {100 * result['agreement']:.2f} %")
        if result.get("samples_per_s") is not None:
            parts.append(f"{result['samples_per_s']:,.0f} samples/s on {args.target}")
        print(", ".join(parts))
    return 0


def cmd_fpga(args: argparse.Namespace) -> int:
    """Verilog for the datapath; optionally simulate (bit-exact check, cycles) and synthesize."""
    from rlx_edge.targets.fpga import FpgaConfigError, build_fpga

    graph = _float_mir(args.model)
    data = None
    if args.data:
        x = _read_array_file(args.data)
        if isinstance(x, dict):
            x = x[graph.inputs[0]] if graph.inputs[0] in x else next(iter(x.values()))
        data = [x if x.ndim == graph.types[graph.inputs[0]].rank + 1 else x[None]]
    if data is not None and not args.simulate:
        raise UsageError("--data goes with --simulate")
    parallelism: Any = int(args.parallelism) if args.parallelism.isdigit() else args.parallelism
    try:
        res = build_fpga(
            graph,
            args.output,
            parallelism=parallelism,
            simulate=args.simulate,
            data=data,
            synth=args.synth,
            simulator=args.simulator,
        )
    except FpgaConfigError as e:
        raise UsageError(str(e)) from None
    res.pop("outputs", None)
    if args.json:
        _emit_json(res)
    else:
        print(
            f"{graph.name}: Verilog in {args.output}/ ({', '.join(res['files'])}); ideal {res['ideal_cycles']:,} cycles"
        )
        if args.simulate:
            n = res["inferences"]
            print(f"simulated {n} inferences on {args.simulator}: {n - res['mismatches']}/{n} bit-exact, "
                  f"{res['cycles']:,.0f} cycles per inference")  # fmt: skip
        if args.synth:
            print(f"{args.synth} resources: {res['resources']}")
    return 1 if args.simulate and res["mismatches"] else 0


def cmd_hil(args: argparse.Namespace) -> int:
    """A HIL campaign: every input through the board (or QEMU), each output checked bit-exactly."""
    from rlx_edge.hil.campaign import run_campaign

    graph = _float_mir(args.model)
    report = run_campaign(
        graph, args.board, port=args.port, data=args.data, count=args.count, progress=not args.json, seed=args.seed
    )
    rep = report.to_json()
    if args.json:
        _emit_json(rep)
    else:
        lat = rep.get("latency") or {}
        secs = lat.get("seconds") or {}
        print(
            f"{rep['count']} inputs on {args.board}: {rep['count'] - rep['mismatches']}/{rep['count']} bit-exact, "
            f"{rep['errors']} errors"
            + (f", accuracy {100 * rep['accuracy']:.2f} %" if rep.get("accuracy") is not None else "")
            + (f", latency p50 {1e3 * secs['p50']:.2f} ms" if secs.get("p50") is not None else "")
        )
        if rep.get("first_mismatch"):
            m = rep["first_mismatch"]
            print(f"first mismatch: input {m['input_index']} element {m['element_index']}: "
                  f"board {m['got']}, reference {m['expected']}")  # fmt: skip
    return 1 if rep["mismatches"] or rep["errors"] else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from rlx_edge.demo import run_demo

    return run_demo(Path(args.output), as_json=args.json)


# parser --------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rlx-edge", description="Put neural networks on the smallest hardware.")
    p.add_argument("--version", action="version", version=f"rlx-edge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("inspect", help="summary and per-node table of a model")
    s.add_argument("model", metavar="MODEL", help=".rlx, .tflite or .onnx file")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--passes", action="store_true", help="also show what the optimizer fuses, and why not")
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("convert", help="import a model and save it as .rlx")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("-o", "--output", required=True, metavar="OUT.rlx")
    s.set_defaults(fn=cmd_convert)

    s = sub.add_parser("run", help="run one input (a leading batch axis runs many)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--input", required=True, metavar="X.npy", help=".npy (one input) or .npz (inputs by name)")
    s.add_argument("-o", "--output", required=True, metavar="Y.npy", help=".npy, or .npz for several outputs")
    s.add_argument("--target", default="reference", choices=TARGETS)
    s.add_argument("--trace", metavar="DIR", help="write every intermediate as DIR/<value>.npy")
    s.add_argument("--device", default="cpu", help="jax device: cpu, gpu or tpu")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("compare", help="bit-exact check of outputs and intermediates")
    s.add_argument("model", metavar="MODEL")
    s.add_argument(
        "--against",
        required=True,
        metavar="tflm|reference|TARGET",
        help="tflm: our reference vs TFLite Micro; reference: the planned-arena run vs TFLite Micro",
    )
    s.add_argument("--inputs", type=int, default=50, help="seeded random inputs (edge inputs are added)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_compare)

    methods = ("minmax", "moving_average", "percentile", "entropy", "mse")
    s = sub.add_parser("calibrate", help="observe activation ranges on calibration data")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--data", required=True, metavar="D.npz", help=".npy or .npz of float calibration inputs")
    s.add_argument("-o", "--output", required=True, metavar="REC.json")
    s.add_argument("--method", default="minmax", choices=methods)
    s.add_argument("--per-channel", action="store_true", help="also record per-channel activation ranges")
    s.set_defaults(fn=cmd_calibrate)

    s = sub.add_parser("quantize", help="post-training quantization")
    s.add_argument("model", metavar="MODEL")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="D.npz", help="calibrate on this data")
    src.add_argument("--record", metavar="REC.json", help="use a saved calibration record")
    s.add_argument("-o", "--output", required=True, metavar="OUT.rlx")
    s.add_argument("--scheme", default="int8", choices=("int8", "int16x8", "int4w"))
    s.add_argument("--method", default="minmax", choices=methods)
    s.add_argument("--report", metavar="R.json", help="per-layer SQNR and output error (needs --data)")
    s.add_argument("--float-interface", action="store_true", help="keep float input/output (quantize at the edges)")
    s.set_defaults(fn=cmd_quantize)

    s = sub.add_parser("compile", help="Cortex-M C project (and firmware ELF)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--target", default="cortex-m4", choices=tuple(DEFAULT_BOARD), help="the core to compile for")
    s.add_argument("-o", "--output", required=True, metavar="DIR")
    s.add_argument("--board", help="board to link for (default: the QEMU board of the core)")
    s.add_argument("--firmware", action="store_true", help="also write the linked ELF (and .hex, .map)")
    s.add_argument("--opt", default="-O2", help="optimization level for the firmware (-O2, -Os, -Ofast, ...)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_compile)

    s = sub.add_parser("fpga", help="FPGA datapath: Verilog, simulation, synthesis")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("-o", "--output", required=True, metavar="DIR")
    s.add_argument("--parallelism", default="latency", help="area, balanced, latency, or PE x SIMD per layer")
    s.add_argument("--simulate", action="store_true", help="simulate and compare with the reference bit-exactly")
    s.add_argument("--data", metavar="X.npy", help="inputs for --simulate (default: seeded random)")
    s.add_argument("--simulator", default="verilator", choices=("verilator", "icarus"))
    s.add_argument("--synth", choices=("ice40", "ecp5", "xilinx"), help="Yosys resource counts")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_fpga)

    s = sub.add_parser("hil", help="hardware-in-the-loop campaign on a board or QEMU")
    s.add_argument("model", metavar="MODEL")
    s.add_argument(
        "--board", required=True, help="qemu-mps2-an385/an386/an500/an505, nucleo-l4r5zi, rpi-pico, or a .toml"
    )
    s.add_argument("--port", metavar="URL", help="pyserial URL of a real board (default: boot QEMU)")
    s.add_argument("--data", metavar="D.npz|X.npy", help="inputs (and labels); default: seeded random inputs")
    s.add_argument("--count", type=int, help="how many inputs (default: all of --data, else 20)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_hil)

    s = sub.add_parser("plan", help="static arena plan")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--target", default="reference", choices=TARGETS)
    s.add_argument("--alignment", type=int, default=16, help="offset alignment in bytes (power of two)")
    s.add_argument("--plot", metavar="arena.png", help="draw the plan (.png or .svg)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_plan)

    s = sub.add_parser("export", help="write a TFLite flatbuffer (runs in TFLite Micro)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("-o", "--output", required=True, metavar="OUT.tflite")
    s.set_defaults(fn=cmd_export)

    s = sub.add_parser("eval", help="accuracy and agreement over a dataset (batched)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--data", required=True, metavar="D.npz", help="inputs (and labels, under 'labels' or 'y')")
    s.add_argument(
        "--labels", nargs="?", const="", default=None, metavar="L.npy", help="labels file, or alone: read from D.npz"
    )
    s.add_argument("--float-model", metavar="F", help="float model to measure top-1 agreement against")
    s.add_argument("--target", default="jax", choices=("jax", "reference"))
    s.add_argument("--device", default="cpu", help="jax device: cpu, gpu, tpu or gpu:N")
    s.add_argument("--batch-size", type=int, default=256)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_eval)

    s = sub.add_parser("demo", help="the main job on the bundled default model")
    s.add_argument("-o", "--output", default="out/demo", metavar="DIR")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "fn", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.fn(args) or 0)
    except RlxError as e:
        msg = " ".join(str(e).split())  # one line, whatever the message held
        print(f"rlx-edge: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlx-edge: interrupted", file=sys.stderr)
        return 130
    except Exception:
        # Not the user's fault: keep the traceback for the bug report, and do not
        # exit 1, which means "comparison failed".
        import traceback

        traceback.print_exc()
        print(
            "rlx-edge: internal error (a bug in rlx-edge; please report it with the traceback above)", file=sys.stderr
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
