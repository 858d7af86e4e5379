"""A checker's verdict: the :class:`Result` value and how verdicts compose.

``valid`` is tri-state, as in Jepsen: ``True`` (nothing forbidden seen and everything
decided), ``False`` (a forbidden anomaly was seen) or ``"unknown"`` (nothing forbidden
seen, but something could not be decided: a partition's drain is incomplete, the
history was cut short, or the checker itself failed). Verdicts compose with
:func:`merge_valid`: false beats unknown beats true, so an error can never turn into a
pass.

:meth:`Result.to_json` is exactly the ``results.json`` of docs/history.md (``valid``,
``anomaly_counts``, ``anomalies``, ``permitted``, ``violations``, ``unknown``,
``stats``) plus the extra fields documented in ``faultline/schemas/results.schema.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Valid = bool | Literal["unknown"]
UNKNOWN: Literal["unknown"] = "unknown"

#: Every anomaly type the checker knows, in docs/design.md's order. ``anomaly_counts``
#: always names all of them.
ANOMALIES: tuple[str, ...] = (
    "lost-write",
    "phantom-read",
    "inconsistent-offsets",
    "duplicate",
    "aborted-read",
    "unexpected-value",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
)

#: results.json keeps at most this many examples per anomaly type (docs/history.md).
MAX_ANOMALY_EXAMPLES = 1000


def displace_permitted(kept: list[dict[str, Any]]) -> bool:
    """Make room in a full list of examples for a forbidden one: drop the last example kept
    that is ``permitted`` (a violated type's examples must show its violations, not only
    what was permitted); False when none is."""
    at = next((i for i in range(len(kept) - 1, -1, -1) if kept[i]["permitted"]), None)
    if at is None:
        return False
    del kept[at]
    return True


def merge_valid(*verdicts: Valid) -> Valid:
    """Compose verdicts: any False gives False, else any "unknown" gives "unknown", else True."""
    if any(v is False for v in verdicts):
        return False
    if any(v is not True for v in verdicts):
        return UNKNOWN
    return True


@dataclass(frozen=True, slots=True)
class Result:
    """One checker's verdict on one history.

    ``anomalies`` holds at most :data:`MAX_ANOMALY_EXAMPLES` examples per type, while
    ``anomaly_counts`` counts them all. ``unknown`` entries are objects with at least
    ``kind`` and ``why``; ``affects_verdict`` says whether the entry is one of the
    reasons ``valid`` is ``"unknown"``. ``extra`` holds the fields results.json adds
    beyond docs/history.md (``permitted_reasons``, ``measures``, ``partitions``, ...).
    """

    valid: Valid
    anomaly_counts: Mapping[str, int] = field(
        default_factory=lambda: dict.fromkeys(ANOMALIES, 0))
    anomalies: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    permitted: Sequence[str] = ()
    violations: Sequence[str] = ()
    unknown: Sequence[Mapping[str, Any]] = ()
    stats: Mapping[str, Any] = field(
        default_factory=lambda: {"send": {"ok": 0, "fail": 0, "info": 0}})
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` object: docs/history.md's fields first, then the extras."""
        out: dict[str, Any] = {
            "valid": self.valid,
            "anomaly_counts": dict(self.anomaly_counts),
            "anomalies": {k: list(v) for k, v in self.anomalies.items()},
            "permitted": list(self.permitted),
            "violations": list(self.violations),
            "unknown": [dict(u) for u in self.unknown],
            "stats": dict(self.stats),
        }
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out


def unknown_result(kind: str, why: str, **extra: Any) -> Result:
    """A Result that decides nothing: ``valid`` "unknown" with one ``unknown`` entry.

    Used when the input cannot be read or a checker raised: never a pass.
    """
    return Result(valid=UNKNOWN, unknown=({"kind": kind, "why": why, "affects_verdict": True},),
                  extra=dict(extra))
