"""Suite-wide settings."""

import os

# every pass manager run in the tests verifies the graph after each pass
os.environ.setdefault("RLX_EDGE_VERIFY_PASSES", "1")
