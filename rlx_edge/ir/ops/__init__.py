"""The op vocabulary. Importing this package registers every op family.

Each family module declares its ops with :func:`defop`; nothing here lists
ops by hand.
"""

from __future__ import annotations

import importlib
import pkgutil

# The registry, and the shape and dtype helpers that passes, frontends and targets share with the op declarations.
from rlx_edge.ir.ops._common import (
    apply_activation,
    compute_dtype,
    elementwise_dtype,
    finish,
    norm_axes,
    norm_axis,
    same_pads,
    window_pads,
    window_shape,
)
from rlx_edge.ir.ops._plugins import GROUP as PLUGIN_GROUP  # custom ops of other packages (docs/custom_ops.md)
from rlx_edge.ir.ops._registry import REGISTRY, Attr, OpDef, QContext, defop, get_op
from rlx_edge.ir.ops.pool import window_counts

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_mod}")

__all__ = [
    "PLUGIN_GROUP",
    "REGISTRY",
    "Attr",
    "OpDef",
    "QContext",
    "apply_activation",
    "compute_dtype",
    "defop",
    "elementwise_dtype",
    "finish",
    "get_op",
    "norm_axes",
    "norm_axis",
    "same_pads",
    "window_counts",
    "window_pads",
    "window_shape",
]
