"""Calibration records: the observed ranges of a graph's float values, as JSON.

A record is what ``rlx-edge calibrate`` writes and ``rlx-edge quantize
--record`` reads: per value, the chosen real range ``[lo, hi]`` (per tensor,
or per channel along ``axis``) plus the per-channel mean of the last axis,
which bias correction needs. Files are written atomically and validated on
load (they are user input).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge._io import atomic_write_text
from rlx_edge.errors import RlxError

FORMAT = "rlx-edge.calibration"
VERSION = 1


class CalibrationError(RlxError):
    """A calibration record is malformed or does not match a graph."""


@dataclass
class TensorRange:
    """The real range chosen for one value; ``lo``/``hi`` are 1-D (one entry per tensor or per channel)."""

    lo: np.ndarray
    hi: np.ndarray
    axis: int | None = None
    mean: np.ndarray | None = None  # per-channel mean over the last axis (bias correction)

    def __post_init__(self) -> None:
        self.lo = np.atleast_1d(np.asarray(self.lo, dtype=np.float64))
        self.hi = np.atleast_1d(np.asarray(self.hi, dtype=np.float64))
        if self.mean is not None:
            self.mean = np.atleast_1d(np.asarray(self.mean, dtype=np.float64))
        if self.lo.shape != self.hi.shape or self.lo.ndim != 1:
            raise CalibrationError(f"range bounds must be 1-D and of one length, got {self.lo.shape}, {self.hi.shape}")
        if self.axis is None and self.lo.size != 1:
            raise CalibrationError("a per-tensor range has exactly one lo and one hi")
        if not (np.all(np.isfinite(self.lo)) and np.all(np.isfinite(self.hi))):
            raise CalibrationError("range bounds must be finite")
        if np.any(self.lo > self.hi):
            raise CalibrationError("range has lo > hi")

    def scalar(self) -> tuple[float, float]:
        """(lo, hi) over all channels."""
        return float(self.lo.min()), float(self.hi.max())

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"lo": self.lo.tolist(), "hi": self.hi.tolist(), "axis": self.axis}
        if self.mean is not None:
            d["mean"] = self.mean.tolist()
        return d

    @classmethod
    def from_json(cls, d: Any, what: str) -> TensorRange:
        if not isinstance(d, dict) or "lo" not in d or "hi" not in d:
            raise CalibrationError(f"{what}: expected an object with lo and hi")
        axis = d.get("axis")
        if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool)):
            raise CalibrationError(f"{what}: axis must be an integer or null")
        try:
            return cls(_floats(d["lo"]), _floats(d["hi"]), axis, None if d.get("mean") is None else _floats(d["mean"]))
        except CalibrationError as e:
            raise CalibrationError(f"{what}: {e}") from None


def _floats(x: Any) -> np.ndarray:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x = [x]
    if not isinstance(x, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
        raise CalibrationError("bounds must be numbers or lists of numbers")
    if not all(math.isfinite(v) for v in x):
        raise CalibrationError("bounds must be finite")
    return np.asarray(x, dtype=np.float64)


@dataclass
class CalibrationRecord:
    """Ranges of a graph's float values, by value name."""

    graph: str
    method: str
    samples: int
    ranges: dict[str, TensorRange] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> TensorRange:
        try:
            return self.ranges[name]
        except KeyError:
            raise CalibrationError(
                f"calibration record of graph {self.graph!r} has no range for value {name!r};"
                " calibrate the same (optimized) graph that is being quantized"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self.ranges

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "graph": self.graph,
            "method": self.method,
            "samples": self.samples,
            "options": self.options,
            "ranges": {k: v.to_json() for k, v in sorted(self.ranges.items())},
        }

    @classmethod
    def from_json(cls, d: Any, source: str = "<record>") -> CalibrationRecord:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise CalibrationError(f"{source}: not an rlx-edge calibration record")
        if d.get("version") != VERSION:
            raise CalibrationError(f"{source}: record version {d.get('version')!r} is not {VERSION}")
        ranges = d.get("ranges")
        if not isinstance(ranges, dict):
            raise CalibrationError(f"{source}: 'ranges' must be an object")
        samples = d.get("samples", 0)
        if not isinstance(samples, int) or samples < 0:
            raise CalibrationError(f"{source}: 'samples' must be a non-negative integer")
        return cls(
            graph=str(d.get("graph", "")),
            method=str(d.get("method", "")),
            samples=samples,
            ranges={str(k): TensorRange.from_json(v, f"{source}: range of {k!r}") for k, v in ranges.items()},
            options=dict(d.get("options") or {}),
        )

    def save(self, path: str | os.PathLike) -> Path:
        """Write as JSON, atomically."""
        return atomic_write_text(path, json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> CalibrationRecord:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise CalibrationError(f"{p}: cannot read ({e.strerror or e})") from None
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CalibrationError(f"{p}: not valid JSON ({e})") from None
        return cls.from_json(d, str(p))
