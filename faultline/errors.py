"""Every error kafka-faultline raises on purpose.

::

    FaultlineError               base; its message is one line meant for a person
    ├── SpecError                a test spec (CLI options, YAML) that cannot run
    ├── HistoryError             a history or run directory that cannot be read
    ├── SetupError               a missing prerequisite (jar, binary, root, iptables)
    ├── ClusterError             the cluster did not come up, or broke under us
    └── NemesisError             a fault could not be applied or healed

The CLI prints ``str(error)`` on one line and exits non-zero; anything that is not
a ``FaultlineError`` is a bug and keeps its traceback.
"""

from __future__ import annotations


class FaultlineError(Exception):
    """Base of every deliberate error; ``str()`` is a single line for a person."""


class SpecError(FaultlineError):
    """A test spec is invalid: the message names the option and how to fix it."""


class HistoryError(FaultlineError):
    """A history file is unreadable or breaks the format of docs/history.md.

    ``path`` and ``line`` (1-based, or None when the whole file is at fault) say where.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class SetupError(FaultlineError):
    """A prerequisite is missing; the message says which command fixes it."""


class ClusterError(FaultlineError):
    """The cluster failed to start, to become healthy, or to stop."""


class NemesisError(FaultlineError):
    """A fault could not be applied or healed."""
