"""Suite-wide settings."""

import json
import math
import os
from pathlib import Path

# every pass manager run in the tests verifies the graph after each pass
os.environ.setdefault("RLX_EDGE_VERIFY_PASSES", "1")

# seconds per test file, measured (tools/suite_weights.py); a file not listed yet counts as long
_WEIGHTS: dict[str, float] = json.loads(Path(__file__).with_name("suite_weights.json").read_text())["seconds"]


def pytest_collection_modifyitems(config, items):
    # Longest file first: `--dist loadfile` hands each worker the next file when it runs low, so this
    # order is a longest-first schedule and the run does not end with one worker on a long file alone.
    # The sort is stable, so each file's tests stay together and in their own order.
    items[:] = sorted(items, key=lambda item: -_WEIGHTS.get(item.nodeid.split("::")[0], math.inf))
