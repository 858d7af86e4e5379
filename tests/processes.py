"""Whether a process is still there, for tests of what outlives what."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """``pid`` runs; a zombie counts as gone, as it only waits to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
