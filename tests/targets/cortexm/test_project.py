"""compile_project: the files, determinism, and warning-free builds for host and Cortex-M."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import compile_project, emit

from .conftest import MLPERF

WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]
ARM = {
    "m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "m3": ["-mcpu=cortex-m3", "-mthumb"],
}


def test_project_files_and_determinism(mlperf_graph, tmp_path):
    g = mlperf_graph("kws")
    a = compile_project(g, tmp_path / "a", core="cortex-m4")
    b = compile_project(g, tmp_path / "b", core="cortex-m4")
    assert a == b
    for f in ("model.h", "model.c", "weights.c", "weights.h", "Makefile", "kernels/rlx_nn.h"):
        assert f in a["files"]
    for f in a["files"]:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    header = (tmp_path / "a" / "model.h").read_text()
    assert f"#define RLX_ARENA_SIZE {a['arena_bytes']}u" in header
    assert "int rlx_model_invoke(const void *input, void *output, uint8_t *arena);" in header
    assert "#define RLX_INPUT0_ZERO_POINT 83" in header
    assert "#define RLX_OUTPUT0_SHAPE {1, 12}" in header
    model_c = (tmp_path / "a" / "model.c").read_text()
    # one kernel call per non-view layer: 5 conv, 4 depthwise, pool, fc, softmax; no heap, no interpreter
    calls = re.findall(r"^\s+(rlx_\w+)\(&rlx_l\d+", model_c, flags=re.M)
    assert len(calls) == 12
    assert "rlx_convolve_1x1_s8" in calls and "rlx_depthwise_conv_3x3_pair_s8" in calls
    assert "malloc" not in model_c and "malloc" not in (tmp_path / "a" / "weights.c").read_text()


# (compiler, flags, digest of kernels/) already compiled warning-free in this module: compile_project
# copies the whole kernel library, the same bytes for every model, so the second model of a compiler
# adds only its model.c and weights.c (a kernels/ that differed would be compiled again)
_KERNELS_DONE: set[tuple[str, tuple[str, ...], str]] = set()


def _kernels_digest(src: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((src / "kernels").rglob("*")):
        if p.is_file():
            h.update(p.relative_to(src).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _compile_all(cc: str, flags: list[str], src: Path, out: Path) -> None:
    every = sorted((src / "kernels").glob("*.c"))
    assert every, f"no kernels in {src}"
    key = (cc, tuple(flags), _kernels_digest(src))
    kernels = [] if key in _KERNELS_DONE else every
    sources = [src / "model.c", src / "weights.c", *kernels]
    for s in sources:
        res = subprocess.run(
            [
                cc,
                *flags,
                *WARN,
                "-I",
                str(src),
                "-I",
                str(src / "kernels"),
                "-c",
                str(s),
                "-o",
                str(out / (s.stem + ".o")),
            ],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, f"{cc} {s.name}:\n{res.stderr}"
        assert res.stderr == "", res.stderr
    _KERNELS_DONE.add(key)


@pytest.mark.parametrize("key", ["kws", "ic"])
@pytest.mark.parametrize("cc", ["gcc", "m4", "m3"])
def test_warning_free_build(key, cc, mlperf_graph, tmp_path):
    compile_project(mlperf_graph(key), tmp_path / "src", core="cortex-m4")
    (tmp_path / "obj").mkdir()
    if cc == "gcc":
        _compile_all("gcc", [], tmp_path / "src", tmp_path / "obj")
    else:
        assert shutil.which("arm-none-eabi-gcc"), "arm-none-eabi-gcc is part of the toolchain (tools/setup.sh)"
        _compile_all("arm-none-eabi-gcc", ARM[cc], tmp_path / "src", tmp_path / "obj")


def test_makefile_builds_library(mlperf_graph, tmp_path):
    info = compile_project(mlperf_graph("ad"), tmp_path, core="cortex-m3")
    res = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "libmodel.a").stat().st_size > info["weight_bytes"]
    nm = subprocess.run(["arm-none-eabi-nm", str(tmp_path / "libmodel.a")], capture_output=True, text=True).stdout
    assert " T rlx_model_invoke" in nm and " T rlx_fully_connected_s8" in nm


def test_unsupported_op_is_a_clear_error():
    g = Graph("bad")
    x = g.input("x", (1, 4), "f32")
    g.output(g.erf(x, name="g"))
    # the pipeline's legalization: the node, its op, and the targets that do run it
    where = r"cortexm does not support: node 'g' \(op erf\): supported by jax, reference"
    with pytest.raises(UnsupportedOpError, match=where):
        emit(g)


def test_every_mlperf_op_has_a_rule(mlperf_graph):
    from rlx_edge.targets.cortexm import RULES

    ops = {n.op for key in MLPERF for n in mlperf_graph(key).nodes}
    assert ops <= set(RULES.keys()), ops - set(RULES.keys())
