"""Draw an arena plan: time (steps) across, address up, one rectangle per buffer."""

from __future__ import annotations

from pathlib import Path

from rlx_edge.ir.plan.program import Program
from rlx_edge.plotting import pyplot_for, save_figure


def draw_plan(program: Program, path: str | Path) -> Path:
    """Write a PNG or SVG (by suffix) of ``program``'s arena timeline."""
    plt = pyplot_for(path)
    from matplotlib.patches import Rectangle

    steps = max(len(program.schedule), 1)
    fig, ax = plt.subplots(figsize=(max(6, min(18, steps * 0.45)), 5), dpi=110)
    cmap = plt.get_cmap("tab20")
    for i, b in enumerate(sorted(program.buffers, key=lambda b: (b.start, b.offset))):
        color = "#d62728" if b.kind == "scratch" else cmap(i % 20)
        ax.add_patch(
            Rectangle(
                (b.start - 0.45, b.offset), b.end - b.start + 0.9, b.size, facecolor=color, edgecolor="black", lw=0.4
            )
        )
        if b.size >= program.arena_bytes * 0.06:
            label = b.values[0] if b.values else b.name
            ax.text(b.start - 0.4, b.offset + b.size / 2, label, fontsize=6, va="center", clip_on=True)
    ax.axhline(program.arena_bytes, color="black", lw=1)
    ax.axhline(program.lower_bound_bytes, color="gray", lw=1, ls="--")
    ax.set_xlim(-0.6, steps - 0.4)
    ax.set_ylim(0, max(program.arena_bytes, 1) * 1.08)
    ax.set_xlabel("schedule step")
    ax.set_ylabel("arena offset (bytes)")
    ax.set_title(
        f"{program.graph.name}: arena {program.arena_bytes:,} B, lower bound {program.lower_bound_bytes:,} B "
        f"({program.algorithm})",
        fontsize=9,
    )
    fig.tight_layout()
    return save_figure(fig, path)
