"""Helpers shared by the firmware and QEMU tests: fixture paths and the stand-in model's numpy twin."""

from __future__ import annotations

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def standin_reference(x: np.ndarray) -> np.ndarray:
    """What fixtures/standin/model.c computes, in numpy."""
    w = np.array([[(o * 16 + i) * 37 % 255 - 127 for i in range(16)] for o in range(4)], dtype=np.int64)
    acc = np.array([-150, -50, 50, 150], dtype=np.int64) + w @ x.astype(np.int64)
    return np.clip(acc >> 6, -128, 127).astype(np.int8)
