"""Where the files the library needs at run time are: ``firmware/`` and ``hdl/``.

A wheel carries them inside the package, under ``rlx_edge/_data/<name>``
(pyproject.toml's force-include maps the checkout's top-level folders
there); a checkout, and an editable install of it, uses the top-level folders
themselves.
"""

from __future__ import annotations

from pathlib import Path

from rlx_edge.errors import RlxError

_PACKAGE = Path(__file__).resolve().parent
DATA_DIRS = ("firmware", "hdl")


def data_dir(name: str) -> Path:
    """The folder ``name`` (one of :data:`DATA_DIRS`): the wheel's copy, else the checkout's."""
    if name not in DATA_DIRS:
        raise RlxError(f"no data folder {name!r}; there are {', '.join(DATA_DIRS)}")
    shipped = _PACKAGE / "_data" / name
    # A folder holding only __pycache__ is a leftover, not a shipped copy.
    if shipped.is_dir() and any(p.name != "__pycache__" for p in shipped.iterdir()):
        return shipped
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    raise RlxError(f"{name}/ is missing from this installation (looked in {shipped} and {checkout})")
