"""The op model (docs/history.md): an :class:`Op` is data. ``invoke`` starts an
operation, ``ok`` says it happened, ``fail`` that it certainly did not, ``info`` that
nobody knows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"
#: A send's value is a signed 64-bit integer from VALUE_MIN to VALUE_MAX (docs/history.md):
#: the queue checker keeps the lowest 2**32 for the values read that no send can carry
#: (a foreign record's text or null), so that its int64 columns hold those too.
VALUE_MIN = -(1 << 63) + (1 << 32)
VALUE_MAX = (1 << 63) - 1
#: An op's ``time`` is at most the test's ``time_limit_s`` past the run's start plus this
#: (docs/history.md): what the run does besides its main phase (starting the cluster,
#: healing, waiting for quiescence, the drain) takes minutes.
TIME_MARGIN_NS = 24 * 3600 * 10**9
Process = int | Literal["nemesis"]
#: An op not yet journaled: ``(process, type, f, value, error)``.
PendingOp = tuple[Process, OpType, str, Any, str | None]
#: An op that happened before it is journaled, with the ``time.monotonic_ns()`` of then.
TimedOp = tuple[int, PendingOp]


def latest_time(time_limit_s: float) -> int:
    """The latest ``time`` an op of a test of ``time_limit_s`` may have (:data:`TIME_MARGIN_NS`)."""
    return int(time_limit_s * 1e9) + TIME_MARGIN_NS


@dataclass(frozen=True, slots=True)
class Op:
    """One line of a history; ``time`` is ns since the run started (monotonic)."""

    index: int
    time: int
    process: Process
    type: OpType
    f: str
    value: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``error`` is left out when None."""
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Op:
        """Build an Op from a parsed line; raises KeyError/TypeError on a bad shape."""
        return Op(d["index"], d["time"], d["process"], d["type"], d["f"], d.get("value"),
                  d.get("error"))
