"""Array files users hand to rlx-edge: the one ``.npy`` / ``.npz`` loader.

Inputs of ``run`` and ``fpga --simulate``, calibration data, evaluation
datasets and HIL campaign data all come through :func:`load_arrays`. Array
files are untrusted input like model files: nothing is unpickled
(``allow_pickle=False``), and every array's declared size is checked against
the bytes the file holds before numpy allocates it. Errors are one line
naming the file, what is wrong and what to do.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rlx_edge.errors import RlxError

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
# Deflate cannot expand data by more than about 1032:1, so a member claiming
# more than that is lying about its size (or is a zip bomb).
_MAX_DEFLATE_RATIO = 1032
_HOW = "save arrays with numpy.save (.npy) or numpy.savez (.npz)"


class DataFileError(RlxError):
    """An array file that is missing, unreadable, corrupt or holds Python objects."""


def load_arrays(path: str | os.PathLike) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a ``.npy`` file, or the arrays of an ``.npz`` file by name.

    The format is read from the file's first bytes, not its name.
    """
    p = Path(path)
    if not p.exists():
        raise DataFileError(f"{p}: no such file; give a .npy or .npz file")
    if p.is_dir():
        raise DataFileError(f"{p}: is a folder, not a .npy or .npz file")
    try:
        with p.open("rb") as f:
            head = f.read(len(_NPY_MAGIC))
            if head.startswith(_NPY_MAGIC):
                f.seek(0)
                _check_npy(f, p.stat().st_size, str(p))
                f.seek(0)
                return np.load(f, allow_pickle=False)
        if head[:4] in _ZIP_MAGICS:
            return _load_npz(p)
    except DataFileError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataFileError(f"{p}: not a readable .npy/.npz file ({type(e).__name__}: {e}); {_HOW}") from None
    raise DataFileError(f"{p}: not a .npy or .npz file (it starts with {head[:4]!r}); {_HOW}")


def _load_npz(p: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(p) as z:
        infos = z.infolist()
        if not infos:
            raise DataFileError(f"{p}: the .npz file holds no arrays; {_HOW}")
        for info in infos:
            where = f"{p}: array {info.filename!r}"
            if not info.filename.endswith(".npy"):
                raise DataFileError(f"{where} is not a .npy member; {_HOW}")
            if info.compress_type == zipfile.ZIP_STORED:
                limit = info.compress_size
            else:
                limit = _MAX_DEFLATE_RATIO * info.compress_size + 1024
            if info.file_size > limit:
                raise DataFileError(f"{where} claims {info.file_size} bytes, more than its data can hold; corrupt file")
            with z.open(info) as member:
                _check_npy(member, info.file_size, where)
    with np.load(p, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _check_npy(f: BinaryIO, size: int, where: str) -> None:
    """Refuse an ``.npy`` stream whose header declares objects or more data than ``size`` bytes hold."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise DataFileError(f"{where}: .npy format version {version[0]}.{version[1]} is not supported; {_HOW}")
    if dtype.hasobject:
        raise DataFileError(f"{where}: holds Python objects, which are never unpickled; save numeric arrays")
    declared = math.prod(shape) * dtype.itemsize
    available = size - f.tell()
    if declared > available:
        raise DataFileError(
            f"{where}: the header declares {declared} bytes of data but only {available} follow; "
            "the file is truncated or corrupt"
        )
