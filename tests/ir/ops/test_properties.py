"""Every registered op: its reference returns what its type inference promises.

Parametrized over ``REGISTRY`` so that a new op is picked up without editing
this file; an op without a sampler fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.ops import REGISTRY, OpDef, QContext
from rlx_edge.ir.types import TensorType


def _quantized(types) -> bool:
    # the interpreter's rule: any quantized integer operand selects the integer reference
    return any(t is not None and t.quant is not None and t.dtype.is_int for t in types)


def check_call(op: OpDef, seed: int) -> None:
    """Draw one call of ``op`` and check its reference against its inferred types."""
    rng = np.random.default_rng(seed)
    inputs, attrs, out_quant, in_quant = op.draw(rng)
    in_quant = in_quant or [None] * len(inputs)
    assert len(in_quant) == len(inputs), f"{op.name}: sampler gave {len(in_quant)} in_quant for {len(inputs)} inputs"
    in_types = [
        None if a is None else TensorType(np.shape(a), from_numpy(np.asarray(a).dtype), q)
        for a, q in zip(inputs, in_quant)
    ]
    norm = op.normalize_attrs(attrs)
    inferred = op.run_infer(in_types, norm)
    out_quant = out_quant or [None] * len(inferred)
    assert len(out_quant) == len(inferred)
    # attach output quantization as Graph.add_node does
    out_types = tuple(
        t if q is None else TensorType(t.shape, q.storage if t.dtype.is_float else t.dtype, q)
        for t, q in zip(inferred, out_quant)
    )
    ctx = QContext(f"{op.name}_under_test", tuple(in_types), out_types)
    if _quantized((*in_types, *out_types)) and op.has_int_reference:
        outs = op.run_int_reference(ctx, inputs, norm)
    else:
        outs = op.run_typed_reference(ctx, inputs, norm)
    assert len(outs) == len(out_types), f"{op.name}: {len(outs)} outputs, inference gave {len(out_types)}"
    for i, (arr, t) in enumerate(zip(outs, out_types)):
        arr = np.asarray(arr)
        assert arr.shape == tuple(t.shape), f"{op.name} output {i}: shape {arr.shape}, inferred {t.shape} ({attrs})"
        assert arr.dtype == t.dtype.numpy, f"{op.name} output {i}: dtype {arr.dtype}, inferred {t.dtype} ({attrs})"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_reference_matches_inference(name: str) -> None:
    op = REGISTRY[name]

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1))
    def prop(seed: int) -> None:
        check_call(op, seed)

    prop()


def test_registry_is_populated() -> None:
    # the parametrization above is empty if family modules stop registering
    assert {"conv2d", "quantize", "batch_norm", "linear"} <= set(REGISTRY)


def test_op_without_sampler_fails() -> None:
    op = OpDef(name="no_sampler", family="test", inputs=("x",), attrs={})
    with pytest.raises(NotImplementedError, match="no sampler"):
        check_call(op, 0)
