"""Worker of ``test_fuzz_loaders``: load model files under a memory limit, one JSON line each.

Usage: ``python fuzz_loaders_worker.py LIST_FILE MEMORY_BYTES TIMEOUT_S``

Every path in LIST_FILE (one a line) is loaded with ``load_model`` and, when
that succeeds, summarized with ``inspect.summary``. One JSON object per path
goes to stdout, flushed at once, with ``outcome``:

* ``accepted``: a graph came back and its summary is JSON;
* ``rejected``: an :class:`~rlx_edge.errors.RlxError` (``error``, ``message``);
* ``crash``: any other exception (``error``, ``message``, ``where``);
* ``hang``: the file took longer than TIMEOUT_S seconds.

The address-space limit turns a runaway allocation into a MemoryError (a
crash) instead of the machine's OOM killer. A signal kills the worker itself;
the test names the file after the last one reported.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
import traceback
from typing import Any


class _Hang(BaseException):
    """Raised by the alarm; a BaseException, so that no loader's ``except Exception`` can swallow it."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang


def _load(path: str) -> dict[str, Any]:
    from rlx_edge.errors import RlxError
    from rlx_edge.frontends import load_model
    from rlx_edge.ir.inspect import summary

    try:
        json.dumps(summary(load_model(path)))
        return {"outcome": "accepted"}
    except RlxError as e:
        return {"outcome": "rejected", "error": type(e).__name__, "message": str(e)}
    except _Hang:
        return {"outcome": "hang"}
    except Exception as e:  # MemoryError and RecursionError included: all are findings
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{frame.filename}:{frame.lineno} ({frame.name})"
        return {"outcome": "crash", "error": type(e).__name__, "message": str(e)[:300], "where": where}


def main(argv: list[str]) -> None:
    list_file, memory, timeout = argv[0], int(argv[1]), int(argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGALRM, _alarm)
    with open(list_file, encoding="utf-8") as f:
        paths = [line.strip() for line in f if line.strip()]
    for path in paths:
        signal.alarm(timeout)
        try:
            record = _load(path)
        except _Hang:  # the alarm fired between the loader and the handler
            record = {"outcome": "hang"}
        finally:
            signal.alarm(0)
        print(json.dumps({"path": path, **record}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
