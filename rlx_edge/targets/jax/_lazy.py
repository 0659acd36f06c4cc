"""Deferred access to jax, so that the rule table can be imported without it.

Legalization asks every target for its rule table (ARCHITECTURE.md), which
must work where jax is not installed; only lowering and running need jax.
Rule modules therefore use the proxies ``jnp`` and ``lax`` defined here,
which import the real modules on first attribute access.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from rlx_edge.errors import RlxError

JAX_MISSING = "the JAX backend needs jax: pip install 'rlx-edge[jax]'"


def require_jax() -> ModuleType:
    """The ``jax`` module, or the user-facing error naming the extra to install."""
    try:
        import jax
    except ImportError as e:
        raise RlxError(JAX_MISSING) from e
    return jax


class _LazyModule:
    """A module proxy: attribute access imports ``name`` (once; later lookups hit ``sys.modules``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        require_jax()
        return getattr(importlib.import_module(self._name), attr)


jnp: Any = _LazyModule("jax.numpy")
lax: Any = _LazyModule("jax.lax")
