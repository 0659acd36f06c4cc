"""What each target supports, read off the targets' own declarations (``rlx-edge targets``).

Nothing here is a hand-kept list of ops or types:

- ops come from each target's rule table (the FPGA adds the ops its design
  turns into buffer aliases); the reference runs every MIR op through the
  op registry, with integer semantics where the op has an integer reference;
- quantization schemes come from the storage types a target's checks accept,
  ``ACTIVATION_DTYPES`` and ``WEIGHT_DTYPES`` next to its rule table. A target
  without them (reference, jax) runs the ops' float and integer references as
  they are, so it takes float graphs and every scheme the quantizer has;
- input counts come from the runners' limits (the firmware's ``MAX_IO``).

The README's support table is :func:`support_table` verbatim; a test
regenerates it and fails when the two differ.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rlx_edge.ir.ops import REGISTRY
from rlx_edge.quant.ptq import SCHEMES


@dataclass(frozen=True)
class TargetSupport:
    """One target family: the names that run it, the graphs and ops it takes."""

    name: str
    runs_as: tuple[str, ...]  # --target names (and commands) that use it
    float_graphs: bool
    schemes: tuple[str, ...]
    inputs: str
    ops: dict[str, str]  # op -> "float, int" | "float" | "int"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "runs_as": list(self.runs_as),
            "float_graphs": self.float_graphs,
            "schemes": list(self.schemes),
            "inputs": self.inputs,
            "ops": dict(self.ops),
        }


def _mir_ops() -> list[str]:
    import rlx_edge.ir.ops  # noqa: F401  (registers every op family)

    return sorted(n for n, op in REGISTRY.items() if op.stage == "mir")


def _semantics(op: str, float_graphs: bool) -> str:
    """What a target computes for ``op``: float graphs use the float reference, quantized ones the integer one."""
    has_int = REGISTRY[op].has_int_reference
    if not float_graphs:
        return "int"
    return "float, int" if has_int else "float"


def _schemes(declared: ModuleType | None) -> tuple[str, ...]:
    """The quantizer's schemes whose activation and weight types the target's checks accept."""
    if declared is None:
        return tuple(SCHEMES)
    return tuple(
        name
        for name, s in SCHEMES.items()
        if s.act in declared.ACTIVATION_DTYPES and s.weight in declared.WEIGHT_DTYPES
    )


def _family(
    name: str, runs_as: tuple[str, ...], ops: Container[str], declared: ModuleType | None, inputs: str
) -> TargetSupport:
    float_graphs = declared is None
    table = {op: _semantics(op, float_graphs) for op in _mir_ops() if op in ops}
    return TargetSupport(name, runs_as, float_graphs, _schemes(declared), inputs, table)


def targets_support() -> list[TargetSupport]:
    """Every target family, in the order of ``rlx_edge.runners.TARGETS``."""
    from rlx_edge.boards import QEMU_TARGETS
    from rlx_edge.targets.cortexm import MAX_IO
    from rlx_edge.targets.cortexm import rules as cortexm
    from rlx_edge.targets.fpga import design as fpga
    from rlx_edge.targets.jax import RULES as JAX_RULES

    qemu = QEMU_TARGETS
    return [
        _family("reference", ("reference",), set(_mir_ops()), None, "any"),
        _family(
            "cortexm",
            ("cortexm-host", *qemu, "compile"),
            cortexm.RULES,
            cortexm,
            f"any (cortexm-host, compile); up to {MAX_IO} in and {MAX_IO} out (qemu-*, firmware)",
        ),
        _family("fpga", ("fpga-sim", "fpga"), {*fpga.rules, *fpga.ALIAS_OPS}, fpga, "any"),
        _family("jax", ("jax", "eval"), JAX_RULES, None, "any"),
    ]


def support_table() -> str:
    """The support table as Markdown: one summary row per target, then one row per op."""
    fams = targets_support()
    lines = [
        "| target | `--target` / command | float graphs | schemes | inputs | ops |",
        "|---|---|---|---|---|---|",
    ]
    for f in fams:
        runs = ", ".join(f"`{r}`" for r in f.runs_as)
        lines.append(
            f"| {f.name} | {runs} | {'yes' if f.float_graphs else 'no'} | {', '.join(f.schemes)} "
            f"| {f.inputs} | {len(f.ops)} |"
        )
    lines += ["", "| op | " + " | ".join(f.name for f in fams) + " |", "|---" * (len(fams) + 1) + "|"]
    for op in _mir_ops():
        lines.append(f"| `{op}` | " + " | ".join(f.ops.get(op, "") for f in fams) + " |")
    return "\n".join(lines) + "\n"
