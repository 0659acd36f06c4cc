"""Resource counts from Yosys synthesis (``synth_ice40``, ``synth_ecp5``, ``synth_xilinx``).

Runs the system ``yosys`` binary (Debian's 0.23 reads Amaranth's Verilog
fine for these flows) and sums the mapped cells into LUT, FF, BRAM and DSP
counts; the raw cell histogram is kept alongside.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rlx_edge.errors import RlxError

FAMILIES = {
    "ice40": "synth_ice40 -dsp -top {top}",
    "ecp5": "synth_ecp5 -top {top}",
    "xilinx": "synth_xilinx -family xc7 -top {top}",
}

# cell name -> (category, weight); a RAMB36 is two 18 Kb BRAM units, counted as 1 of 36 Kb
_CELLS = [
    (r"^SB_LUT4$", "lut", 1),
    (r"^SB_CARRY$", "carry", 1),
    (r"^SB_DFF", "ff", 1),
    (r"^SB_RAM40_4K", "bram", 1),
    (r"^SB_SPRAM256KA$", "bram", 1),
    (r"^SB_MAC16$", "dsp", 1),
    (r"^LUT4$", "lut", 1),
    (r"^CCU2C$", "lut", 2),  # two LUT4s in carry mode
    (r"^TRELLIS_FF$", "ff", 1),
    (r"^TRELLIS_DPR16X4$", "lutram", 1),
    (r"^(DP16KD|PDPW16KD)$", "bram", 1),
    (r"^(MULT18X18D|ALU54B)$", "dsp", 1),
    (r"^LUT[1-6]$", "lut", 1),
    (r"^(FDRE|FDSE|FDCE|FDPE)$", "ff", 1),
    (r"^CARRY4$", "carry", 1),
    (r"^RAMB36E1$", "bram", 1),
    (r"^RAMB18E1$", "bram", 0.5),
    (r"^(RAM\d+[XSMD]\w*)$", "lutram", 1),
    (r"^DSP48E1$", "dsp", 1),
]


def yosys_binary() -> str:
    exe = shutil.which("yosys")
    if exe is None:
        raise RlxError("yosys is not installed (apt-get install yosys)")
    return exe


def categorize(cells: dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {"lut": 0, "ff": 0, "bram": 0, "dsp": 0, "carry": 0, "lutram": 0}
    for name, n in cells.items():
        for pat, cat, weight in _CELLS:
            if re.match(pat, name):
                out[cat] += n * weight
                break
    return {k: (int(v) if float(v).is_integer() else v) for k, v in out.items()}


def _parse_stat(text: str) -> dict[str, int]:
    """Cell counts of the top module from yosys' text ``stat`` (the last "Number of cells" block)."""
    blocks = text.split("Number of cells:")
    if len(blocks) < 2:
        raise RlxError("yosys stat printed no cell counts")
    cells: dict[str, int] = {}
    for line in blocks[-1].splitlines()[1:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            if cells:
                break
            continue
        cells[parts[0].lstrip("$").replace("\\", "")] = int(parts[1])
    return cells


def yosys_version() -> str:
    proc = subprocess.run([yosys_binary(), "-V"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def run_yosys(
    sources: list[Path],
    top: str,
    family: str,
    *,
    netlist: Path | None = None,
    timeout: float = 3600,
) -> tuple[dict[str, int], float]:
    """Synthesize ``sources`` (the first one's folder is the working directory) for ``family``.

    Returns the top module's mapped cell counts and the wall time; with ``netlist``
    the mapped design is also written there as JSON (nextpnr's input).
    """
    if family not in FAMILIES:
        raise RlxError(f"unknown FPGA family {family!r}; use {', '.join(FAMILIES)}")
    files = " ".join(str(Path(f).resolve()) for f in sources)
    flow = FAMILIES[family].format(top=top) + (f" -json {Path(netlist).resolve()}" if netlist is not None else "")
    with tempfile.TemporaryDirectory(prefix="rlx-yosys-") as td:
        stat = Path(td) / "stat.json"
        # plain-text stat: yosys 0.23's `stat -json` is malformed after synth_xilinx
        script = f"read_verilog -sv {files}; {flow}; tee -q -o {stat} stat"
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [yosys_binary(), "-q", "-p", script],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                cwd=Path(sources[0]).resolve().parent,  # $readmemh files are named relative to the Verilog
            )
        except subprocess.TimeoutExpired:
            raise RlxError(f"yosys {family} synthesis of {top} took over {timeout:.0f} s; stopped") from None
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not stat.is_file():
            raise RlxError(f"yosys {family} synthesis of {top} failed:\n{(proc.stderr or proc.stdout)[-2000:]}")
        text = stat.read_text()
    return _parse_stat(text), wall


def synthesize(verilog: str | Path, top: str, family: str = "ice40", *, timeout: float = 3600) -> dict[str, Any]:
    """Synthesize ``verilog`` for ``family``; returns LUT/FF/BRAM/DSP counts, cells and wall time."""
    cells, wall = run_yosys([Path(verilog)], top, family, timeout=timeout)
    return {"family": family, **categorize(cells), "cells": cells, "synth_wall_s": wall}
