"""The one pipeline from a model graph to a target's Program.

    lower HIR -> optimizer passes -> legalize for the target
      -> quantization resolved (each node's ``prepare``) -> plan with the target's scratch

:func:`to_program` runs all of it. :func:`optimize_graph` is its first half,
the only place the optimizer runs: calibration and quantization call it too
(they work on graphs, before any target), and every command that takes a
model does. A graph comes out of it once; nothing downstream optimizes again.

Targets are found by name in :mod:`rlx_edge.targets.registry`, which holds
each target's rule table and scratch callback; this module names no target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import DEFAULT_PIPELINE, PassReport, legalize
from rlx_edge.ir.passes.bind_symbols import require_static
from rlx_edge.ir.passes.fold import has_constant_index_math
from rlx_edge.ir.passes.lower_control_flow import lower_for_rules
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.ir.passes.manager import PassManager
from rlx_edge.ir.plan import Program, plan, prepare_graph


@dataclass(frozen=True)
class PipelineOptions:
    """What the commands can choose about the path to a Program."""

    optimize: bool = True
    passes: tuple[str, ...] = DEFAULT_PIPELINE
    alignment: int = 16
    schedule: str = "auto"  # "auto", "topological" or "memory" (ir.plan.SCHEDULES)
    inplace: bool = True


# Commands take a model file as it is: a graph that `quantize` wrote was optimized
# then, and an imported TFLite model keeps the tensors TFLite Micro is compared on.
AS_GIVEN = PipelineOptions(optimize=False)


def optimize_graph(graph: Graph, options: PipelineOptions | None = None) -> tuple[Graph, PassReport | None]:
    """``graph`` as MIR, through the optimizer passes unless ``options.optimize`` is off.

    Returns the graph and the optimizer's report (None when it did not run).
    """
    opts = options or PipelineOptions()
    mir = lower_hir(graph) if graph.stage == "hir" else graph
    if not opts.optimize:
        return mir, None
    return PassManager(opts.passes).run(mir)


def legalize_for(graph: Graph, target: str) -> Graph:
    """``graph`` if ``target`` has a rule for every node's op; else one error naming each node, its op
    and the targets that support it. Control flow the target does not run natively (if_, while_,
    scan) is lowered first (``lower_control_flow``), so the result may be a new graph."""
    # The registry imports a target's package only when it is asked for; optimize_graph,
    # which rlx_edge.quant uses, never touches the targets.
    from rlx_edge.targets.registry import rule_tables, target_spec

    spec = target_spec(target)
    if spec.rules is not None:
        graph = lower_for_rules(graph, spec.rules)
        if spec.family != "reference" and has_constant_index_math(graph):
            # Shape arithmetic of constants (Shape -> StridedSlice -> Pack -> Reshape, as some
            # exporters write it) runs in the reference, which keeps every tensor TFLite Micro is
            # compared on, but compiled targets have no kernels for plain int32 tensors: computed
            # here, it becomes constants they read. Weights are never folded this way.
            graph, _ = PassManager(("fold",), options={"fold_index_only": True}).run(graph)
        legalize(graph, spec.rules, target=spec.family, targets=rule_tables)
    return graph


def traced(graph: Graph, target: str = "jax") -> Callable:
    """``graph`` (MIR) as one function of its inputs, in ``graph.inputs`` order, that ``target`` traces.

    For jax, the function of jax arrays that ``jax.jit``, ``jax.vmap`` and the
    training loop of :mod:`rlx_edge.quant.qat` compose; call it under
    ``jax.enable_x64(True)``, as the jax target does. Targets that compile
    instead of trace (Cortex-M, FPGA) have none.
    """
    from rlx_edge.targets.registry import target_spec

    spec = target_spec(target)
    if spec.trace is None:
        raise RlxError(f"target {target!r} does not trace graphs into functions; use jax")
    return spec.trace(legalize_for(graph, target))


def to_program(graph: Graph, target: str, options: PipelineOptions | None = None) -> Program:
    """``graph`` planned for ``target`` (a ``--target`` name or a family: reference, cortexm, ...).

    Every stage runs once: lower HIR, optimize (``options.optimize``),
    legalize against the target's rule table, prepare every quantized node
    (``Program.quant``), plan the arena with the target's scratch.
    """
    from rlx_edge.targets.registry import family, planning_targets, target_spec

    opts = options or PipelineOptions()
    if not family(target).plans:
        raise RlxError(f"target {target!r} has no planner rules; use {planning_targets()}")
    spec = target_spec(target)
    mir, _ = optimize_graph(graph, opts)
    require_static(mir, target)  # an arena plan needs sizes: name the symbols and the --bind for them
    mir = legalize_for(mir, target)
    quant = prepare_graph(mir)
    scratch = None
    if spec.scratch is not None:
        target_scratch = spec.scratch

        def scratch(g: Graph, node) -> int:
            return target_scratch(g, node, quant.get(node.name))

    return plan(
        mir,
        target=target,  # the name asked for: `plan --target qemu-m4` reports qemu-m4
        alignment=opts.alignment,
        schedule=opts.schedule,
        inplace=opts.inplace,
        scratch=scratch,
        quant=quant,
    )


__all__ = ["AS_GIVEN", "PipelineOptions", "legalize_for", "optimize_graph", "to_program", "traced"]
