"""Shared fixtures of the jax target tests.

``RLX_EDGE_JAX_DEVICE`` (default ``cpu``) runs the model tests on another
device, e.g. ``gpu`` on a machine with an NVIDIA GPU.
"""

from __future__ import annotations

import os

DEVICE = os.environ.get("RLX_EDGE_JAX_DEVICE", "cpu")
