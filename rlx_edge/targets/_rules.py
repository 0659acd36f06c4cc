"""Rule tables: one entry per op a target supports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rlx_edge.ir.ops import get_op


class RuleTable:
    """Maps op names to a target's implementation of them.

    >>> rules = RuleTable("cortexm")
    >>> @rules.rule("conv2d")
    ... def _(node, ctx): ...
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._rules: dict[str, Callable] = {}

    def rule(self, *ops: str) -> Callable[[Callable], Callable]:
        def register(fn: Callable) -> Callable:
            for op in ops:
                get_op(op)  # a rule for an undeclared op is a programming error
                if op in self._rules:
                    raise RuntimeError(f"{self.target}: two rules for op {op!r}")
                self._rules[op] = fn
            return fn

        return register

    def __contains__(self, op: str) -> bool:
        return op in self._rules

    def __getitem__(self, op: str) -> Callable:
        return self._rules[op]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._rules))

    def ops(self) -> list[str]:
        return sorted(self._rules)
