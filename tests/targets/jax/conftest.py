"""Shared fixtures of the jax target tests."""

from __future__ import annotations

from pathlib import Path

MODELS = Path(__file__).resolve().parents[3] / ".." / "shared" / "models" / "mlperf-tiny"
