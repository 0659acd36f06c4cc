"""The op vocabulary. Importing this package registers every op family.

Each family module declares its ops with :func:`defop`; nothing here lists
ops by hand.
"""

from __future__ import annotations

import importlib
import pkgutil

from rlx_edge.ir.ops._registry import REGISTRY, Attr, OpDef, QContext, defop, get_op

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_mod}")

__all__ = ["REGISTRY", "Attr", "OpDef", "QContext", "defop", "get_op"]
