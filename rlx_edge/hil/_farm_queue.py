"""The work queue of a farm campaign: chunks of one model's inputs, taken by one worker per place.

A worker prefers chunks of the model its board already runs (no reflash),
then of models already built for its board (no compile), then any, and
never one whose firmware failed to build for its board. A place that fails
hands the inputs of its chunk it had not finished back to the queue; a
worker waits while chunks are in flight elsewhere, since a failing place may
hand work back, and stops once nothing it can run is pending or in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    model: int
    """Index of the model in the campaign."""
    indices: tuple[int, ...]
    """Inputs of that model this chunk runs."""


class WorkQueue:
    def __init__(self, jobs: list[Job]):
        self._pending = list(jobs)
        self._in_flight = 0
        self._cancelled = False
        self._busy: dict[int, int] = {}
        """Model -> chunks of it in flight."""
        self._cond = threading.Condition()

    def take(self, current: int | None, built: Callable[[int], bool], cannot: set[int] = frozenset()) -> Job | None:
        """The next chunk for a worker whose board runs model ``current``; None when all work is done.

        ``cannot``: models this worker's board cannot run (their firmware did not build for it).
        """
        with self._cond:
            while True:
                if self._cancelled:
                    return None
                mine = [i for i, j in enumerate(self._pending) if j.model not in cannot]
                if mine:
                    break
                if not self._in_flight:
                    return None
                self._cond.wait()

            # Among models not built yet, the one fewest places work on: boards build different models at once.
            def rank(i: int) -> tuple:
                m = self._pending[i].model
                return m != current, not built(m), 0 if built(m) else self._busy.get(m, 0), i

            job = self._pending.pop(min(mine, key=rank))
            self._in_flight += 1
            self._busy[job.model] = self._busy.get(job.model, 0) + 1
            return job

    def finish(self, job: Job, remaining: tuple[int, ...] = ()) -> None:
        """``job`` is over; ``remaining``: its inputs that were not run, queued again for the other places."""
        with self._cond:
            self._in_flight -= 1
            self._busy[job.model] -= 1
            if remaining:
                self._pending.insert(0, Job(job.model, remaining))
            self._cond.notify_all()

    def cancel(self) -> None:
        """Stops the campaign: every waiting and later :meth:`take` returns None."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    def drain(self) -> list[Job]:
        """What no place ran (every place failed): removed from the queue."""
        with self._cond:
            left, self._pending = self._pending, []
            self._cond.notify_all()
            return left
