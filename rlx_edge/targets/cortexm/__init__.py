"""Cortex-M target: ahead-of-time CMSIS-style int8 C.

- :data:`RULES` — the rule table (one rule per op: kernel call, constants, scratch);
- :func:`lower` — plan a graph for this target (``rlx_edge.pipeline.to_program(graph, "cortexm")``);
- :func:`emit` — the generated sources in memory;
- :func:`compile_project` — write model.h / model.c / weights.c / kernels / Makefile;
- :func:`compile_host` / :class:`HostModel` — ``--target cortexm-host``: the same C through cffi;
- :func:`run_sanitized` — the same C under ASan + UBSan in a subprocess;
- :mod:`~rlx_edge.targets.cortexm.firmware` — the firmware of ``firmware/`` around the C, for a board
  of :mod:`rlx_edge.boards` (:func:`build_firmware`, :func:`build_model_firmware`, :func:`size_report`);
- :mod:`~rlx_edge.targets.cortexm.qemu` — that firmware under QEMU (:class:`QemuBoard`,
  :func:`run_firmware`) and its exact instruction counts (:class:`InstructionCounter`).
"""

from rlx_edge.targets.cortexm.emit import CORES, EmittedModel, compile_project, emit, kernel_sources, lower
from rlx_edge.targets.cortexm.firmware import (
    MAX_IO,
    IoLayout,
    build_firmware,
    build_model_firmware,
    firmware_dir,
    size_report,
)
from rlx_edge.targets.cortexm.host import HostModel, compile_host, run_sanitized
from rlx_edge.targets.cortexm.qemu import InstructionCounter, QemuBoard, QemuError, QemuTimeout, run_firmware
from rlx_edge.targets.cortexm.rules import RULES, Layer, layer_for, scratch_bytes

__all__ = [
    "CORES",
    "MAX_IO",
    "RULES",
    "EmittedModel",
    "HostModel",
    "InstructionCounter",
    "IoLayout",
    "Layer",
    "QemuBoard",
    "QemuError",
    "QemuTimeout",
    "build_firmware",
    "build_model_firmware",
    "compile_host",
    "compile_project",
    "emit",
    "firmware_dir",
    "kernel_sources",
    "layer_for",
    "lower",
    "run_firmware",
    "run_sanitized",
    "scratch_bytes",
    "size_report",
]
