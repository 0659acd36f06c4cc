"""Per-layer profile of a model's firmware under QEMU: instructions (exact), cycles (estimated), bytes.

One QEMU run of the model-runner firmware on one input does everything: its
output is compared with the integer reference (``bit_exact``), and the
instruction-count plugin splits the ``rlx_model_invoke`` call at every
kernel call's ``BL`` and return address, so the layers' instructions add up
to the whole invoke exactly. A layer's ``instructions`` are its call and the
glue before it (argument set-up; for the first layer also the input copies;
the last layer also takes the output copies and the return);
``kernel_instructions`` are the call alone.

Cycles are an **estimate**: the plugin's per-address counts, each address's
instruction class read off the disassembly, times that class's cycles in
:data:`CYCLE_TABLES` for the core. The tables follow the instruction timings
of ARM's technical reference manuals, taking fixed values where the real
cost varies (a taken branch refills a pipeline of 1-3 stages; a load
pipelined behind another costs one cycle less; wait states of the flash are
left out). They do not model the Cortex-M7's dual issue or caches, so its
estimate is an upper bound.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.boards import ALIASES, get_board
from rlx_edge.errors import RlxError
from rlx_edge.hil.qemu import QemuSession
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.inspect import node_macs
from rlx_edge.targets.cortexm.emit import emit
from rlx_edge.targets.cortexm.firmware import IoLayout, build_model_firmware, size_report
from rlx_edge.targets.cortexm.qemu import InstructionCounter, call_return_sites, disassemble
from rlx_edge.targets.cortexm.rules import layer_for

CORES = ("m4", "m3", "m7", "m33")

# Cycles per instruction class. "load"/"store": single LDR/STR and friends;
# "ldm"/"stm": per register moved, plus one; "branch": taken or not, averaged
# to 2 (1 + a 1-3 cycle refill when taken); "call": BL/BLX, 1 + refill.
_M4 = {
    "alu": 1,
    "mul": 1,
    "mac": 1,  # MLA, SMLA*, SMLAD, SMULL, SMLAL: single cycle on the M4
    "dsp": 1,  # SIMD add/subtract, SXTB16, SSAT/USAT
    "div": 7,  # SDIV/UDIV: 2-12, early termination
    "load": 2,
    "store": 1,
    "ldm": 1,  # per register, plus "ldm_base"
    "ldm_base": 1,
    "branch": 2,
    "call": 3,
    "fp": 1,
    "fp_div": 14,
    "other": 1,
}
_M3 = {**_M4, "mac": 2, "long_mul": 4}  # MLA 2; UMULL/SMULL/SMLAL 3-5 (Cortex-M3 TRM)
_M4 = {**_M4, "long_mul": 1}
CYCLE_TABLES: dict[str, dict[str, float]] = {"m4": _M4, "m3": _M3, "m7": _M4, "m33": _M4}

_CLASSES = [
    (re.compile(r"^(sdiv|udiv)"), "div"),
    (re.compile(r"^(umull|smull|umlal|smlal(?!d|bb|bt|tb|tt|w))"), "long_mul"),
    (re.compile(r"^(mla|mls|smla|smlsd|smmla|smmls|smlad|smuad|smusd|smlald|smlsld)"), "mac"),
    (re.compile(r"^(mul|smul|smmul)"), "mul"),
    (
        re.compile(r"^(ssat|usat|sxtb16|uxtb16|sxtab16|qadd|qsub|qdadd|qdsub|sadd|ssub|uadd|usub|sel|shadd|uhadd)"),
        "dsp",
    ),
    (re.compile(r"^(ldm|pop)"), "ldm"),
    (re.compile(r"^(stm|push)"), "stm"),
    (re.compile(r"^ldr|^ldrex"), "load"),
    (re.compile(r"^str|^strex"), "store"),
    (re.compile(r"^(bl|blx)(\.w|\.n)?$"), "call"),
    (re.compile(r"^(b|bx|cbz|cbnz|tbb|tbh)(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)?(\.w|\.n)?$"), "branch"),
    (re.compile(r"^vdiv|^vsqrt"), "fp_div"),
    (re.compile(r"^v"), "fp"),
]
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{4} ?){1,2}\s+(\S+)\s*(.*)$")
_BL = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{4} [0-9a-f]{4}\s+bl\s+[0-9a-f]+ <(\w+)>\s*$")
_INVOKE = ("rlx_model_invoke_multi", "rlx_model_invoke")


def instruction_class(mnemonic: str, operands: str = "") -> tuple[str, int]:
    """(class, registers moved) of one disassembled instruction; the count matters for ldm/stm only."""
    m = mnemonic.lower()
    for pattern, cls in _CLASSES:
        if pattern.match(m):
            regs = (
                len(re.findall(r"\b(?:r\d+|lr|pc|ip|sp|fp|sl|sb)\b", operands.split("{", 1)[-1]))
                if "{" in operands
                else 0
            )
            if cls in ("ldm", "stm"):
                return cls, max(regs, 1)
            if cls == "load" and re.match(r"\s*pc\b", operands):  # a load into pc is a jump
                return "branch", 0
            return cls, 0
    return ("alu" if re.match(r"^[a-z]", m) else "other"), 0


def instruction_cycles(core: str, mnemonic: str, operands: str = "") -> float:
    """The estimated cycles of one instruction on ``core`` (see :data:`CYCLE_TABLES`)."""
    table = CYCLE_TABLES[core]
    cls, regs = instruction_class(mnemonic, operands)
    if cls in ("ldm", "stm"):
        return table["ldm_base"] + regs * table["ldm"]
    return table.get(cls, table["other"])


@dataclass
class LayerProfile:
    """One scheduled node: its name in the source model, what ran and what it cost."""

    name: str
    op: str
    kernel: str | None  # None: no code (a view of its input)
    macs: int
    instructions: int  # its kernel call and the glue before it (argument set-up, input copies for the first)
    kernel_instructions: int  # the kernel call alone, from its BL to its return
    est_cycles: int
    flash_bytes: int  # its constants in weights.c for this core's build
    arena_bytes: int  # arena bytes live while it runs (inputs, outputs, scratch)
    share: float = 0.0  # of the invoke's instructions

    @property
    def instr_per_mac(self) -> float | None:
        return self.instructions / self.macs if self.macs else None


@dataclass
class ModelProfile:
    """The whole invoke and its layers; see :func:`profile`."""

    model: str
    core: str
    board: str
    bit_exact: bool
    macs: int
    instructions: int
    est_cycles: int
    clock_mhz: float
    flash_bytes: int
    ram_bytes: int
    arena_bytes: int
    layers: list[LayerProfile] = field(default_factory=list)

    @property
    def est_latency_ms(self) -> float:
        return self.est_cycles / (self.clock_mhz * 1e3)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["est_latency_ms"] = round(self.est_latency_ms, 4)
        out["instr_per_mac"] = round(self.instructions / self.macs, 4) if self.macs else None
        out["estimate"] = "est_cycles and est_latency_ms: instruction classes x per-core cycle table (an estimate)"
        for row, layer in zip(out["layers"], self.layers):
            row["instr_per_mac"] = None if layer.instr_per_mac is None else round(layer.instr_per_mac, 4)
            row["share"] = round(layer.share, 6)
        return out

    def text(self) -> str:
        head = (
            f"{'layer':<44} {'op':<18} {'MACs':>11} {'instr':>12} {'instr/MAC':>9} {'share':>6} "
            f"{'est cyc':>12} {'flash':>9} {'arena':>9}"
        )
        lines = [
            f"{self.model} on {self.core} ({self.board}): {'bit-exact' if self.bit_exact else 'OUTPUT DIFFERS'} with "
            f"the reference; {self.instructions:,} instructions"
            + (f" ({self.instructions / self.macs:.3f}/MAC)" if self.macs else "")
            + f"; est. {self.est_cycles:,} cycles = {self.est_latency_ms:.3f} ms at {self.clock_mhz:g} MHz (estimate)",
            head,
            "-" * len(head),
        ]
        for r in self.layers:
            ipm = f"{r.instr_per_mac:.2f}" if r.instr_per_mac is not None else "-"
            lines.append(
                f"{r.name[:44]:<44} {r.op[:18]:<18} {r.macs:>11,} {r.instructions:>12,} {ipm:>9} "
                f"{100 * r.share:>5.1f}% {r.est_cycles:>12,} {r.flash_bytes:>9,} {r.arena_bytes:>9,}"
            )
        lines.append(f"flash {self.flash_bytes:,} B, RAM {self.ram_bytes:,} B (arena {self.arena_bytes:,} B)")
        return "\n".join(lines)

    def plot(self, path: str | Path) -> Path:
        """Instructions and estimated cycles per layer as horizontal bars (.png or .svg by suffix)."""
        from rlx_edge.plotting import pyplot_for, save_figure

        plt = pyplot_for(path)
        rows = [r for r in self.layers if r.kernel is not None]
        fig, ax = plt.subplots(figsize=(9, 0.28 * len(rows) + 1.6), dpi=110)
        y = np.arange(len(rows))
        ax.barh(y - 0.2, [r.instructions for r in rows], 0.4, label="instructions (exact)")
        ax.barh(y + 0.2, [r.est_cycles for r in rows], 0.4, label="cycles (estimate)")
        ax.set_yticks(y, [f"{r.name[:40]} ({r.op})" for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("per inference")
        ax.set_title(f"{self.model} on Cortex-{self.core.upper()} ({self.board})", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        return save_figure(fig, path)


def kernel_calls(model_c: str) -> list[tuple[int, str, str, str | None]]:
    """(step, node, op, kernel or None) for every scheduled node, from model.c's comments, in call order."""
    out: list[tuple[int, str, str, str | None]] = []
    lines = model_c.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"\s*/\* (\d+): (.*) \((\w+)\) \*/(.*)$", line)
        if not m:
            continue
        kernel = None
        if "no code" not in m[4]:
            call = re.match(r"\s*(rlx_\w+)\(", lines[k + 1]) if k + 1 < len(lines) else None
            kernel = call[1] if call else None
        out.append((int(m[1]), m[2], m[3], kernel))
    return out


def call_sites(disassembly: str) -> list[tuple[int, str]]:
    """(address, callee) of each ``bl`` to a kernel inside the model's entry points, in address order."""
    sites, inside = [], False
    for line in disassembly.splitlines():
        head = re.match(r"^[0-9a-f]+ <(\w+)>:$", line)
        if head:
            inside = head[1] in _INVOKE
            continue
        m = _BL.match(line) if inside else None
        if m and m[2].startswith("rlx_") and m[2] not in _INVOKE:
            sites.append((int(m[1], 16), m[2]))
    return sorted(sites)


def _instructions(disassembly: str) -> dict[int, tuple[str, str]]:
    out = {}
    for line in disassembly.splitlines():
        m = _INSN.match(line)
        if m:
            out[int(m[1], 16)] = (m[2], m[3])
    return out


def _layer_flash(graph: Graph, node, params, dsp: bool, optimize: str = "balanced") -> int:
    layer = layer_for(graph, node, params, optimize)
    want = {"", "dsp" if dsp else "portable"}
    consts = sum(np.asarray(a).nbytes for k, a in layer.consts.items() if layer.guards.get(k, "") in want)
    return consts + sum(graph.params[v].nbytes for v in dict.fromkeys(node.inputs) if v in graph.params)


def profile(
    graph: Graph,
    core: str = "m4",
    inputs: dict[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    clock_mhz: float | None = None,
    workdir: str | Path | None = None,
    timeout: float = 600.0,
    optimize: str = "balanced",
) -> ModelProfile:
    """Profile ``graph`` (quantized MIR) on QEMU's ``core`` board; ``inputs`` default to one seeded random input.

    ``optimize`` is the C's layout level (``rlx_edge.targets.cortexm.emit``)."""
    from rlx_edge.targets.reference.compare import make_inputs
    from rlx_edge.targets.reference.interpreter import run as run_reference

    if core not in CORES:
        raise RlxError(f"unknown core {core!r}; use one of {', '.join(CORES)}")
    board = ALIASES[f"qemu-{core}"]
    em = emit(graph, optimize)
    prog = em.program
    calls = kernel_calls(em.files["model.c"])
    elf, _ = build_model_firmware(graph, board, workdir, optimize=optimize)
    dis = disassemble(elf)
    sites = call_sites(dis)
    with_code = [c for c in calls if c[3] is not None]
    if [c[3] for c in with_code] != [callee for _, callee in sites]:
        raise RlxError(
            f"{graph.name}: the firmware's kernel calls {[c for _, c in sites]} do not match model.c's "
            f"{[c[3] for c in with_code]} (was the C changed or inlined?)"
        )
    sample = inputs if inputs is not None else make_inputs(graph, 1, seed=seed)[0]
    want = run_reference(graph, sample)
    layout = IoLayout.of(graph)
    with tempfile.TemporaryDirectory(prefix="rlx-profile-") as tmp:
        # segments: the glue before each call, the call (a Thumb BL is 32 bits: it returns to
        # its address + 4), and after the last call the invoke's end
        splits = sorted([addr for addr, _ in sites] + [addr + 4 for addr, _ in sites])
        # the runner calls rlx_model_invoke for one input and output, rlx_model_invoke_multi for more
        entry = "rlx_model_invoke" if call_return_sites(elf, "rlx_model_invoke") else "rlx_model_invoke_multi"
        counter = InstructionCounter.calls(elf, Path(tmp) / "icount.txt", entry, splits=splits, histogram=True)
        with QemuSession(elf, board, timeout=timeout, plugin=counter.qemu_args) as s:
            r = s.invoke(layout.pack(sample))
            if r.status != 0:
                raise RlxError(f"{graph.name}: rlx_model_invoke returned {r.status} on {board}")
            s.exit(0)
        got = layout.unpack(r.output)
        total = counter.windows()
        segments = counter.segments()
        hist = counter.histogram()
    if len(total) != 1 or len(segments) != 2 * len(sites) + 1:
        raise RlxError(f"{graph.name}: expected one invoke in {len(sites)} segments, got {total} and {len(segments)}")
    counted = [sum(hist.get(k, {}).values()) for k in range(len(segments))]
    if counted != segments:  # the histogram is the same count split by address: it must agree
        raise RlxError(f"{graph.name}: instruction histogram {counted} disagrees with the segment counts {segments}")
    bit_exact = all(np.array_equal(got[o], want[o]) for o in graph.outputs)
    insns = _instructions(dis)
    clock = clock_mhz if clock_mhz is not None else _board_clock_mhz(board)

    def cycles(*segs: int) -> int:
        est = 0.0
        for seg in segs:
            for addr, n in hist.get(seg, {}).items():
                mnemonic, operands = insns.get(addr, ("?", ""))
                est += n * instruction_cycles(core, mnemonic, operands)
        return round(est)

    live = [0] * len(prog.schedule)
    for b in prog.buffers:
        for st in range(b.start, min(b.end, len(live) - 1) + 1):
            live[st] += b.size
    nodes = {n.name: n for n in prog.graph.nodes}
    dsp = core != "m3"
    layers: list[LayerProfile] = []
    seg = 0
    for step, name, op, kernel in calls:
        node = nodes[name]
        n_insn = est = in_kernel = 0
        if kernel is not None:
            # its glue and its call; the last call also takes the invoke's end
            segs = (2 * seg, 2 * seg + 1, *((2 * seg + 2,) if seg == len(sites) - 1 else ()))
            n_insn, est, in_kernel = sum(segments[k] for k in segs), cycles(*segs), segments[2 * seg + 1]
            seg += 1
        layers.append(
            LayerProfile(
                name=name,
                op=op,
                kernel=kernel,
                macs=int(node_macs(prog.graph, node) or 0),
                instructions=n_insn,
                kernel_instructions=in_kernel,
                est_cycles=est,
                flash_bytes=_layer_flash(prog.graph, node, prog.quant.get(name), dsp, optimize),
                arena_bytes=live[step] if step < len(live) else 0,
            )
        )
    whole = sum(segments)
    for layer in layers:
        layer.share = layer.instructions / whole if whole else 0.0
    sizes = size_report(elf, board)
    return ModelProfile(
        model=graph.name,
        core=core,
        board=board,
        bit_exact=bit_exact,
        macs=sum(layer.macs for layer in layers),
        instructions=total[0],
        est_cycles=sum(layer.est_cycles for layer in layers),
        clock_mhz=clock,
        flash_bytes=sizes["flash_bytes"],
        ram_bytes=sizes["ram_bytes"],
        arena_bytes=em.arena_bytes,
        layers=layers,
    )


def _board_clock_mhz(board: str) -> float:
    return get_board(board).clock_hz / 1e6
