"""The ``rlx-edge`` command (ARCHITECTURE.md, "Command line").

User errors exit with status 2 and one line on stderr; a failed comparison
exits 1; ``--json`` prints exactly one JSON object on stdout. When the
reader of stdout goes away (``rlx-edge inspect M | head -1``) the command
exits 141 (128 + SIGPIPE, as a shell reports it) without a traceback.
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
from rlx_edge._io import atomic_dir, check_output_dir, check_output_file
from rlx_edge.boards import BOARDS, DEFAULT_BOARD, QEMU_TARGETS, get_board
from rlx_edge.data import load_arrays
from rlx_edge.errors import RlxError, one_line, shorten

ERROR_LIMIT = 280  # characters of an error message; with "rlx-edge: error: " a line stays under 300
TARGETS = ("reference", "cortexm-host", *QEMU_TARGETS, "fpga-sim", "jax")


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


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# argument types: checked while parsing, so a bad value stops before any work ----------
def _checked(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """``check`` as an argparse type: its RlxError (or ValueError) becomes argparse's one-line error."""

    def convert(text: str) -> Any:
        try:
            return check(text)
        except (RlxError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{shorten(text, 40)!r} is not an integer") from None


def _at_least(lo: int) -> Callable[[str], Any]:
    def _integer(text: str) -> int:
        v = _int(text)
        if v < lo:
            raise ValueError(f"must be >= {lo}, not {v}")
        return v

    return _checked(_integer)


def _power_of_two(text: str) -> int:
    v = _int(text)
    if v < 1 or v & (v - 1):
        raise ValueError(f"must be a power of two (1, 2, 4, ..., 16, ...), not {v}")
    return v


def _positive_seconds(text: str) -> float:
    v = float(text)
    if not v > 0 or v == float("inf"):  # NaN fails too
        raise ValueError(f"must be a positive number of seconds, not {shorten(text, 40)}")
    return v


def _fault_rate(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise ValueError(f"RATE is a probability per message: 0 <= RATE < 1, not {shorten(text, 40)}")
    return v


def _parallelism(text: str) -> int | str:
    from rlx_edge.targets.fpga.design import PRESETS

    if text in PRESETS:
        return text
    if text.lstrip("+-").isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"use {', '.join(PRESETS)} or a positive integer (PE x SIMD per layer), not {shorten(text, 40)!r}")


def _fpga_device(text: str) -> str:
    from rlx_edge.targets.fpga.devices import device

    return device(text).name


def _mhz(text: str) -> float:
    v = float(text)
    if not 0 < v < 10_000:  # NaN fails too
        raise ValueError(f"must be a clock in MHz (0 < F < 10000), not {shorten(text, 40)}")
    return v


def _file_path(text: str) -> str:
    check_output_file(text, "")
    return text


_output_file = _checked(_file_path)


def _output_dir(replaces: Callable[[Path], bool] | None) -> Callable[[str], str]:
    def _directory(text: str) -> str:
        check_output_dir(text, "", replaces)
        return text

    return _checked(_directory)


def _only_npy(path: Path) -> bool:
    return all(p.suffix == ".npy" and p.is_file() for p in path.iterdir())


def _binding(text: str) -> tuple[str, int]:
    from rlx_edge.ir.passes.bind_symbols import parse_binding

    return parse_binding(text)


def _add_bind(s: argparse.ArgumentParser) -> None:
    """--bind, on the commands that plan static sizes (compile, plan, profile; run on a compiled target) and on
    inspect (sizes and MACs of one binding). quantize and calibrate keep symbols: each calibration sample
    gives its own sizes, and one quantized .rlx then compiles for every binding."""
    s.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        type=_checked(_binding),
        help="give symbolic dimension NAME the size SIZE before anything else (repeatable)",
    )


def _bound(graph, args: argparse.Namespace):
    """``graph`` with the --bind sizes in place of its symbols (unchanged without --bind)."""
    if not args.bind:
        return graph
    from rlx_edge.ir.passes.bind_symbols import bind_symbols, bindings

    return bind_symbols(graph, bindings(args.bind))


# commands ------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> int:
    from rlx_edge.ir import inspect

    graph = _bound(_load(args.model), args)
    if args.provenance:
        from rlx_edge.pipeline import optimize_graph

        mir, passes = optimize_graph(graph)  # lowers the HIR blocks and optimizes, recording both per node
        if args.json:
            extra = {"passes": passes.to_json()} if args.passes and passes is not None else {}
            _emit_json({**inspect.summary(mir), "provenance": inspect.provenance(mir), **extra})
        else:
            print(inspect.dump(mir))
            print()
            print(inspect.provenance_text(mir))
        return 0
    if args.passes:
        from rlx_edge.pipeline import optimize_graph

        graph = _as_mir(graph)
        _, passes = optimize_graph(graph)
        assert passes is not None  # the optimizer is on
        report = passes.to_json() if args.json else passes.text()
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
    graph = _bound(_load(args.model), args)
    x = load_arrays(args.input)
    if args.trace and args.target != "reference":
        raise UsageError("--trace needs --target reference (targets return outputs only)")
    graph = _as_mir(graph)
    from rlx_edge.runners import prepare
    from rlx_edge.targets.reference import run

    options = {"device": args.device} if args.target == "jax" else {}
    run_target = None if args.target == "reference" else prepare(args.target, graph, **options)
    traces: list[dict[str, np.ndarray]] = []

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if run_target is not None:
            from rlx_edge.ir.interpret import bind_inputs

            return run_target(bind_inputs(graph, inputs))
        if args.trace:
            out, tr = run(graph, inputs, trace=True)
            traces.append(tr)
            return out
        return run(graph, inputs)

    outs = _run_many(graph, run_one, x)
    if not args.trace:
        _write_outputs(args.output, outs)
        return 0
    # The output is written while the trace is still under its temporary name:
    # a failure leaves neither, a success both.
    with atomic_dir(args.trace) as tdir:
        for name in traces[0]:
            arr = traces[0][name] if len(traces) == 1 else np.stack([t[name] for t in traces])
            (tdir / f"{_safe_name(name)}.npy").write_bytes(_npy_bytes(arr))
        out, trace = Path(args.output).resolve(), Path(args.trace).resolve()
        # An output inside the trace directory goes in with it.
        _write_outputs(str(tdir / out.relative_to(trace)) if out.is_relative_to(trace) else args.output, outs)
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
    from dataclasses import replace

    from rlx_edge.pipeline import AS_GIVEN, to_program

    graph = _bound(_load(args.model), args)
    program = to_program(graph, args.target, replace(AS_GIVEN, alignment=args.alignment))
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


def cmd_compare(args: argparse.Namespace) -> int:
    """Every output (and, against TFLite Micro, intermediate): integers exactly, floats within tolerance."""
    if args.inputs < 0:
        raise UsageError("--inputs must be >= 0")
    if args.inputs == 0 and not args.edge:
        raise UsageError("nothing to compare: --inputs 0 with --no-edge; give --inputs N")
    from rlx_edge.targets.reference.compare import compare_with_target, compare_with_tflm

    path = Path(args.model)
    how = {"edge": args.edge, "atol": args.atol, "rtol": args.rtol}
    if args.against in ("tflm", "reference"):
        if path.suffix.lower() != ".tflite":
            raise UsageError(f"--against {args.against} needs a .tflite model (TFLite Micro runs it)")
        _load(args.model)  # the clear error for a missing or corrupt file comes from the loader
        runner = "interpreter" if args.against == "tflm" else "arena"
        result = compare_with_tflm(path, n_inputs=args.inputs, seed=args.seed, runner=runner, **how)
        report = result.to_json()
        report["against"] = "tflm"
        report["ours"] = "reference" if runner == "interpreter" else "reference (planned arena)"
    else:
        from rlx_edge.runners import TARGETS, prepare

        if args.against not in TARGETS:
            raise UsageError(f"--against must be tflm, reference or a target ({', '.join(TARGETS)})")
        graph = _float_mir(args.model)
        result = compare_with_target(graph, prepare(args.against, graph), args.inputs, args.seed, **how)
        report = result.to_json()
        report["against"] = "reference"
        report["ours"] = args.against
    if args.json:
        _emit_json(report)
    else:
        print(_compare_text(result, report["ours"], report["against"]))
    return 0 if result.ok else 1


def _compare_text(result, ours: str, against: str) -> str:
    counts = f"{result.inputs} inputs + {result.edge_inputs} edge inputs"
    floats = ""
    if result.float_tensors:
        floats = (
            f"; {result.float_tensors} float tensors: max abs error {result.max_abs_error:.3g}, "
            f"max rel error {result.max_rel_error:.3g} (atol {result.atol:g}, rtol {result.rtol:g})"
        )
    if result.ok:
        verdict = "within tolerance" if result.float_tensors else "bit-exact"
        return f"{verdict}: {counts}, {result.tensors} tensors each ({ours}){floats}"
    m = result.first_mismatch
    return (
        f"MISMATCH: {result.mismatched_inputs}/{result.inputs} inputs and {result.mismatched_edge_inputs}/"
        f"{result.edge_inputs} edge inputs differ; first at {m.node} (tensor {m.tensor_index}) {m.where()} "
        f"index {list(m.index)}: {ours} {m.ours}, {against} {m.theirs}{floats}"
    )


def _as_mir(graph):
    """The model as given, as MIR (every command past inspect works on MIR): the pipeline's first stage."""
    from rlx_edge.pipeline import AS_GIVEN, optimize_graph

    return optimize_graph(graph, AS_GIVEN)[0]


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
    _, report = cli_quantize(
        _float_mir(args.model),
        args.output,
        data=args.data,
        record=args.record,
        scheme=args.scheme,
        method=args.method,
        report=args.report,
        float_interface=args.float_interface,
        target_sqnr=args.target_sqnr,
        mixed_schemes=args.mixed_schemes,
    )
    print(f"wrote {args.output}", file=sys.stderr)
    _print_quantize_summary(args, report)
    return 0


def cmd_qat(args: argparse.Namespace) -> int:
    """Quantization-aware training, then PTQ of the trained weights: an integer .rlx like quantize writes."""
    from rlx_edge.quant.qat import cli_qat

    if not args.output.endswith(".rlx"):
        raise UsageError("qat writes an .rlx file; name it like model_qat.rlx")
    _, summary = cli_qat(
        _float_mir(args.model),
        args.output,
        data=args.data,
        labels=args.labels,
        labels_key=args.labels_key,
        progress=not args.json,
        scheme=args.scheme,
        epochs=args.epochs,
        lr=args.lr,
        batch=args.batch,
        device=args.device,
        val_split=args.val_split,
        seed=args.seed,
        target_sqnr=args.target_sqnr,
        mixed_schemes=args.mixed_schemes,
    )
    if args.json:
        _emit_json(summary)
        return 0
    print(f"wrote {args.output}", file=sys.stderr)
    line = f"QAT {summary['scheme']} on {summary['device']}: {summary['epochs']} epochs, training loss (quantized)"
    line += f" {summary['loss_before']:.4f} -> {summary['loss_after']:.4f}"
    acc = summary.get("val_accuracy")
    if acc is not None:
        line += (
            f"; held-out accuracy ({summary['val_samples']} samples): float {100 * acc['float']:.2f} %, "
            f"PTQ {100 * acc['ptq']:.2f} %, QAT {100 * acc['qat']:.2f} %"
        )
    print(line + f" ({summary['seconds']:.1f} s)")
    return 0


def _fraction(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise ValueError(f"must be a fraction in [0, 1), not {shorten(text, 40)}")
    return v


def _positive(text: str) -> float:
    v = float(text)
    if not 0 < v < float("inf"):  # NaN fails too
        raise ValueError(f"must be a positive number, not {shorten(text, 40)}")
    return v


def _print_quantize_summary(args: argparse.Namespace, report: dict[str, Any] | None) -> None:
    from rlx_edge.quant.report import summary, summary_text

    no_data = "no SQNR summary: a calibration record holds ranges, not samples (give --data to measure)"
    if args.json:
        out: dict[str, Any] = {"output": args.output, "scheme": args.scheme, "report": args.report}
        out["summary"] = summary(report) if report is not None else None
        if report is None:
            out["reason"] = no_data
        _emit_json(out)
    else:
        print(summary_text(report) if report is not None else no_data)


# Options whose values may start with '-' (gcc's "-Os"); main() glues them to their value.
_DASH_VALUE_OPTIONS = ("--opt",)


def _mixed_schemes(value: str) -> tuple[str, ...]:
    """--mixed-schemes's comma-separated candidates, each a scheme mixed precision can choose."""
    from rlx_edge.quant.mixed import LEVELS

    names = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in names if v not in LEVELS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{value!r}: give a comma-separated subset of {','.join(LEVELS)}")
    return names


def _opt_level(value: str) -> str:
    """--opt's value as gcc's flag: "Os" and "-Os" both give "-Os"."""
    from rlx_edge.targets.cortexm.firmware import OPT_LEVELS

    flag = value if value.startswith("-") else f"-{value}"
    if flag not in OPT_LEVELS:
        levels = ", ".join(o.lstrip("-") for o in OPT_LEVELS)
        raise argparse.ArgumentTypeError(f"unknown optimization level {value!r}; use one of {levels}")
    return flag


def cmd_profile(args: argparse.Namespace) -> int:
    """Per-layer instructions (exact), estimated cycles, flash and arena bytes from one QEMU run."""
    from rlx_edge.hil.profile import profile

    if args.clock_mhz is not None and not args.clock_mhz > 0:
        raise UsageError("--clock-mhz must be positive")
    graph = _as_mir(_bound(_load(args.model), args))
    core = args.target.removeprefix("qemu-")
    prof = profile(graph, core, seed=args.seed, clock_mhz=args.clock_mhz)
    if args.plot:
        prof.plot(args.plot)
    if args.json:
        _emit_json(prof.to_json())
    else:
        print(prof.text())
    return 0 if prof.bit_exact else 1


def cmd_compile(args: argparse.Namespace) -> int:
    """C project for a core; with --firmware also the ELF; sizes from the linked image."""
    import tempfile

    from rlx_edge.pipeline import AS_GIVEN, to_program
    from rlx_edge.targets.cortexm import compile_project
    from rlx_edge.targets.cortexm.firmware import build_firmware, size_report

    graph = _bound(_load(args.model), args)
    board = get_board(args.board or DEFAULT_BOARD[args.target])
    program = to_program(graph, "cortexm", AS_GIVEN)
    out = Path(args.output)
    # Project and firmware are built under a temporary name and renamed in whole.
    with atomic_dir(out) as proj, tempfile.TemporaryDirectory() as tmp:
        info = compile_project(program, proj, core=args.target, optimize=args.optimize)
        fw_dir = proj / "firmware" if args.firmware else Path(tmp)
        # Debug info names the sources where they will be, not where they were built.
        prefix_map = f"-ffile-prefix-map={proj.resolve()}={out.resolve()}"
        elf = build_firmware(proj, board, fw_dir, opt=args.opt, extra_cflags=[prefix_map])
        sizes = size_report(elf, board)
    report: dict[str, Any] = {
        "target": args.target,
        "board": board.name,
        "arena_bytes": info["arena_bytes"],
        "weight_bytes": info.get("weight_bytes"),
        "optimize": args.optimize,
        "files": sorted(info["files"]),
        "bindings": dict(args.bind),  # symbol -> size, as --bind gave them
    }
    # ram: arena + stack + other == ram_bytes, measured in the linked image.
    report.update(flash_bytes=sizes["flash_bytes"], ram_bytes=sizes["ram_bytes"], ram=sizes["ram"])
    if args.firmware:
        report["elf"] = str(out.resolve() / "firmware" / elf.name)
    if args.json:
        _emit_json(report)
    else:
        ram = report["ram"]
        print(
            f"{graph.name}: {len(report['files'])} files in {out}/; flash {report['flash_bytes']:,} B, "
            f"RAM {report['ram_bytes']:,} B (arena {ram['arena']:,} B, stack {ram['stack']:,} B, "
            f"other {ram['other']:,} B) on {board.name}"
            + (f"; firmware {report['elf']}" if args.firmware else "")
            + "".join(f"; {k}={v}" for k, v in report["bindings"].items())
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
    """Verilog for the datapath; optionally simulate (bit-exact check, cycles), synthesize, place and route."""
    from rlx_edge.targets.fpga import FpgaConfigError, build_fpga

    folding = args.fit or args.latency_us is not None
    if (args.pnr or folding) and args.device is None:
        flag = "--pnr" if args.pnr else "--fit" if args.fit else "--latency-us"
        raise UsageError(f"{flag} needs --device (ecp5-25k, ecp5-85k or up5k)")
    if not (args.pnr or folding) and (args.device is not None or args.clock_mhz is not None):
        raise UsageError("--device and --clock-mhz go with --pnr, --fit or --latency-us")
    if args.fit and args.latency_us is not None:
        raise UsageError("--fit (the fastest design that fits) or --latency-us L (the smallest meeting L): not both")
    if folding and args.parallelism is not None:
        raise UsageError("--fit and --latency-us choose the parallelism; drop --parallelism")
    graph = _float_mir(args.model)
    data = None
    if args.data:
        x = load_arrays(args.data)
        if isinstance(x, dict):
            x = x[graph.inputs[0]] if graph.inputs[0] in x else next(iter(x.values()))
        data = [x if x.ndim == graph.types[graph.inputs[0]].rank + 1 else x[None]]
    if data is not None and not args.simulate:
        raise UsageError("--data goes with --simulate")
    fold_report = None
    parallelism = args.parallelism or "latency"
    try:
        if folding:
            from rlx_edge.targets.fpga import as_program
            from rlx_edge.targets.fpga.fold import fold

            graph = as_program(graph)
            folded = fold(graph, args.device, latency_us=args.latency_us, clock_mhz=args.clock_mhz)
            parallelism, fold_report = folded.parallelism, folded.report
        res = build_fpga(
            graph,
            args.output,
            parallelism=parallelism,
            simulate=args.simulate,
            data=data,
            synth=args.synth,
            simulator=args.simulator,
            pnr=args.device if args.pnr else None,
            clock_mhz=args.clock_mhz,
            progress=lambda line: print(f"rlx-edge fpga: {line}", file=sys.stderr, flush=True),
        )
    except FpgaConfigError as e:
        raise UsageError(str(e)) from None
    res.pop("outputs", None)
    if fold_report is not None:
        res["fold"] = fold_report
    if args.json:
        _emit_json(res)
    else:
        print(
            f"{res['top']}: Verilog in {args.output}/ ({', '.join(res['files'])}); ideal {res['ideal_cycles']:,} cycles"
        )
        if fold_report is not None:
            _print_fold(fold_report)
        if args.simulate:
            n = res["inferences"]
            print(f"simulated {n} inferences on {args.simulator}: {n - res['mismatches']}/{n} bit-exact, "
                  f"{res['cycles']:,.0f} cycles per inference")  # fmt: skip
        if args.synth:
            print(f"{args.synth} resources: {res['resources']}")
        if args.pnr:
            _print_pnr(res)
    return 1 if args.simulate and res["mismatches"] else 0


def _print_fold(f: dict[str, Any]) -> None:
    e, d = f["estimate"], f["device"]
    goal = "fastest that fits" if f["goal"] == "fit" else f"latency <= {f['target_latency_us']:g} µs"
    use = ", ".join(f"{k.upper()} {e[k]:,}/{f['usable'][k]:,}" for k in ("lut", "ff", "bram", "dsp"))
    print(f"fold for {d['name']} ({d['part']}, {goal}): estimate before synthesis {use} "
          f"(LUT/FF usable: {f['margin']:.0%} of the device); {e['cycles']:,} cycles, "
          f"{e['latency_us']:,.2f} µs at {e['clock_mhz']:g} MHz")  # fmt: skip
    stops = ", ".join(f"{k.upper()} ({len(v)} layers)" for k, v in f["stopped_by"].items() if v)
    if stops:
        print(f"raising parallelism further would exceed: {stops}")
    for row in f["layers"]:
        print(f"  {row['op']:<18} PE {row['pe']:>3} x SIMD {row['simd']:>3} {row['cycles']:>10,} cycles  "
              f"LUT {row['lut']:>6,} FF {row['ff']:>6,} BRAM {row['bram']:>3} DSP {row['dsp']:>3}  "
              f"{row['name']}")  # fmt: skip


def _print_pnr(res: dict[str, Any]) -> None:
    p, fmax = res["pnr"], res["fmax_mhz"]
    used = ", ".join(f"{k.upper()} {v['used']:,}/{v['available']:,}" for k, v in res["utilization"].items())
    print(f"{p['device']} ({p['part']}) routed{' (cached)' if p['cached'] else ''}: "
          f"Fmax {fmax:.1f} MHz (target {p['target_mhz']:g} MHz); {used}")  # fmt: skip
    print(f"latency {res['latency_us']:,.2f} µs per inference at {fmax:.1f} MHz "
          f"({res['cycles']:,.0f} cycles, {res['cycles_source']})")  # fmt: skip
    for row in res["per_layer"]:
        if row.get("cycles") is not None:
            print(f"  {row['index']:>3} {row['op']:<20} {row['cycles']:>10,.0f} cycles {row['latency_us']:>10,.2f} µs  "
                  f"{row['name']}")  # fmt: skip
    if "timing_met" in res:
        print(f"at {res['pnr']['target_mhz']:g} MHz: {res['latency_us_at_clock']:,.2f} µs; timing "
              + ("met" if res["timing_met"] else f"NOT met (Fmax {fmax:.1f} MHz)"))  # fmt: skip
    for note in p["caveats"]:
        print(f"note: {note}")


def cmd_hil(args: argparse.Namespace) -> int:
    """A HIL campaign: every input through the board (or QEMU), each output checked bit-exactly."""
    from rlx_edge.hil.campaign import run_campaign

    if args.places or args.farm or args.env:
        return _hil_farm(args)
    if args.board is None:
        raise UsageError("hil needs --board (one board), or --places/--farm/--env (a labgrid farm)")
    if len(args.model) != 1:
        raise UsageError(f"{len(args.model)} models on one board: run them one by one, or across a farm (--places)")
    if args.junit:
        raise UsageError("--junit reports a farm campaign (--places/--farm/--env)")
    graph = _float_mir(args.model[0])
    report = run_campaign(
        graph,
        args.board,
        port=args.port,
        data=args.data,
        count=args.count,
        progress=not args.json,
        seed=args.seed,
        timeout=args.timeout,
        faults=args.faults,
    )
    rep = report.to_json()
    if args.faults is not None:
        return _link_test(rep, args)
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


def _hil_farm(args: argparse.Namespace) -> int:
    """hil --places/--farm/--env: the models x inputs matrix across labgrid places."""
    from rlx_edge.hil.farm import require_labgrid

    require_labgrid()
    from rlx_edge.hil.farm import run_farm_campaign

    if args.places and args.farm:
        raise UsageError("--places names the places, --farm takes every idle one: give one of them")
    if args.board or args.port or args.faults is not None:
        raise UsageError("--board, --port and --faults are for one board; a farm place names its own board and port")
    places = [p.strip() for p in args.places.split(",") if p.strip()] if args.places else None
    report = run_farm_campaign(
        [_float_mir(m) for m in args.model],
        places,
        coordinator=args.coordinator,
        env=args.env,
        data=args.data,
        count=args.count,
        seed=args.seed,
        timeout=args.timeout,
        stream=None if args.json else sys.stderr,
    )
    if args.junit:
        report.write_junit(args.junit)
    rep = report.to_json()
    if args.json:
        _emit_json(rep)
    else:
        for m in rep["models"]:
            print(f"{m['model']}: {m['count'] - m['mismatches']}/{m['requested']} bit-exact, {m['errors']} errors "
                  f"({', '.join(f'{p} {n}' for p, n in m['by_place'].items())})")  # fmt: skip
        for p in rep["places"]:
            ticks = (p["latency"]["ticks"] or {}).get("p50")
            print(f"place {p['place']} ({p['board']}): {p['inputs']} inputs, {p['flashes']} flashes, "
                  f"p50 {ticks} ticks" + (f", dropped: {p['dropped']}" if p["dropped"] else ""))  # fmt: skip
    return 0 if rep["ok"] else 1


def _link_test(rep: dict[str, Any], args: argparse.Namespace) -> int:
    """hil --faults: inputs lost to faults are reported, not failures; a wrong result accepted is one."""
    if args.json:
        _emit_json(rep)
    else:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(rep["faults"]["by_kind"].items()))
        print(
            f"link test on {args.board} at fault rate {args.faults:g}: {rep['faults_injected']} faults injected"
            f"{f' ({kinds})' if kinds else ''}, {rep['retries']} retries, {rep['answered']}/{rep['requested']} "
            f"answered, {rep['wrong_accepted']} wrong results accepted"
        )
    return 1 if rep["wrong_accepted"] or not rep["answered"] else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from rlx_edge.demo import run_demo

    return run_demo(Path(args.output), as_json=args.json)


def cmd_targets(args: argparse.Namespace) -> int:
    """What each target supports, read off its rule table and declarations (the README's table)."""
    from rlx_edge.targets.support import support_table, targets_support

    if args.json:
        _emit_json({"targets": [t.to_json() for t in targets_support()]})
    else:
        sys.stdout.write(support_table())
    return 0


# parser --------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from rlx_edge.targets.reference.compare import DEFAULT_ATOL, DEFAULT_RTOL

    p = _Parser(
        prog="rlx-edge",
        description="Put neural networks on the smallest hardware.",
        epilog="exit status: 0 success; 1 a comparison failed; 2 a user error (one line on stderr); "
        "3 an internal error; 130 interrupted; 141 the reader of stdout went away (as in `rlx-edge ... | head`)",
    )
    p.add_argument("--version", action="version", version=f"rlx-edge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("inspect", help="summary and per-node table of a model")
    s.add_argument("model", metavar="MODEL", help=".rlx, .tflite or .onnx file")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--passes", action="store_true", help="also show what the optimizer fuses, and why not")
    s.add_argument(
        "--provenance",
        action="store_true",
        help="the optimized MIR, and per node its HIR block and the passes that rewrote it or could not (and why)",
    )
    _add_bind(s)
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("convert", help="import a model and save it as .rlx")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("-o", "--output", required=True, metavar="OUT.rlx", type=_output_file)
    s.set_defaults(fn=cmd_convert)

    s = sub.add_parser("run", help="run one input (a leading batch axis runs many)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--input", required=True, metavar="X.npy", help=".npy (one input) or .npz (inputs by name)")
    s.add_argument(
        "-o", "--output", required=True, metavar="Y.npy", type=_output_file, help=".npy, or .npz for several outputs"
    )
    s.add_argument("--target", default="reference", choices=TARGETS)
    s.add_argument(
        "--trace",
        metavar="DIR",
        type=_output_dir(replaces=_only_npy),
        help="write every intermediate as DIR/<value>.npy (DIR is replaced whole)",
    )
    s.add_argument("--device", default="cpu", help="jax device: cpu, gpu or tpu")
    _add_bind(s)
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser(
        "compare",
        help="check outputs and intermediates: integers bit-exact, floats within --atol/--rtol",
        description=(
            "Run the same inputs on two sides and compare. Integer tensors must be bit-exact. Float tensors pass "
            "when |ours - theirs| <= atol + rtol * |theirs| elementwise (numpy.isclose): correct float "
            "implementations sum in different orders and differ in the last bits, and sums that cancel to near "
            "zero keep an absolute error, hence atol. Exit 1 on any difference."
        ),
    )
    s.add_argument("model", metavar="MODEL")
    s.add_argument(
        "--against",
        required=True,
        metavar="tflm|reference|TARGET",
        help="tflm: the reference interpreter vs TFLite Micro (outputs and intermediates); "
        "reference: the reference run inside its planned arena vs TFLite Micro (also proves the arena plan); "
        "TARGET (jax, cortexm-host, qemu-m4, ...): that target's outputs vs the reference interpreter",
    )
    s.add_argument(
        "--inputs",
        type=_at_least(0),  # 0: the edge inputs alone
        default=50,
        metavar="N",
        help="N seeded random inputs (default 50); edge inputs extra",
    )
    s.add_argument(
        "--edge",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the 3 edge inputs (all minimum, all maximum, all zero point), counted apart as edge "
        "inputs (default: on; --no-edge runs exactly N)",
    )
    s.add_argument("--seed", type=_at_least(0), default=0)
    for name, default, kind in (("--atol", DEFAULT_ATOL, "absolute"), ("--rtol", DEFAULT_RTOL, "relative")):
        s.add_argument(
            name, type=float, default=default, help=f"{kind} tolerance, float tensors only (default {default:g})"
        )
    s.add_argument("--json", action="store_true", help="print one JSON object (float errors, atol, rtol included)")
    s.set_defaults(fn=cmd_compare)

    methods = ("minmax", "moving_average", "percentile", "entropy", "mse")
    s = sub.add_parser("calibrate", help="observe activation ranges on calibration data")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--data", required=True, metavar="D.npz", help=".npy or .npz of float calibration inputs")
    s.add_argument("-o", "--output", required=True, metavar="REC.json", type=_output_file)
    s.add_argument("--method", default="minmax", choices=methods)
    s.add_argument("--per-channel", action="store_true", help="also record per-channel activation ranges")
    s.set_defaults(fn=cmd_calibrate)

    s = sub.add_parser("quantize", help="post-training quantization")
    s.add_argument("model", metavar="MODEL")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="D.npz", help="calibrate on this data")
    src.add_argument("--record", metavar="REC.json", help="use a saved calibration record")
    s.add_argument("-o", "--output", required=True, metavar="OUT.rlx", type=_output_file)
    s.add_argument(
        "--scheme",
        default="int8",
        choices=("int8", "int16x8", "int4w", "mixed"),
        help="mixed: a scheme per layer, the smallest that keep the output SQNR >= --target-sqnr",
    )
    s.add_argument("--target-sqnr", type=float, metavar="DB", help="output SQNR vs float that --scheme mixed keeps")
    s.add_argument(
        "--mixed-schemes",
        type=_mixed_schemes,
        metavar="S,S",
        help="the schemes --scheme mixed chooses among (default int4w,int8,int16x8; int4w,int8 for Cortex-M)",
    )
    s.add_argument("--method", default="minmax", choices=methods)
    s.add_argument(
        "--report", metavar="R.json", type=_output_file, help="per-layer SQNR and output error (needs --data)"
    )
    s.add_argument("--float-interface", action="store_true", help="keep float input/output (quantize at the edges)")
    s.add_argument("--json", action="store_true", help="print the summary (output SQNR, 5 worst layers) as JSON")
    s.set_defaults(fn=cmd_quantize)

    s = sub.add_parser("qat", help="quantization-aware training, then quantization of the trained weights")
    s.add_argument("model", metavar="MODEL", help="a float model")
    s.add_argument("--data", required=True, metavar="D.npz", help=".npy or .npz of float training inputs")
    lab = s.add_mutually_exclusive_group(required=True)
    lab.add_argument("--labels", metavar="L.npy", help="class labels, one per sample")
    lab.add_argument("--labels-key", metavar="KEY", help="the array of D.npz that holds the labels")
    s.add_argument("-o", "--output", required=True, metavar="OUT.rlx", type=_output_file)
    s.add_argument(
        "--scheme",
        default="int8",
        choices=("int8", "int16x8", "int4w", "mixed"),
        help="mixed: a scheme per layer, chosen before training as quantize --scheme mixed does",
    )
    s.add_argument("--target-sqnr", type=float, metavar="DB", help="output SQNR vs float that --scheme mixed keeps")
    s.add_argument(
        "--mixed-schemes",
        type=_mixed_schemes,
        metavar="S,S",
        help="the schemes --scheme mixed chooses among (default int4w,int8,int16x8; int4w,int8 for Cortex-M)",
    )
    s.add_argument("--epochs", type=_at_least(1), default=10)
    s.add_argument("--lr", type=_checked(_positive), default=1e-4, help="Adam learning rate (default 1e-4)")
    s.add_argument("--batch", type=_at_least(1), default=32, help="mini-batch size (default 32)")
    s.add_argument("--device", default="cpu", choices=("cpu", "gpu"), help="jax backend to train on")
    s.add_argument(
        "--val-split",
        type=_checked(_fraction),
        default=0.0,
        metavar="F",
        help="hold out this fraction of the samples: not trained on, accuracy reported (default 0)",
    )
    s.add_argument("--seed", type=_at_least(0), default=0, help="seed of the split and the shuffling")
    s.add_argument("--json", action="store_true", help="print the summary (loss per epoch, accuracies) as JSON")
    s.set_defaults(fn=cmd_qat)

    s = sub.add_parser("compile", help="Cortex-M C project (and firmware ELF)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--target", default="cortex-m4", choices=tuple(DEFAULT_BOARD), help="the core to compile for")
    s.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        type=_output_dir(replaces=lambda d: (d / "model.h").is_file()),
        help="the C project (replaced whole when it holds an earlier one)",
    )
    s.add_argument("--board", help="board to link for (default: the QEMU board of the core)")
    s.add_argument("--firmware", action="store_true", help="also write the linked ELF (and .hex, .map)")
    s.add_argument(
        "--opt",
        default="-O2",
        type=_opt_level,
        help="optimization level for the firmware: O0, O1, O2, O3, Os, Ofast or Og (with or without the dash)",
    )
    s.add_argument(
        "--optimize",
        default="balanced",
        choices=("size", "balanced", "speed"),
        help="constant layouts: int8 weights and generic kernels (size), int8 weights (balanced), "
        "also int16-widened layouts where a kernel runs faster on them, at more flash (speed)",
    )
    _add_bind(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_compile)

    s = sub.add_parser("profile", help="per-layer instructions and estimated cycles under QEMU")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--target", default="qemu-m4", choices=("qemu-m4", "qemu-m3", "qemu-m7", "qemu-m33"))
    s.add_argument("--seed", type=int, default=0, help="seed of the random input (checked against the reference)")
    s.add_argument(
        "--clock-mhz", type=float, default=None, metavar="F", help="latency estimate clock (default: the board's)"
    )
    s.add_argument("--plot", metavar="P.png", type=_output_file, help="draw instructions and cycles per layer")
    _add_bind(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_profile)

    s = sub.add_parser("fpga", help="FPGA datapath: Verilog, simulation, synthesis, place and route")
    s.add_argument("model", metavar="MODEL")
    s.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        type=_output_dir(replaces=lambda d: (d / "layers.json").is_file()),
        help="where the Verilog goes (replaced whole when it holds an earlier design)",
    )
    s.add_argument(
        "--parallelism",
        default=None,
        type=_checked(_parallelism),
        help="area, balanced, latency (the default), or PE x SIMD per layer",
    )
    s.add_argument("--simulate", action="store_true", help="simulate and compare with the reference bit-exactly")
    s.add_argument("--data", metavar="X.npy", help="inputs for --simulate (default: seeded random)")
    s.add_argument("--simulator", default="verilator", choices=("verilator", "icarus"))
    s.add_argument("--synth", choices=("ice40", "ecp5", "xilinx"), help="Yosys resource counts")
    s.add_argument(
        "--device", type=_checked(_fpga_device), metavar="D", help="part for --pnr: ecp5-25k, ecp5-85k or up5k"
    )
    s.add_argument(
        "--pnr", action="store_true", help="Yosys + nextpnr: routed utilization, Fmax, latency in µs (cached)"
    )
    s.add_argument(
        "--clock-mhz", type=_checked(_mhz), metavar="F", help="nextpnr's timing target (default: the device's)"
    )
    s.add_argument(
        "--fit", action="store_true", help="fold PE x SIMD per layer: the fastest design that fits --device (estimate)"
    )
    s.add_argument(
        "--latency-us",
        type=_checked(_positive_seconds),
        metavar="L",
        help="fold PE x SIMD per layer: the smallest design meeting L µs on --device at its clock (or --clock-mhz)",
    )
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_fpga)

    s = sub.add_parser("hil", help="hardware-in-the-loop campaign on a board or QEMU, or across a labgrid farm")
    s.add_argument("model", metavar="MODEL", nargs="+", help="one model on --board; any number across a farm")
    s.add_argument("--board", help=f"{', '.join(BOARDS)}, or a board definition (.toml)")
    s.add_argument("--port", metavar="URL", help="pyserial URL of a real board (default: boot QEMU)")
    s.add_argument("--data", metavar="D.npz|X.npy", help="inputs (and labels); default: seeded random inputs")
    s.add_argument("--count", type=_at_least(1), help="how many inputs (default: all of --data, else 20)")
    s.add_argument("--seed", type=_at_least(0), default=0)
    s.add_argument(
        "--timeout", type=_checked(_positive_seconds), default=2.0, metavar="S", help="seconds per command attempt"
    )
    s.add_argument(
        "--faults",
        type=_checked(_fault_rate),
        metavar="RATE",
        help="test the link: corrupt, drop, delay or reset each message with probability RATE (QEMU or socket://)",
    )
    farm = s.add_argument_group("labgrid farm (pip install 'rlx-edge[farm]')")
    farm.add_argument("--places", metavar="P1,P2", help="run across these labgrid places (comma-separated)")
    farm.add_argument("--farm", action="store_true", help="run across every idle place of the coordinator")
    farm.add_argument("--env", metavar="ENV.yaml", help="labgrid environment: its RemotePlaces and coordinator")
    farm.add_argument("--coordinator", metavar="HOST:PORT", help="labgrid coordinator (default: $LG_COORDINATOR)")
    farm.add_argument("--junit", metavar="F.xml", type=_output_file, help="also write a JUnit XML report")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_hil)

    s = sub.add_parser("plan", help="static arena plan")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("--target", default="reference", choices=TARGETS)
    s.add_argument(
        "--alignment", type=_checked(_power_of_two), default=16, help="offset alignment in bytes (power of two)"
    )
    s.add_argument("--plot", metavar="arena.png", type=_output_file, help="draw the plan (.png or .svg)")
    _add_bind(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_plan)

    s = sub.add_parser("export", help="write a TFLite flatbuffer (runs in TFLite Micro)")
    s.add_argument("model", metavar="MODEL")
    s.add_argument("-o", "--output", required=True, metavar="OUT.tflite", type=_output_file)
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
    s.add_argument("--batch-size", type=_at_least(1), default=256)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_eval)

    s = sub.add_parser("demo", help="the main job on the bundled default model")
    s.add_argument("-o", "--output", default="out/demo", metavar="DIR", type=_output_dir(replaces=None))
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_demo)

    s = sub.add_parser("targets", help="what each target supports: schemes, inputs, ops")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_targets)
    return p


def _glue_dash_values(argv: Sequence[str]) -> list[str]:
    """``--opt -Os`` as ``--opt=-Os``: argparse takes a separate value starting with '-' for an option."""
    out: list[str] = []
    it = iter(argv)
    for tok in it:
        if tok in _DASH_VALUE_OPTIONS:
            nxt = next(it, None)
            out.append(tok if nxt is None else f"{tok}={nxt}")
        else:
            out.append(tok)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_glue_dash_values(sys.argv[1:] if argv is None else argv))
        if not getattr(args, "fn", None):
            parser.print_help(sys.stderr)
            return 2
        code = int(args.fn(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, inside the handlers, not at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except SystemExit:  # --help and --version print, then exit through argparse
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return _stdout_gone()
        raise
    except RlxError as e:
        # One bounded line, whatever the message held (a raw tensor name can be megabytes).
        print(f"rlx-edge: error: {one_line(str(e), ERROR_LIMIT)}", file=sys.stderr)
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


def _stdout_gone() -> int:
    """stdout's reader closed early (``rlx-edge inspect M | head -1``): exit 141 quietly.

    141 (128 + SIGPIPE) is what a shell reports for a writer killed by a closed
    pipe, so ``set -o pipefail`` scripts see the usual status. stdout goes to
    /dev/null first: Python flushes it again at exit and would print a warning.
    """
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
