"""Errors a user can act on.

Everything the CLI reports as a user error (exit status 2, one line on stderr,
no traceback) derives from :class:`RlxError`. Programming errors inside
rlx-edge stay ordinary exceptions so that they keep their tracebacks.
"""

from __future__ import annotations


class RlxError(Exception):
    """Base of every error caused by the user's input or environment."""


class IRError(RlxError):
    """A graph breaks a rule of the IR (bad types, dangling reference, cycle)."""


class OpError(IRError):
    """An op was called with inputs or attributes it does not accept."""


class ModelFileError(RlxError):
    """A model file is missing, corrupt, truncated or of an unknown version."""


class UnsupportedOpError(RlxError):
    """A model uses ops that rlx-edge (or a target) cannot handle."""


class ToolchainError(RlxError):
    """An external tool (compiler, simulator, emulator) is missing or failed."""


class PluginError(RlxError):
    """A package's ``rlx_edge.ops`` entry point (custom ops, docs/custom_ops.md) could not be loaded."""


ELLIPSIS = "…"


def shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to at most ``limit`` characters, its middle replaced by an ellipsis.

    Keeps both ends: a tensor name's prefix says where it is in the model and
    its suffix which output it is; a message's end usually says what to do.
    """
    text = str(text)
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return ELLIPSIS[:limit]
    keep = limit - len(ELLIPSIS)
    tail = keep // 3
    return text[: keep - tail] + ELLIPSIS + text[len(text) - tail :] if tail else text[:keep] + ELLIPSIS


def one_line(text: str, limit: int = 300, word_limit: int = 160) -> str:
    """A message as one bounded line: whitespace collapsed, each over-long word
    (a raw tensor name, a dumped value) shortened, then the whole line.

    The word limit keeps one runaway name from crowding out the rest of the
    message; it is long enough for a deep path."""
    words = (shorten(w, word_limit) for w in str(text).split())
    return shorten(" ".join(words), limit)
