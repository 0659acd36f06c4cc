"""Write tests/suite_weights.json from a pytest junit XML: seconds per test file, for scheduling.

    .venv/bin/python -m pytest -n 2 --dist loadfile --junitxml=/tmp/suite.xml
    .venv/bin/python tools/suite_weights.py /tmp/suite.xml

tests/conftest.py orders the collection longest file first, so that xdist's
per-file scheduling (``--dist loadfile`` hands out one file at a time to the
worker that runs out of work) is a longest-processing-time-first schedule
and the suite does not end on one worker running a long file alone. Times
are rounded to whole seconds so that re-measuring does not churn the file.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "suite_weights.json"


def file_seconds(junit_xml: Path) -> dict[str, int]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        # classname is the dotted module path, then test classes (capitalized) when there are any
        parts = [p for p in case.get("classname", "").split(".") if not p[:1].isupper()]
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time", 0.0))
    return {k: round(v) for k, v in sorted(seconds.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    weights = file_seconds(Path(argv[0]))
    OUT.write_text(json.dumps({"seconds": weights}, indent=1, sort_keys=True) + "\n")
    print(f"{OUT}: {len(weights)} files, {sum(weights.values())} s in all", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
