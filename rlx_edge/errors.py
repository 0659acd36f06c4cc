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
