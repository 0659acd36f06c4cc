"""Target families by name: what :func:`rlx_edge.pipeline.to_program` needs from each.

Each entry of :data:`FAMILIES` gives a family's rule table and its scratch
callback; :data:`FAMILY_OF` maps every ``--target`` name to its family.
Entries import their target lazily so that a missing optional dependency only
matters when that target is asked for. Runners (a graph on a target, one
input dict at a time) are in :mod:`rlx_edge.runners`, above ``hil``: the
QEMU targets speak the HIL protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass

from rlx_edge.boards import QEMU_TARGETS
from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.prepared import Prepared

# What the pipeline (rlx_edge.pipeline.to_program) needs from a target ---------------------------
TargetScratch = Callable[[Graph, Node, Prepared | None], int]


@dataclass(frozen=True)
class TargetSpec:
    """One target family as the pipeline sees it: the ops it has rules for and its kernels' scratch."""

    family: str  # reference, cortexm, fpga or jax
    rules: Container[str] | None  # None: every op (the reference runs the ops' own references)
    scratch: TargetScratch | None = None  # bytes of kernel scratch of one node, given its prepared parameters
    # The graph as one function of its inputs (in graph.inputs order) that the target's array
    # library traces: jax jits, vmaps and trains it (quantization-aware training).
    trace: Callable[[Graph], Callable] | None = None


@dataclass(frozen=True)
class Family:
    """A target family's entry: how to load its spec (importing the target), and whether it plans an arena."""

    load: Callable[[], TargetSpec]
    plans: bool = True  # False: the target does not run from an arena plan (jax jits over symbolic batches)


def _reference_spec() -> TargetSpec:
    return TargetSpec("reference", None)


def _cortexm_spec() -> TargetSpec:
    from rlx_edge.targets.cortexm import RULES, scratch_bytes

    return TargetSpec("cortexm", RULES, scratch_bytes)


def _fpga_spec() -> TargetSpec:
    from rlx_edge.targets.fpga.design import ALIAS_OPS, rules

    return TargetSpec("fpga", {*rules, *ALIAS_OPS})


def _jax_spec() -> TargetSpec:
    from rlx_edge.targets.jax import RULES  # the table imports without jax
    from rlx_edge.targets.jax.lower import lower_graph

    return TargetSpec("jax", RULES, trace=lambda g: lower_graph(g).fn)


FAMILIES: dict[str, Family] = {
    "reference": Family(_reference_spec),
    "cortexm": Family(_cortexm_spec),
    "fpga": Family(_fpga_spec),
    "jax": Family(_jax_spec, plans=False),
}
# Each --target name runs one family's rules.
FAMILY_OF: dict[str, str] = {
    "reference": "reference",
    "cortexm-host": "cortexm",
    **dict.fromkeys(QEMU_TARGETS, "cortexm"),
    "fpga-sim": "fpga",
    "jax": "jax",
}


def family(name: str) -> Family:
    """The family entry of a ``--target`` name or a family name (nothing is imported)."""
    fam = FAMILY_OF.get(name, name)
    if fam not in FAMILIES:
        raise RlxError(f"unknown target {name!r}; use one of {', '.join([*FAMILY_OF, *FAMILIES])}")
    return FAMILIES[fam]


def target_spec(name: str) -> TargetSpec:
    """The spec of a ``--target`` name or a family name."""
    entry = family(name)
    try:
        return entry.load()
    except ImportError as e:
        raise RlxError(f"target {name} is not available in this installation ({e})") from None


def rule_tables() -> dict[str, Container[str]]:
    """Every family's rule table, by family, for legalization messages (families that cannot import are left out)."""
    tables: dict[str, Container[str]] = {}
    for name, entry in FAMILIES.items():
        try:
            spec = entry.load()
        except ImportError:
            continue
        tables[name] = _mir_ops() if spec.rules is None else spec.rules
    return tables


def planning_targets() -> str:
    """The --target names whose family plans an arena, for messages ("reference, cortexm-host or qemu-*")."""
    names = [n for n, f in FAMILY_OF.items() if FAMILIES[f].plans and n not in QEMU_TARGETS]
    if any(FAMILIES[FAMILY_OF[q]].plans for q in QEMU_TARGETS):
        names.append("qemu-*")
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else ", ".join(names)


def _mir_ops() -> frozenset[str]:
    return frozenset(name for name, op in REGISTRY.items() if op.stage == "mir")
