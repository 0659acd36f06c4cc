"""Rule tables: the one way rlx-edge registers functions by name.

A :class:`RuleTable` maps a key (an op name, a TFLite builtin operator, an
ONNX op type, a pass name) to what was registered for it, usually a
function, with optional metadata per entry. Modules register by decorating
at import time, so importing a module is what adds its rules; nothing keeps
a hand-edited list::

    RULES = RuleTable.for_ops("cortexm")

    @RULES.rule("avg_pool2d", "max_pool2d")
    def _pool(graph, node, params): ...

Every target, both TFLite directions, the ONNX importer and the pass manager
use it. Registering a key twice, or a key the table does not accept (a target
rule for an op nobody declared), is a programming error raised at import.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from rlx_edge.ir.ops import REGISTRY

V = TypeVar("V")

_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


class RuleTable(Generic[V]):
    """Maps keys to registered entries (usually functions), each with optional metadata.

    Parameters
    ----------
    name:
        Names the table in messages (``"cortexm"``, ``"tflite import"``).
    keys:
        When given, the keys the table accepts (``key in keys`` is checked at
        registration); a target's table accepts declared ops (:meth:`for_ops`).
    what:
        What a key is, for messages (``"op"``, ``"builtin operator"``).
    """

    def __init__(self, name: str, *, keys: Container[str] | None = None, what: str = "key") -> None:
        self.name = name
        self.what = what
        self._keys = keys
        self._entries: dict[str, V] = {}
        self._metadata: dict[str, Mapping[str, Any]] = {}

    @classmethod
    def for_ops(cls, name: str) -> RuleTable[V]:
        """A target's table: one rule per op, and only for ops the op registry declares."""
        return cls(name, keys=REGISTRY, what="op")

    # registering -----------------------------------------------------------------------
    def rule(self, *keys: str, **metadata: Any) -> Callable[[V], V]:
        """Decorator: register the decorated function under every key, with ``metadata``."""
        if not keys:
            raise TypeError(f"rule table {self.name!r}: rule() needs at least one key")

        def register(entry: V) -> V:
            for key in keys:  # all or nothing: a bad key leaves the table as it was
                self._check(key)
            for key in keys:
                self.add(key, entry, **metadata)
            return entry

        return register

    def add(self, key: str, entry: V, **metadata: Any) -> None:
        """Register ``entry`` under ``key`` (for entries built by a factory rather than decorated)."""
        self._check(key)
        self._entries[key] = entry
        if metadata:
            self._metadata[key] = MappingProxyType(dict(metadata))

    def _check(self, key: str) -> None:
        if self._keys is not None and key not in self._keys:
            raise RuntimeError(f"rule table {self.name!r}: {key!r} is not a known {self.what}")
        if key in self._entries:
            raise RuntimeError(f"rule table {self.name!r}: two entries for {self.what} {key!r}")

    # reading ---------------------------------------------------------------------------
    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: str) -> V:
        try:
            return self._entries[key]
        except KeyError:
            raise self._missing(key) from None

    def get(self, key: str, default: V | None = None) -> V | None:
        return self._entries.get(key, default)

    def metadata(self, key: str) -> Mapping[str, Any]:
        """The metadata registered with ``key`` (empty when none was given)."""
        if key not in self._entries:
            raise self._missing(key)
        return self._metadata.get(key, _NO_METADATA)

    def _missing(self, key: str) -> KeyError:
        return KeyError(f"rule table {self.name!r} has no entry for {self.what} {key!r}")

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        """Every registered key, sorted."""
        return sorted(self._entries)

    def items(self) -> list[tuple[str, V]]:
        """``(key, entry)`` pairs, sorted by key."""
        return [(k, self._entries[k]) for k in sorted(self._entries)]

    def __repr__(self) -> str:
        return f"RuleTable({self.name!r}, {len(self._entries)} entries)"

    # tests -----------------------------------------------------------------------------
    @contextmanager
    def replaced(self, key: str, entry: V | None) -> Iterator[None]:
        """For tests: ``key`` maps to ``entry`` (or to nothing, with ``None``) until the block ends."""
        had = key in self._entries
        old = self._entries.get(key)
        if entry is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = entry
        try:
            yield
        finally:
            if had:
                self._entries[key] = old  # type: ignore[assignment]
            else:
                self._entries.pop(key, None)
