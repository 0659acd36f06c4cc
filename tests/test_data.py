"""The one .npy / .npz loader (rlx_edge.data): array files are untrusted input, like model files."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from rlx_edge.cli import main
from rlx_edge.data import DataFileError, load_arrays


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_reads_npy_and_npz_by_content_not_name(tmp_path):
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    np.save(tmp_path / "a.npy", a)
    (tmp_path / "a.npy").rename(tmp_path / "a.bin")
    got = load_arrays(tmp_path / "a.bin")
    assert isinstance(got, np.ndarray) and got.dtype == np.int8 and np.array_equal(got, a)
    np.savez_compressed(tmp_path / "d.npz", x=np.zeros((300, 300)), y=np.arange(3))
    got = load_arrays(str(tmp_path / "d.npz"))
    assert isinstance(got, dict) and sorted(got) == ["x", "y"] and got["x"].shape == (300, 300)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.npy", None, r"missing\.npy: no such file; give a \.npy or \.npz file"),
        ("text.npy", b"hello, world", r"text\.npy: not a \.npy or \.npz file .*numpy\.save"),
        ("truncated.npy", _npy_header((4,)) + b"\0" * 8, r"declares 32 bytes of data but only 8 follow; .*truncated"),
        # a header claiming 8 TB is refused before anything is allocated
        ("huge.npy", _npy_header((10**12,)) + b"\0" * 8, r"declares 8000000000000 bytes"),
        ("objects.npy", _npy_header((2,), "|O") + b"\0" * 16, r"holds Python objects, which are never unpickled"),
        ("bad.npz", b"PK\x03\x04 not really a zip", r"bad\.npz: not a readable \.npy/\.npz file \(BadZipFile"),
    ],
)
def test_bad_files_are_one_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataFileError, match=message):
        load_arrays(path)


def test_npz_members_are_checked_before_loading(tmp_path):
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as z:
        z.writestr("x.npy", _npy_header((10**12,)) + b"\0" * 8)
    with pytest.raises(DataFileError, match=r"bomb\.npz: array 'x\.npy': the header declares 8000000000000 bytes"):
        load_arrays(tmp_path / "bomb.npz")
    with zipfile.ZipFile(tmp_path / "liar.npz", "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", _npy_header((4,)) + b"\0" * 32)
    with zipfile.ZipFile(tmp_path / "liar.npz") as z:
        info = z.infolist()[0]
    raw = (tmp_path / "liar.npz").read_bytes()
    # claim a larger uncompressed size than deflate can produce from the stored bytes
    claimed = (2_000_000 * info.compress_size).to_bytes(4, "little")
    raw = raw[:22] + claimed + raw[26:]
    central = raw.rfind(b"PK\x01\x02")
    raw = raw[: central + 24] + claimed + raw[central + 28 :]
    (tmp_path / "liar.npz").write_bytes(raw)
    with pytest.raises(DataFileError, match=r"claims \d+ bytes, more than its data can hold"):
        load_arrays(tmp_path / "liar.npz")
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as z:
        z.writestr("notes.txt", "hi")
    with pytest.raises(DataFileError, match=r"array 'notes\.txt' is not a \.npy member"):
        load_arrays(tmp_path / "other.npz")
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(DataFileError, match=r"empty\.npz: the \.npz file holds no arrays"):
        load_arrays(tmp_path / "empty.npz")


def test_a_folder_is_not_an_array_file(tmp_path):
    with pytest.raises(DataFileError, match="is a folder"):
        load_arrays(tmp_path)


@pytest.mark.parametrize("command", ["run", "calibrate"])
def test_commands_report_loader_errors_in_one_line(tmp_path, capsys, command):
    from pathlib import Path

    model = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"
    (tmp_path / "x.npy").write_bytes(_npy_header((2,), "|O") + b"\0" * 16)
    argv = {
        "run": ["run", str(model), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")],
        "calibrate": ["calibrate", str(model), "--data", str(tmp_path / "x.npy"), "-o", str(tmp_path / "r.json")],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.npy: holds Python objects" in err


def test_eval_and_hil_datasets_come_through_the_same_loader(tmp_path):
    from rlx_edge.hil.campaign import load_data
    from rlx_edge.ir.graph import Graph
    from rlx_edge.targets.jax.evaluate import load_dataset

    (tmp_path / "t.npy").write_bytes(_npy_header((4,)) + b"\0" * 8)
    with pytest.raises(DataFileError, match="truncated"):
        load_data(tmp_path / "t.npy")
    g = Graph("g")
    g.output(g.relu(g.input("x", (1, 4)), name="r"))
    with pytest.raises(DataFileError, match="truncated"):
        load_dataset(g, tmp_path / "t.npy")
    np.save(tmp_path / "ok.npy", np.zeros((3, 1, 4), np.float32))
    arrays, labels = load_dataset(g, tmp_path / "ok.npy")  # a .npy holds the one input's samples
    assert arrays[0].shape == (3, 1, 4) and labels is None
