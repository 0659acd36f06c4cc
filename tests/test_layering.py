"""Imports go one way: frontends -> ir -> quant -> (pipeline) -> targets -> hil -> cli.

Every module under ``rlx_edge/`` is read with ``ast`` (imports inside
functions count as much as those at the top) and checked for:

- a private name or module (``_x``) imported from another package: a private
  thing belongs to the package that holds it and to that package's
  subpackages (``rlx_edge._io`` serves all of ``rlx_edge``;
  ``rlx_edge.ir.ops._common`` serves ``rlx_edge.ir.ops`` only);
- ``rlx_edge.quant`` importing ``rlx_edge.targets``;
- ``rlx_edge.ir`` importing ``rlx_edge.quant``, a target, a frontend, ``hil``,
  the pipeline or the command line;
- ``rlx_edge.targets`` importing ``rlx_edge.hil`` or the command line;
- the pipeline naming a target package (it finds targets through the registry).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rlx_edge"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    package: str  # the package it belongs to
    target: str  # what it imports, dotted (module, or module.name)
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _packages(root: Path) -> set[str]:
    return {_module_name(p) for p in root.rglob("__init__.py")}


def imports_of(source: str, module: str, package: str) -> list[Import]:
    """Every ``rlx_edge`` import in ``source``, as full dotted targets."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found += [Import(module, package, t, node.lineno) for t in targets if t.split(".")[0] == "rlx_edge"]
    return found


def all_imports(root: Path = PACKAGE) -> list[Import]:
    packages = _packages(root)
    out = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path)
        package = module if module in packages else module.rpartition(".")[0]
        out += imports_of(path.read_text(encoding="utf-8"), module, package)
    return out


def _inside(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def private_owner(target: str, packages: set[str]) -> str | None:
    """The package a private name or module of ``target`` belongs to; None if nothing in it is private."""
    parts = target.split(".")
    first = next((i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")), None)
    if first is None:
        return None
    holder = ".".join(parts[:first])  # the package or module that holds the private part
    return holder if holder in packages else holder.rpartition(".")[0]


def private_across_packages(imports: list[Import], packages: set[str]) -> list[str]:
    bad = []
    for imp in imports:
        owner = private_owner(imp.target, packages)
        if owner is not None and not _inside(imp.package, owner):
            bad.append(f"{imp} (private to {owner})")
    return bad


def forbidden(imports: list[Import], importer: str, banned: tuple[str, ...]) -> list[str]:
    return [str(i) for i in imports if _inside(i.module, importer) and any(_inside(i.target, b) for b in banned)]


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_no_private_import_across_packages(imports):
    bad = private_across_packages(imports, _packages(PACKAGE))
    assert not bad, "private names imported from another package:\n" + "\n".join(bad)


def test_quant_imports_no_target(imports):
    bad = forbidden(imports, "rlx_edge.quant", ("rlx_edge.targets",))
    assert not bad, "\n".join(bad)


def test_ir_imports_nothing_above_it(imports):
    above = ("rlx_edge.quant", "rlx_edge.targets", "rlx_edge.frontends", "rlx_edge.hil", "rlx_edge.pipeline")
    bad = forbidden(imports, "rlx_edge.ir", (*above, "rlx_edge.cli", "rlx_edge.demo"))
    assert not bad, "\n".join(bad)


def test_targets_import_neither_hil_nor_cli(imports):
    bad = forbidden(imports, "rlx_edge.targets", ("rlx_edge.hil", "rlx_edge.cli", "rlx_edge.demo"))
    assert not bad, "\n".join(bad)


def test_pipeline_names_no_target(imports):
    bad = [
        str(i)
        for i in imports
        if i.module == "rlx_edge.pipeline"
        and _inside(i.target, "rlx_edge.targets")
        and not _inside(i.target, "rlx_edge.targets.registry")
    ]
    assert not bad, "\n".join(bad)


# the checker itself finds what it looks for -------------------------------------------------
SOURCE = """
from rlx_edge.ir.ops._common import finish
from rlx_edge.ir.ops import get_op
from rlx_edge._io import atomic_dir
import rlx_edge.targets.fpga.design

def f():
    from rlx_edge.targets.cortexm.rules import _helper
    from . import _sibling
"""
PACKAGES = {"rlx_edge", "rlx_edge.ir", "rlx_edge.ir.ops", "rlx_edge.quant", "rlx_edge.targets"}
PACKAGES |= {"rlx_edge.targets.cortexm"}


def test_checker_flags_private_imports_from_other_packages():
    found = imports_of(SOURCE, "rlx_edge.quant.calibrate", "rlx_edge.quant")
    bad = private_across_packages(found, PACKAGES)
    assert [b.split(" (")[0] for b in bad] == [
        "rlx_edge.quant.calibrate:2 imports rlx_edge.ir.ops._common.finish",
        "rlx_edge.quant.calibrate:8 imports rlx_edge.targets.cortexm.rules._helper",
    ]
    # the same names inside their own package are fine
    assert not private_across_packages(imports_of(SOURCE, "rlx_edge.ir.ops.conv", "rlx_edge.ir.ops")[:1], PACKAGES)


def test_checker_sees_imports_inside_functions():
    found = imports_of(SOURCE, "rlx_edge.quant.calibrate", "rlx_edge.quant")
    bad = forbidden(found, "rlx_edge.quant", ("rlx_edge.targets",))
    assert bad == [
        "rlx_edge.quant.calibrate:5 imports rlx_edge.targets.fpga.design",
        "rlx_edge.quant.calibrate:8 imports rlx_edge.targets.cortexm.rules._helper",
    ]
    relative = [i.target for i in found if i.line == 9]
    assert relative == ["rlx_edge.quant._sibling"]
