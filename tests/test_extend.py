"""Custom ops from outside the package (rlx_edge/extend.py, ir/ops/_plugins.py, docs/custom_ops.md).

tests/customop_pkg declares ``demo_clip`` with a float reference, integer
prepare/eval, a jax rule and a Cortex-M rule with its own C kernel. Each test
writes that package's dist-info, with its ``rlx_edge.ops`` entry point, into
a temporary directory and runs rlx-edge in a fresh interpreter with it on the
path, so the op arrives only the way a user's would: importlib.metadata finds
the entry point, the op registry loads it on first need. The test process
itself never imports the package (the op x target test and the README
support table see rlx-edge's own ops only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

DRIVER = """
import json, sys
import numpy as np
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.serialize import load, save
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.runners import prepare
from rlx_edge.targets.reference import run

res = {"loaded_at_import": REGISTRY._state != "unloaded"}
rng = np.random.default_rng(0)
g = Graph("custom")
x = g.input("x", (1, 16), "f32")
h = g.fully_connected(x, g.param("w", (rng.standard_normal((12, 16)) / 4).astype(np.float32)))
g.output(g.relu(g.demo_clip(h, limit=0.5)))  # the builder misses demo_clip: the entry point loads
data = rng.standard_normal((32, 1, 16)).astype(np.float32)
want = run(g, data[0])[g.outputs[0]]
res["float_clipped"] = bool(want.max() == np.float32(0.5))  # the clip really bites
got = prepare("jax", g)({"x": data[0]})[g.outputs[0]]
res["float_jax_err"] = float(np.abs(got - want).max())
q = quantize(g, calibrate(g, data))
save(q, sys.argv[1])
q = load(sys.argv[1])  # the round trip through .rlx names the op
res["ops"] = [n.op for n in q.nodes]
xq = rng.integers(-128, 128, (8, 1, 16)).astype(np.int8)
want = np.stack([run(q, xi)[q.outputs[0]] for xi in xq])
res["int_clipped"] = int((want == want.max()).sum())
for target in ("jax", "cortexm-host"):
    fn = prepare(target, q)
    got = np.stack([fn({"x": xi})[q.outputs[0]] for xi in xq])
    res[target] = bool(got.dtype == want.dtype and np.array_equal(got, want))
print(json.dumps(res))
"""


def _dist_info(root: Path, name: str, version: str, entry_points: str) -> Path:
    """A distribution as an installer leaves it: ``<name>-<version>.dist-info`` with METADATA and entry points."""
    d = root / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (d / "entry_points.txt").write_text(entry_points)
    return root


def _python(*args: str, path: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    # the plugin's dist-info and the directory holding its package; rlx-edge's own tests are not on it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path) if path else "", str(TESTS)) if p)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    entry_points = "[rlx_edge.ops]\ndemo = customop_pkg.ops\n"
    return _dist_info(tmp_path_factory.mktemp("site"), "customop-pkg", "0.1", entry_points)


@pytest.fixture(scope="module")
def custom_model(plugin, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("model") / "custom.rlx"
    r = _python("-c", DRIVER, str(out), path=plugin)
    assert r.returncode == 0, r.stderr[-3000:]
    return out, json.loads(r.stdout.splitlines()[-1])


def test_a_custom_op_runs_in_the_reference_jax_and_its_own_c_kernel(custom_model):
    _, res = custom_model
    assert not res["loaded_at_import"]  # lazily: importing rlx-edge loads no plugin
    assert res["float_clipped"] and res["float_jax_err"] < 1e-6  # float32: XLA's dot sums in another order
    assert res["ops"] == ["fully_connected", "demo_clip", "relu"]
    assert res["int_clipped"] > 1  # several outputs sit on the clamp: the integer clip is exercised
    assert res["jax"] and res["cortexm-host"]


def test_the_cli_loads_the_op_from_the_model_file(custom_model, plugin):
    path, _ = custom_model
    r = _python("-m", "rlx_edge.cli", "inspect", str(path), "--json", path=plugin)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ops"]["demo_clip"] == 1


def test_an_unregistered_op_names_itself_and_the_entry_point_group(custom_model, tmp_path):
    path, _ = custom_model
    r = _python("-m", "rlx_edge.cli", "inspect", str(path), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "unknown op 'demo_clip'" in r.stderr and "rlx_edge.ops entry points" in r.stderr


def test_a_broken_plugin_names_its_distribution(custom_model, tmp_path):
    path, _ = custom_model
    site = _dist_info(tmp_path, "broken-ops", "2.0", "[rlx_edge.ops]\nbad = no_such_module_for_rlx\n")
    r = _python("-m", "rlx_edge.cli", "inspect", str(path), path=site)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "entry point bad = no_such_module_for_rlx (group rlx_edge.ops) of distribution broken-ops 2.0" in r.stderr
    assert "No module named 'no_such_module_for_rlx'" in r.stderr
    # built-in ops never need the plugins: a model of them loads with the broken one installed
    probe = "from rlx_edge.ir.ops import REGISTRY, get_op; get_op('relu'); print(REGISTRY._state)"
    r = _python("-c", probe, path=site)
    assert r.returncode == 0 and r.stdout.strip() == "unloaded", r.stderr


def test_register_op_is_public_and_kernel_files_cannot_clash():
    import rlx_edge
    from rlx_edge.extend import cortexm_rule

    assert callable(rlx_edge.register_op)
    with pytest.raises(RuntimeError, match=r"rlx_nn\.h exist already"):
        cortexm_rule("relu", sources={"rlx_nn.h": ""})
    with pytest.raises(RuntimeError, match=r"plain \.c or \.h file names"):
        cortexm_rule("relu", sources={"sub/k.c": ""})
