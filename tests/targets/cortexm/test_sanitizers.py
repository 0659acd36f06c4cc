"""The generated C under AddressSanitizer + UndefinedBehaviorSanitizer (a subprocess driver)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import RlxError
from rlx_edge.targets.cortexm import run_sanitized
from rlx_edge.targets.cortexm.host import _DRIVER
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run


@pytest.mark.parametrize(("key", "dsp"), [("kws", False), ("kws", True), ("ic", False)])
def test_sanitized_run_clean_and_exact(key, dsp, mlperf_graph, tmp_path):
    g = mlperf_graph(key)
    samples = make_inputs(g, 4, seed=3)
    got = run_sanitized(g, samples, tmp_path, dsp_emulate=dsp)
    for s, out in zip(samples, got):
        ref = run(g, s)
        for name in g.outputs:
            assert np.array_equal(out[name], ref[name])


def test_sanitizer_reports_fail(mlperf_graph, tmp_path, monkeypatch):
    # the driver under-allocates the arena: ASan must see the kernels run past it
    from rlx_edge.targets.cortexm import host

    monkeypatch.setattr(host, "_DRIVER", _DRIVER.replace("malloc(RLX_ARENA_SIZE)", "malloc(RLX_ARENA_SIZE - 64)"))
    g = mlperf_graph("ad")
    with pytest.raises(RlxError, match="AddressSanitizer"):
        run_sanitized(g, make_inputs(g, 1, seed=0), tmp_path)
