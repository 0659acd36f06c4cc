"""The README is true to the code.

- its code blocks run as written, top to bottom, in one empty folder (the
  Python example first, then every ``sh`` line with the venv's ``rlx-edge``);
- the Python example is five lines and the set-up is two commands;
- the command table lists every subcommand of ``build_parser()`` with every option;
- the support table is what ``rlx_edge.targets.support.support_table()`` generates.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from rlx_edge.cli import build_parser
from rlx_edge.targets.support import support_table

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_readme_blocks_run_top_to_bottom(tmp_path):
    text = README.read_text()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = []
    for lang, body in BLOCK.findall(text):
        if lang == "python":
            cmds = [[sys.executable, "-c", body]]
        elif lang == "sh":
            cmds = [["bash", "-c", line] for line in body.splitlines() if line.strip() and not line.startswith("#")]
        else:
            continue
        for cmd in cmds:
            r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, f"README command failed: {cmd[-1]}\n{r.stderr}"
            ran.append((cmd[-1], r.stdout))
    shapes = [out.strip() for cmd, out in ran if "np.load('y.npy').shape" in cmd]
    assert shapes == ["(1, 6, 6, 4)"]  # the printed shape is what the README's comment says
    assert any(c.startswith("rlx-edge run ") for c, _ in ran), "the README shows no rlx-edge run"
    assert (tmp_path / "tiny.rlx").stat().st_mode & 0o044  # atomic writes keep ordinary permissions
    assert (tmp_path / "y.npy").exists()


def test_readme_example_is_five_lines():
    code = BLOCK.search(_section(README.read_text(), "Five lines of Python")).group(2)
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(lines) == 5, lines


def test_readme_setup_is_two_commands():
    setup = _section(README.read_text(), "Set-up")
    assert re.findall(r"^    (make \w+)$", setup, re.M) == ["make demo", "make test"]


def _parser_commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _table_rows() -> dict[str, str]:
    """Command name -> the synopsis in the README's command table."""
    rows = re.findall(r"^\| `rlx-edge (\w+)([^`]*)` \|", _section(README.read_text(), "Command line"), re.M)
    return {name: synopsis for name, synopsis in rows}


def test_command_table_lists_every_subcommand():
    assert set(_table_rows()) == set(_parser_commands())


def test_command_table_lists_every_option():
    rows = _table_rows()
    problems = []
    for name, parser in _parser_commands().items():
        shown = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", rows.get(name, "")))
        known = {s for a in parser._actions for s in a.option_strings}
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                if not shown & set(action.option_strings):
                    problems.append(f"{name}: {'/'.join(action.option_strings)} is not in the README table")
        problems += [f"{name}: the README shows {opt}, which rlx-edge {name} does not have" for opt in shown - known]
    assert not problems, "\n".join(problems)


def test_support_table_is_current():
    text = README.read_text()
    begin, end = "<!-- support-table:begin -->\n", "<!-- support-table:end -->"
    current = text[text.index(begin) + len(begin) : text.index(end)]
    assert current == support_table(), (
        "README's support table is out of date: replace the lines between the support-table markers "
        "with the output of `rlx-edge targets`"
    )
