"""Output paths: checked before work starts, written under a temporary name and renamed.

- :func:`check_output_file` / :func:`check_output_dir`: one clear error before
  any work when an output cannot be written;
- :func:`atomic_write_bytes` / :func:`atomic_write_text`: a file appears whole or not at all;
- :func:`atomic_dir`: the same for a whole directory (a C project, Verilog, a trace).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from rlx_edge.errors import RlxError, shorten


class OutputPathError(RlxError):
    """An output path that cannot be written: checked before any work starts."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that a failure never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


# -- checking an output path before any work starts --------------------------------
PATH_LIMIT = 160  # characters of a path in a message: deep folders fit, a runaway name does not


def _named(what: str, path: str | os.PathLike) -> str:
    return f"{what} {shorten(str(path), PATH_LIMIT)}" if what else shorten(str(path), PATH_LIMIT)


def _nearest_existing(path: Path) -> Path:
    p = path
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _check_can_create_in(path: Path, what: str) -> None:
    """The folder that will hold ``path`` exists (or can be made) and takes new files.

    Tried for real, with a probe file: as root, ``os.access`` says yes to
    /proc and /sys, where nothing can be created.
    """
    parent = path.parent
    anchor = _nearest_existing(parent)
    if not anchor.is_dir():
        raise OutputPathError(f"{_named(what, path)}: {shorten(str(anchor), PATH_LIMIT)} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".rlx-probe-", dir=anchor)
    except OSError as e:
        # ENOENT from an existing folder: a virtual file system (/proc)
        why = "" if e.errno == errno.ENOENT else f" ({e.strerror or e})"
        raise OutputPathError(
            f"{_named(what, path)}: cannot create files in {shorten(str(anchor), PATH_LIMIT)}{why}"
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike, what: str = "output") -> Path:
    """Raises :class:`OutputPathError` unless ``path`` can be written as a file
    (with :func:`atomic_write_bytes`): it is not a directory or a device, and
    its folder exists (or can be created) and takes new files."""
    p = Path(path)
    if not str(path):
        raise OutputPathError(f"{what or 'output'}: empty path")
    if p.is_dir():
        raise OutputPathError(f"{_named(what, p)} is a directory; name a file")
    if os.path.lexists(p) and not p.is_file():
        # Renaming onto it would replace a device or socket with a plain file.
        raise OutputPathError(f"{_named(what, p)} exists and is not a regular file")
    _check_can_create_in(p, what)
    return p


def check_output_dir(
    path: str | os.PathLike, what: str = "output directory", replaces: Callable[[Path], bool] | None = None
) -> Path:
    """Raises :class:`OutputPathError` unless ``path`` can be written as a directory.

    With ``replaces`` (the command writes the directory whole with
    :func:`atomic_dir`, dropping what was there), an existing non-empty
    directory is accepted only where ``replaces(path)`` recognizes an earlier
    output of the same command, and never the working directory or one above
    it: a typo must not delete a user's files. Without it, the command writes
    into an existing directory.
    """
    p = Path(path)
    if not str(path):
        raise OutputPathError(f"{what or 'output'}: empty path")
    if os.path.lexists(p) and not p.is_dir():
        raise OutputPathError(f"{_named(what, p)} exists and is not a directory")
    if replaces is not None and p.is_dir():
        here = Path.cwd().resolve()
        if p.resolve() in (here, *here.parents):
            raise OutputPathError(f"{_named(what, p)} is the working directory or above it; name a new one")
        if any(p.iterdir()) and not replaces(p):
            raise OutputPathError(
                f"{_named(what, p)} exists and holds other files (it would be replaced); "
                "remove it or name a new directory"
            )
    _check_can_create_in(p, what)
    return p


# -- writing a directory whole -------------------------------------------------------
_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two paths in one step (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name beside ``path``, then put it at ``path`` in one rename.

    Yields the temporary directory (``NAME.tmp-XXXXXXXX``). On success it
    replaces ``path``, an existing directory included (swapped in one step
    where the system can, else renamed away, the new one renamed in, the
    old deleted); on an exception it is removed and ``path`` stays as it
    was. Killed in between, only ``NAME.tmp-*`` leftovers remain: never a
    partial directory at ``path``.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
    try:
        # mkdtemp makes 0700; give the directory the mode a plain mkdir would have
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        yield tmp
        if not os.path.lexists(final):
            os.rename(tmp, final)
        elif final.is_dir() and not final.is_symlink() and _exchange(tmp, final):
            shutil.rmtree(tmp)  # the old directory, now under the temporary name
        else:
            old = tmp.with_name(tmp.name + ".old")
            os.rename(final, old)
            os.rename(tmp, final)
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
