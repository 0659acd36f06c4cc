"""Finding and running the external tools of the Cortex-M firmware build and QEMU runner."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from rlx_edge.errors import ToolchainError

INSTALL_HINTS = {
    "arm-none-eabi-": "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi",
    "qemu-system-arm": "apt-get install qemu-system-arm",
    "gcc": "apt-get install gcc",
}


def find_tool(name: str) -> str:
    """The path of tool ``name`` on PATH, or a ToolchainError saying how to install it."""
    path = shutil.which(name)
    if path is None:
        hint = next((h for prefix, h in INSTALL_HINTS.items() if name.startswith(prefix)), None)
        extra = f"; install with: {hint}" if hint else ""
        raise ToolchainError(f"{name} not found on PATH{extra}")
    return path


def run_tool(argv: Sequence[str], what: str, timeout: float = 300.0) -> str:
    """Runs a tool to completion and returns its stdout; a failure is a ToolchainError with its stderr."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise ToolchainError(f"{what} did not finish in {timeout:g} s: {' '.join(argv[:3])} ...") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-30:]
        raise ToolchainError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return proc.stdout
