"""Ops declared outside rlx-edge: the ``rlx_edge.ops`` entry point group (docs/custom_ops.md).

A distribution declares, in its ``pyproject.toml``::

    [project.entry-points."rlx_edge.ops"]
    my_ops = "my_package.rlx_ops"            # a module: importing it declares the ops
    # or "my_package.rlx_ops:register"       # a function, called once with no arguments

The op registry loads every entry point of the group once, the first time it
is asked for an op it does not hold or for the whole list of ops, never at
import: a plugin imports rlx-edge's own modules (the rule tables of the
targets), which must be importable by then. The built-in ops are all declared
when ``rlx_edge.ir.ops`` finishes importing, so a lookup of a built-in op never
triggers the load.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from rlx_edge.errors import PluginError

GROUP = "rlx_edge.ops"


def _distribution(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"distribution {dist.metadata['Name']} {dist.version}"


def _load(ep: EntryPoint) -> None:
    try:
        obj = ep.load()
        if callable(obj) and not isinstance(obj, types.ModuleType):
            obj()
    except Exception as e:  # whatever the plugin raises, the user needs to know which one
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise PluginError(
            f"entry point {ep.name} = {ep.value} (group {GROUP}) of {_distribution(ep)} failed to load: {why};"
            f" fix or uninstall that package"
        ) from e


class OpRegistry(dict):
    """The op table (name -> OpDef) that loads the ``rlx_edge.ops`` entry points on first need.

    A miss (an op the table does not hold) or a walk over every op loads them;
    a hit on a built-in op does not. The load runs once, even when it fails.
    """

    _state = "unloaded"  # "unloaded", "loading", "loaded"

    def declared(self, key: str) -> bool:
        """Whether ``key`` is declared already, without loading plugins (defop's check for twice-declared ops)."""
        return dict.__contains__(self, key)

    def load_plugins(self) -> None:
        if self._state != "unloaded":
            return
        self._state = "loading"  # lookups the plugins make while they load see the table as it is
        try:
            for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
                _load(ep)
        finally:
            self._state = "loaded"

    def __missing__(self, key: str) -> Any:
        if self._state == "unloaded":
            self.load_plugins()
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        self.load_plugins()
        return dict.__contains__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __iter__(self) -> Iterator[str]:
        self.load_plugins()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load_plugins()
        return dict.__len__(self)

    def keys(self):  # type: ignore[override]
        self.load_plugins()
        return dict.keys(self)

    def values(self):  # type: ignore[override]
        self.load_plugins()
        return dict.values(self)

    def items(self):  # type: ignore[override]
        self.load_plugins()
        return dict.items(self)
