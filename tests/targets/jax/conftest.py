"""Shared fixtures of the jax target tests.

``RLX_EDGE_JAX_DEVICE`` (default ``cpu``) runs the model tests on another
device, e.g. ``gpu`` on a machine with an NVIDIA GPU; ``RLX_EDGE_MODELS``
points at the shared models when ``../shared`` is not beside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

MODELS = Path(os.environ.get("RLX_EDGE_MODELS", Path(__file__).resolve().parents[3] / ".." / "shared" / "models"))
MODELS = MODELS / "mlperf-tiny"
DEVICE = os.environ.get("RLX_EDGE_JAX_DEVICE", "cpu")
