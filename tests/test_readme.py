"""The README's Python example runs as printed, and the README keeps its two set-up commands."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(tmp_path):
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(1, 8, 8, 4)"
    assert (tmp_path / "tiny.rlx").stat().st_mode & 0o044  # atomic writes keep ordinary permissions


def test_readme_setup_is_two_commands():
    text = README.read_text()
    setup = text.split("## Set-up", 1)[1].split("##", 1)[0]
    assert re.findall(r"^    (make \w+)$", setup, re.M) == ["make demo", "make test"]
