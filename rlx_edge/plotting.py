"""Figures the tools draw (arena timelines, per-layer profiles): one way to start and save them.

Files are PNG or SVG by suffix, written whole under a temporary name and
renamed, and the PNG carries no software version, so the same drawing gives
the same bytes.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rlx_edge.errors import RlxError


def pyplot_for(path: str | Path) -> Any:
    """matplotlib's pyplot (headless) for drawing into ``path``, after checking its suffix."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise RlxError(f"{path}: the plot must be a .png or .svg file")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RlxError("drawing needs matplotlib: pip install 'rlx-edge[plot]'") from None
    return plt


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (PNG or SVG by suffix) atomically, and close it."""
    import matplotlib.pyplot as plt

    from rlx_edge._io import atomic_write_bytes

    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix[1:].lower(), metadata={"Software": None} if path.suffix == ".png" else None)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
