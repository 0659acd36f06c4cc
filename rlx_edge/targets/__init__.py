"""Targets: each lowers a graph or Program and, where runnable, runs it.

A target keeps a rule table keyed by op name (:class:`rlx_edge.ir.rules.RuleTable`,
made with ``RuleTable.for_ops``); legalization asks every target for its table.
``rlx_edge.ir`` never imports this package.
"""
