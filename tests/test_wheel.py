"""The wheel carries what the library needs at run time, and the library finds it outside a checkout.

Top-level ``firmware/`` and ``hdl/`` are mapped into the package as
``rlx_edge/_data/...`` by pyproject.toml's force-include;
:func:`rlx_edge.resources.data_dir` finds that copy in an installed wheel and
the top-level folders in a checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlx_edge.errors import RlxError
from rlx_edge.resources import DATA_DIRS, data_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (whl,) = out.glob("rlx_edge-*.whl")
    return whl


def test_wheel_holds_firmware_hdl_kernels_and_models(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())

    def shipped(folder: Path, under: str) -> set[str]:
        files = (p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        return {f"{under}/{p.relative_to(folder).as_posix()}" for p in files}

    for name in DATA_DIRS:
        expected = shipped(ROOT / name, f"rlx_edge/_data/{name}")
        assert expected and expected <= names, sorted(expected - names)
    for must in (
        "rlx_edge/_data/firmware/runtime/main.c",
        "rlx_edge/_data/firmware/hil/rlx_hil.h",
        "rlx_edge/_data/firmware/boards/rpi-pico/boot2.S",
        "rlx_edge/_data/firmware/qemu_plugin/rlx_icount.c",
        "rlx_edge/_data/hdl/tb_datapath.py",
        "rlx_edge/models/digits_cnn.rlx",
    ):
        assert must in names, must
    kernels = ROOT / "rlx_edge" / "targets" / "cortexm" / "kernels"
    assert shipped(kernels, "rlx_edge/targets/cortexm/kernels") <= names
    assert any(n.endswith(".h") for n in names if "/kernels/" in n)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_wheel_finds_and_builds_its_firmware(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import rlx_edge, sys\n"
        "from rlx_edge.resources import data_dir\n"
        "from rlx_edge.targets.cortexm import build_firmware\n"
        "from rlx_edge.targets.fpga.sim import hdl_dir\n"
        "print(rlx_edge.__file__)\n"
        "print(data_dir('firmware'))\n"
        "print(hdl_dir())\n"
        "print(build_firmware(sys.argv[1], 'qemu-m3', sys.argv[2]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    fixture = ROOT / "tests" / "firmware" / "fixtures" / "standin"
    r = subprocess.run(
        [sys.executable, "-c", script, str(fixture), str(tmp_path / "fw")],
        cwd=tmp_path,  # not the checkout, whose rlx_edge would shadow the wheel's
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    package, firmware, hdl, elf = (Path(line) for line in r.stdout.split())
    assert package == site / "rlx_edge" / "__init__.py"
    assert firmware == site / "rlx_edge" / "_data" / "firmware"
    assert hdl == site / "rlx_edge" / "_data" / "hdl"
    assert elf.is_file()


def test_checkout_uses_its_top_level_folders():
    for name in DATA_DIRS:
        assert data_dir(name) == ROOT / name
    assert (data_dir("hdl") / "tb_datapath.py").is_file()
    with pytest.raises(RlxError, match="no data folder 'models'"):
        data_dir("models")
