"""examples/tiny_transformer.py end to end: trained here, int8 within 1.5 points of float, bit-exact on JAX and QEMU.

One run of the example (training, calibration, int8 PTQ, the reference on the
held-out digits, the JAX target on 500 inputs, a Cortex-M4 firmware under
QEMU on 20 inputs) is shared by the checks below.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.py"


@pytest.fixture(scope="module")
def result() -> dict:
    spec = importlib.util.spec_from_file_location("tiny_transformer", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tiny_transformer"] = mod
    spec.loader.exec_module(mod)
    return mod.run_example(log=lambda msg: None)


def test_int8_accuracy_is_within_1_5_points_of_float(result):
    assert result["float_accuracy"] >= 90.0, result  # a trained classifier, not a lucky untrained one
    assert result["float_accuracy"] - result["int8_accuracy"] <= 1.5, result


def test_jax_is_bit_exact_on_500_inputs(result):
    assert result["jax_inputs"] == 500 and result["jax_bit_exact"], result


def test_qemu_m4_is_bit_exact_on_20_inputs(result):
    assert result["qemu_inputs"] == 20 and result["qemu_bit_exact"], result
    assert result["instructions"] > result["macs"] > 30_000, result  # counted from the same firmware
