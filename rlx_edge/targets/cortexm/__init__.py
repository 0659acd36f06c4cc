"""Cortex-M target: ahead-of-time CMSIS-style int8 C.

- :data:`RULES` — the rule table (one rule per op: kernel call, constants, scratch);
- :func:`lower` — plan a graph for this target (``plan(graph, target="cortexm", scratch=scratch_bytes)``);
- :func:`emit` — the generated sources in memory;
- :func:`compile_project` — write model.h / model.c / weights.c / kernels / Makefile;
- :func:`compile_host` / :class:`HostModel` — ``--target cortexm-host``: the same C through cffi;
- :func:`run_sanitized` — the same C under ASan + UBSan in a subprocess.
"""

from rlx_edge.targets.cortexm.emit import CORES, EmittedModel, compile_project, emit, kernel_sources, lower
from rlx_edge.targets.cortexm.host import HostModel, compile_host, run_sanitized
from rlx_edge.targets.cortexm.rules import RULES, Layer, layer_for, scratch_bytes

__all__ = [
    "CORES",
    "RULES",
    "EmittedModel",
    "HostModel",
    "Layer",
    "compile_host",
    "compile_project",
    "emit",
    "kernel_sources",
    "layer_for",
    "lower",
    "run_sanitized",
    "scratch_bytes",
]
