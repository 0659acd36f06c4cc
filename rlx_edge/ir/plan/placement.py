"""Arena offsets for buffers whose lifetimes are known.

Two families of algorithms, each a choice of buffer order and gap rule:

- ``greedy_size``: TFLite Micro's greedy-by-size first-fit (largest buffer
  first, lowest offset that fits among the buffers live at the same time);
- ``best_fit``: several orders (by size, by lifetime start, by size x
  lifetime, by number of conflicts) with the tightest gap that fits.

``place`` runs the requested algorithms and keeps the smallest arena.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlx_edge.ir.plan.liveness import Buffer


def align_up(x: int, alignment: int) -> int:
    return -(-x // alignment) * alignment


def _assign(buffers: Sequence[Buffer], order: Sequence[int], alignment: int, best: bool) -> list[int]:
    offsets = [-1] * len(buffers)
    placed: list[int] = []
    for i in order:
        b = buffers[i]
        size = align_up(b.size, alignment)
        busy = sorted(
            (offsets[j], offsets[j] + align_up(buffers[j].size, alignment))
            for j in placed
            if buffers[j].overlaps_in_time(b)
        )
        cursor = 0
        chosen = -1
        chosen_gap = None
        for lo, hi in busy:
            if lo - cursor >= size:
                gap = lo - cursor
                if not best:
                    chosen = cursor
                    break
                if chosen_gap is None or gap < chosen_gap:
                    chosen, chosen_gap = cursor, gap
            cursor = max(cursor, hi)
        if chosen < 0:
            chosen = cursor
        offsets[i] = chosen
        placed.append(i)
    return offsets


def _arena(buffers: Sequence[Buffer], offsets: Sequence[int], alignment: int) -> int:
    return max((o + align_up(b.size, alignment) for b, o in zip(buffers, offsets)), default=0)


def _conflicts(buffers: Sequence[Buffer]) -> list[int]:
    return [sum(1 for o in buffers if o is not b and o.overlaps_in_time(b)) for b in buffers]


ORDERS: dict[str, Callable[[Sequence[Buffer]], list[int]]] = {
    "size": lambda bs: sorted(range(len(bs)), key=lambda i: (-bs[i].size, bs[i].start, i)),
    "start": lambda bs: sorted(range(len(bs)), key=lambda i: (bs[i].start, -bs[i].size, i)),
    "area": lambda bs: sorted(range(len(bs)), key=lambda i: (-bs[i].size * (bs[i].end - bs[i].start + 1), i)),
}


@dataclass
class Placement:
    algorithm: str
    offsets: list[int]
    arena_bytes: int


def greedy_size(buffers: Sequence[Buffer], alignment: int) -> Placement:
    offsets = _assign(buffers, ORDERS["size"](buffers), alignment, best=False)
    return Placement("greedy_size", offsets, _arena(buffers, offsets, alignment))


def best_fit(buffers: Sequence[Buffer], alignment: int) -> Placement:
    conflicts = _conflicts(buffers)
    orders = {
        "size": ORDERS["size"](buffers),
        "start": ORDERS["start"](buffers),
        "area": ORDERS["area"](buffers),
        "conflicts": sorted(range(len(buffers)), key=lambda i: (-conflicts[i], -buffers[i].size, i)),
    }
    best: Placement | None = None
    for name, order in orders.items():
        for rule in (True, False):
            offsets = _assign(buffers, order, alignment, best=rule)
            p = Placement(
                f"best_fit[{name},{'best' if rule else 'first'}]", offsets, _arena(buffers, offsets, alignment)
            )
            if best is None or p.arena_bytes < best.arena_bytes:
                best = p
    assert best is not None
    return best


ALGORITHMS: dict[str, Callable[[Sequence[Buffer], int], Placement]] = {
    "greedy_size": greedy_size,
    "best_fit": best_fit,
}


def place(buffers: Sequence[Buffer], alignment: int = 16, algorithms: Sequence[str] = tuple(ALGORITHMS)) -> Placement:
    """Run each algorithm and keep the smallest arena (earlier algorithm wins ties)."""
    results = [ALGORITHMS[a](buffers, alignment) for a in algorithms]
    return min(results, key=lambda p: p.arena_bytes)
