"""Output paths are checked before any work starts; errors are one bounded line (issue #14).

Every bad output path (a folder nothing can be created in, a parent that is a
file, a file where a directory goes or the reverse) gives exit 2 and one line
on stderr, and leaves the working folder exactly as it was: no half-written
output, no output of an earlier step (run's Y.npy before its --trace). The
tests run as root, whom chmod does not stop: /proc and /sys are folders where
even root cannot create files.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from modelfiles import TFLM
from rlx_edge.cli import main
from rlx_edge.errors import RlxError, shorten

DIGITS = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"
INT8 = TFLM / "hello_world_int8.tflite"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    from rlx_edge.models.digits import digits_data

    d = tmp_path_factory.mktemp("inputs")
    x, _ = digits_data("train")
    np.save(d / "x.npy", x[:1])
    np.savez(d / "calib.npz", image=x[:16])
    return d


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "adir").mkdir()
    return tmp_path


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


# command -> (argv with OUT where the bad path goes, the output's suffix, whether it is a directory)
COMMANDS = {
    "run": (["run", str(DIGITS), "--input", "{inputs}/x.npy", "-o", "OUT"], ".npy", False),
    "run --trace": (
        ["run", str(DIGITS), "--input", "{inputs}/x.npy", "-o", "{work}/y.npy", "--trace", "OUT"],
        "",
        True,
    ),
    "convert": (["convert", str(DIGITS), "-o", "OUT"], ".rlx", False),
    "export": (["export", str(DIGITS), "-o", "OUT"], ".tflite", False),
    "compile": (["compile", str(INT8), "-o", "OUT"], "", True),
    "plan --plot": (["plan", str(DIGITS), "--plot", "OUT"], ".png", False),
    "quantize --report": (
        ["quantize", str(DIGITS), "--data", "{inputs}/calib.npz", "-o", "{work}/q.rlx", "--report", "OUT"],
        ".json",
        False,
    ),
}


def _bad_path(kind: str, work: Path, suffix: str, is_dir: bool) -> str:
    if kind == "proc":
        return f"/proc/rlx-edge-out{suffix}"
    if kind == "parent is a file":
        return str(work / "afile" / f"out{suffix}")
    # a directory where a file goes, a file where a directory goes
    return str(work / ("afile" if is_dir else "adir"))


EXPECTED = {"proc": "cannot create files in /proc", "parent is a file": "afile is not a directory"}


@pytest.mark.parametrize("kind", ["proc", "parent is a file", "wrong kind"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_output_path_is_one_line_exit_2_nothing_written(command, kind, inputs, work, capsys):
    template, suffix, is_dir = COMMANDS[command]
    bad = _bad_path(kind, work, suffix, is_dir)
    argv = [a.format(inputs=inputs, work=work) if a != "OUT" else bad for a in template]
    before = _tree(work)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlx-edge: error: ") and "Traceback" not in err, err
    wrong_kind = "is not a directory" if is_dir else "is a directory"
    assert EXPECTED.get(kind, wrong_kind) in err and bad in err, err
    assert _tree(work) == before
    assert not os.path.lexists("/proc/rlx-edge-out" + suffix)


def test_sys_is_not_writable_even_for_root(inputs, work, capsys):
    assert main(["convert", str(DIGITS), "-o", "/sys/rlx-edge-out.rlx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot create files in /sys" in err, err


def test_a_special_file_is_not_replaced(work, capsys):
    # Written under a temporary name and renamed, the output would replace a
    # device or a pipe with a plain file.
    os.mkfifo(work / "pipe.rlx")
    assert main(["convert", str(DIGITS), "-o", str(work / "pipe.rlx")]) == 2
    assert "exists and is not a regular file" in capsys.readouterr().err
    assert (work / "pipe.rlx").is_fifo()


@pytest.mark.parametrize("where", ["cwd", "foreign"])
def test_a_directory_of_other_files_is_not_replaced(where, work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    target = "." if where == "cwd" else "adir"
    (work / "adir" / "notes.txt").write_text("mine\n")
    before = _tree(work)
    assert main(["compile", str(INT8), "-o", target]) == 2
    err = capsys.readouterr().err
    assert ("working directory" if where == "cwd" else "holds other files") in err, err
    assert _tree(work) == before


def test_compile_replaces_an_earlier_project_whole(work, capsys):
    out = work / "proj"
    out.mkdir()
    (out / "model.h").write_text("/* an earlier project */\n")
    (out / "stale.c").write_text("int stale;\n")
    assert main(["compile", str(INT8), "-o", str(out), "--json"]) == 0
    assert (out / "model.c").is_file() and not (out / "stale.c").exists()
    assert "earlier" not in (out / "model.h").read_text()
    assert sorted(p.name for p in work.iterdir()) == ["adir", "afile", "proj"]  # no temporary left over


def test_trace_and_output_appear_together(inputs, work):
    argv = ["run", str(DIGITS), "--input", str(inputs / "x.npy"), "-o", str(work / "y.npy")]
    assert main([*argv, "--trace", str(work / "trace")]) == 0
    first = sorted(p.name for p in (work / "trace").iterdir())
    assert first and all(n.endswith(".npy") for n in first) and (work / "y.npy").is_file()
    # Run again into the same trace: replaced whole, nothing else left beside it.
    assert main([*argv, "--trace", str(work / "trace")]) == 0
    assert sorted(p.name for p in (work / "trace").iterdir()) == first
    assert sorted(p.name for p in work.iterdir()) == ["adir", "afile", "trace", "y.npy"]


BAD_NUMBERS = [
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--count", "-5"], "--count: must be >= 1, not -5"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--count", "0"], "--count: must be >= 1, not 0"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--seed", "-1"], "--seed: must be >= 0"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--timeout", "0"], "--timeout: must be a positive"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--timeout", "nan"], "--timeout: must be a positive"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--faults", "1"], "--faults: RATE is a probability"),
    (["hil", str(INT8), "--board", "qemu-mps2-an386", "--faults", "-0.1"], "--faults: RATE is a probability"),
    (["compare", str(INT8), "--against", "tflm", "--inputs", "-1"], "--inputs: must be >= 0, not -1"),
    (["compare", str(INT8), "--against", "tflm", "--seed", "-3"], "--seed: must be >= 0, not -3"),
    (["plan", str(DIGITS), "--alignment", "3"], "--alignment: must be a power of two"),
    (["plan", str(DIGITS), "--alignment", "0"], "--alignment: must be a power of two"),
    (["fpga", str(INT8), "-o", "{work}/f", "--parallelism", "0"], "--parallelism: use area, balanced, latency"),
    (["fpga", str(INT8), "-o", "{work}/f", "--parallelism", "fast"], "--parallelism: use area, balanced, latency"),
    (["eval", str(DIGITS), "--data", "{work}/d.npz", "--batch-size", "0"], "--batch-size: must be >= 1, not 0"),
    (["eval", str(DIGITS), "--data", "{work}/d.npz", "--batch-size", "x"], "--batch-size: 'x' is not an integer"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_NUMBERS, ids=[" ".join(a[-2:]) for a, _ in BAD_NUMBERS])
def test_bad_number_stops_before_any_work(argv, message, work, capsys, monkeypatch):
    import rlx_edge.cli as cli

    def started(*_args, **_kwargs):
        raise AssertionError("the command started despite a bad argument")

    # Not even the model is loaded (so no QEMU boots, nothing is compiled).
    monkeypatch.setattr(cli, "_load", started)
    monkeypatch.setattr("rlx_edge.hil.campaign.run_campaign", started)
    monkeypatch.setattr("rlx_edge.targets.reference.compare.compare_with_tflm", started)
    before = _tree(work)
    assert main([a.format(work=work) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert _tree(work) == before


def test_numbers_at_the_bounds_are_accepted(work, capsys):
    assert main(["plan", str(DIGITS), "--alignment", "1", "--json"]) == 0
    assert main(["compare", str(INT8), "--against", "tflm", "--inputs", "0", "--seed", "0", "--json"]) == 0
    capsys.readouterr()


def test_error_lines_are_bounded(capsys, monkeypatch):
    import rlx_edge.cli as cli

    name = "conv/" + "x" * 2_000_000 + "/bias"

    def load(path):
        raise RlxError(f"{path}: tensor {name} has 3 dimensions; the op takes 4\n(and more\tlines)")

    monkeypatch.setattr(cli, "_load", load)
    assert main(["inspect", "m.tflite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) <= 300, len(err)
    # The ends survive: where, which tensor, and what is wrong.
    assert err.startswith("rlx-edge: error: m.tflite: tensor conv/xxx") and "…" in err
    assert "xxx/bias has 3 dimensions; the op takes 4 (and more lines)" in err


@pytest.mark.parametrize(
    ("text", "limit", "want"),
    [("short", 10, "short"), ("abcdefghij", 10, "abcdefghij"), ("abcdefghijk", 10, "abcdef…ijk"), ("abc", 1, "…")],
)
def test_shorten(text, limit, want):
    assert shorten(text, limit) == want and len(shorten(text, limit)) <= limit


def test_atomic_dir_failure_keeps_the_old_directory(tmp_path):
    from rlx_edge._io import atomic_dir

    old = tmp_path / "d"
    old.mkdir()
    (old / "a").write_text("old\n")
    with pytest.raises(KeyError), atomic_dir(old) as new:
        (new / "b").write_text("half\n")
        raise KeyError("failed halfway")
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in old.iterdir()] == ["a"]


@pytest.mark.parametrize("swap", ["exchange", "two renames"])
def test_atomic_dir_replaces_an_existing_directory(swap, tmp_path, monkeypatch):
    from rlx_edge import _io

    exchanged = []
    real = _io._exchange

    def exchange(a, b):
        exchanged.append(swap == "exchange" and real(a, b))
        return exchanged[-1]

    monkeypatch.setattr(_io, "_exchange", exchange)
    old = tmp_path / "d"
    old.mkdir()
    (old / "a").write_text("old\n")
    with _io.atomic_dir(old) as new:
        assert new.parent == tmp_path and new.name.startswith("d.tmp-")
        (new / "b").write_text("new\n")
    assert exchanged == [swap == "exchange"]  # Linux swaps in one step; the fallback was taken otherwise
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in old.iterdir()] == ["b"]


def test_output_inside_the_trace_directory(inputs, work):
    trace = work / "trace"
    argv = ["run", str(DIGITS), "--input", str(inputs / "x.npy"), "-o", str(trace / "y.npy"), "--trace", str(trace)]
    assert main(argv) == 0
    assert main(argv) == 0  # replacing the trace keeps the output written with it
    assert (trace / "y.npy").is_file() and np.load(trace / "y.npy").shape == (1, 10)
