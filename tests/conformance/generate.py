"""Write the TFLite conformance table: ``python tests/conformance/generate.py [--check]``.

Runs every builtin x dtype case (``_suite``) and writes ``tflite_ops.md``
next to this file; the output depends only on the code (seeded draws).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE / "tflite_ops.md"
if str(HERE.parent) not in sys.path:  # run as a script: the tests' helper modules (opgraphs)
    sys.path.insert(0, str(HERE.parent))

from conformance._suite import DTYPES, SIDES, Case, run_suite  # noqa: E402

HEADER = """# TFLite builtin conformance

Written by `python tests/conformance/generate.py`; checked by `tests/conformance/test_tflite_conformance.py`
(a case marked pass here must still pass; no case may be wrong). One single-op model per TFLite Micro builtin
and dtype (`float`: the unquantized model; `int8` / `int16x8`: PTQ with that scheme), drawn from the IR op's
sampler with a fixed seed, written by the exporter and run in TFLite Micro, the reference (equal to TFLite
Micro: integers bit-exact, float within compare's tolerance), the Cortex-M host build and JAX (both equal to
the reference; JAX float within 1e-5). Cortex-M is an integer-only target: float cases are `n/a` there.
Sides: `pass`, `wrong`, `unsupported` (a clear RlxError of ours), `error` (another exception), `refuses`
(TFLite Micro will not load or run the model), `n/a` (not applicable: Cortex-M for float), `-` (not run).
A case's draws go on until the exporter writes the builtin and TFLite Micro runs it (at most 3 models).
Hand-made cases (`HAND_MADE` in `_suite.py`; the note says so): builtins the exporter cannot write get files
written by hand from a seeded draw, for the dtypes TFLite Micro's kernel takes. EMBEDDING_LOOKUP is the
gather the exporter writes as GATHER: a drawn gather of whole rows, written as EMBEDDING_LOOKUP. The
shape-only builtins (FILL, ZEROS_LIKE, SHAPE, BROADCAST_ARGS) feed a real op (FILL / ZEROS_LIKE: PACK with
the input; SHAPE / BROADCAST_ARGS: an int32 MAXIMUM with an input): TFLite Micro runs the file as written,
while the importer folds the builtin to a constant, so the reference, Cortex-M and JAX run the folded graph.
Status: `pass` (every side that applies passes); `wrong` (a mismatch on any side); `unsupported` / `error`
(counted as not passing); `tflm-unsupported` (TFLite Micro refuses it and its kernels do not take this
dtype: not counted); `n/a` (no model written and TFLite Micro has no kernel for this dtype: not counted).
Where no model is written, or TFLite Micro refuses one, whether its kernels take the dtype comes from
`TFLM_DTYPES` in `_suite.py` (read off TFLite Micro's kernel sources); such a case counts when they do.
Stateful builtins (SVDF) are compared over a sequence of invokes from the zero-point state.
"""


def summary(cases: list[Case]) -> tuple[int, int, int]:
    counted = [c for c in cases if c.status not in ("tflm-unsupported", "n/a")]
    passed = sum(c.status == "pass" for c in counted)
    wrong = sum(c.status == "wrong" for c in counted)
    return passed, len(counted), wrong


def summary_line(cases: list[Case]) -> str:
    x, y, z = summary(cases)
    return f"{x} of {y} TFLite-Micro-supported cases pass ({100 * x / max(y, 1):.1f} %); {z} wrong"


def render(cases: list[Case]) -> str:
    lines = [HEADER, f"**{summary_line(cases)}**", ""]
    counts = Counter(c.status for c in cases)
    lines += ["Cases by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), ""]
    lines += ["| builtin | dtype | " + " | ".join(SIDES) + " | status | reason / note |"]
    lines += ["|" + "---|" * (len(SIDES) + 4)]
    for c in cases:
        cells = [c.sides.get(s, "-") for s in SIDES]
        why = "" if c.status == "pass" else c.reason
        note = "" if why.startswith(c.note) else c.note  # a hand-made case not written says it already
        reason = "; ".join(t for t in (note, why) if t).replace("|", "/")
        lines.append(f"| {c.builtin} | {c.dtype} | " + " | ".join(cells) + f" | {c.status} | {reason} |")
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[str, str]:
    """``BUILTIN/dtype`` -> status of a written table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(SIDES) + 4 and cells[1] in DTYPES:
            out[f"{cells[0]}/{cells[1]}"] = cells[2 + len(SIDES)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="BUILTIN/dtype keys to run (prints, writes nothing)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cases = run_suite(Path(tmp), only=args.only)
    text = render(cases)
    if args.only:
        print(text)
        return 0
    tmp_path = TABLE.with_suffix(".md.tmp")
    tmp_path.write_text(text)
    tmp_path.replace(TABLE)  # atomic: a reader never sees half a table
    print(summary_line(cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
