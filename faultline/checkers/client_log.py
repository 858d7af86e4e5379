"""The client library's own account of a run (``client-log.jsonl``, docs/history.md),
lined up with an anomaly: what a producer process logged while a send of it was open.

Only the lines that can explain a re-send or a reordering are kept: the idempotence
state machine (``IDEMPSTATE``, ``DRAIN``: epoch bumps; ``GETPID``: producer ids),
request timeouts (``REQTMOUT``), the error callback (``ERROR``), anything at warning
or above, and any line naming an epoch, a sequence or a timed-out request.

Pure: the file's parsed lines in, lines out.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from typing import Any

Line = Mapping[str, Any]

_FACILITIES = frozenset({"IDEMPSTATE", "DRAIN", "GETPID", "REQTMOUT", "ERROR"})
_LEVELS = frozenset({"warning", "error", "critical"})
_WORDS = ("epoch", "sequence", "timed out")
#: How far before a send's invoke and after its completion a line is still lined up.
MARGIN_NS = 1_000_000_000
#: At most this many lines lined up with one anomaly (an epoch bump storm logs a few
#: lines per partition per bump).
MAX_LINES = 20


def relevant(line: Line) -> bool:
    """Whether ``line`` can help explain a re-send (see the module docstring); its fields
    may hold any JSON value, and are read as text."""
    if str(line.get("facility")) in _FACILITIES or str(line.get("level")) in _LEVELS:
        return True
    message = str(line.get("message", "")).lower()
    return any(w in message for w in _WORDS)


class ClientLines:
    """The relevant lines of a client log, by process, in time order.

    Lines without an integer ``time`` and ``process`` are skipped: the log is an aid
    to explanation, not part of the record the verdict rests on.
    """

    def __init__(self, lines: Iterable[Line]) -> None:
        by: dict[int, list[Line]] = {}
        for line in lines:
            t, p = line.get("time"), line.get("process")
            if type(t) is int and type(p) is int and relevant(line):
                by.setdefault(p, []).append(line)
        self._lines = {p: sorted(ls, key=lambda x: x["time"]) for p, ls in by.items()}
        self._times = {p: [x["time"] for x in ls] for p, ls in self._lines.items()}

    def around(self, process: int, start: int, end: int) -> list[Line]:
        """``process``'s first :data:`MAX_LINES` lines from ``MARGIN_NS`` before ``start``
        to ``MARGIN_NS`` after ``end``."""
        times = self._times.get(process)
        if not times:
            return []
        lo = bisect_left(times, start - MARGIN_NS)
        hi = bisect_right(times, end + MARGIN_NS)
        return self._lines[process][lo:min(hi, lo + MAX_LINES)]
