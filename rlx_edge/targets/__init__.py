"""Targets: each lowers a graph or Program and, where runnable, runs it.

A target keeps a rule table keyed by op name (``RuleTable``); legalization asks
every target for its table. ``rlx_edge.ir`` never imports this package.
"""

from rlx_edge.targets._rules import RuleTable

__all__ = ["RuleTable"]
