"""A package outside rlx-edge that declares one op, ``demo_clip``, through the ``rlx_edge.ops`` entry point.

tests/test_extend.py writes its dist-info (with the entry point) into a temporary directory and runs
rlx-edge in a fresh interpreter with both on the path: nothing under ``rlx_edge/`` names this package.
"""
