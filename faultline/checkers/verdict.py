"""From anomalies found to a :class:`~faultline.checkers.result.Result`.

:class:`Collected` counts every anomaly, keeps the first ``MAX_EXAMPLES`` examples per
type (built lazily, so a run that lost a million writes does not build a million
stories), and knows what the guarantees permit for the run's config and faults.
:func:`build_result` turns it into results.json's fields and extras.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from faultline.checkers import explain
from faultline.checkers.guarantees import (
    ISO_ACK,
    ISO_READS,
    GuaranteeConfig,
    IsrTimeline,
    faults_of_actions,
    forbidden,
    nemesis_actions,
    rules,
)
from faultline.checkers.measures import Measures
from faultline.checkers.result import ANOMALIES, MAX_EXAMPLES, UNKNOWN, Result
from faultline.history import Op
from faultline.spec import TestSpec

if TYPE_CHECKING:
    from faultline.checkers.queue import Engine, Part

Example = dict[str, Any]


class Collected:
    """Anomaly counts, examples and the permission rules of one run."""

    def __init__(self, spec: TestSpec, config: GuaranteeConfig, truncated: bool) -> None:
        self.spec = spec
        self.config = config
        self.truncated = truncated
        self.counts: dict[str, int] = dict.fromkeys(ANOMALIES, 0)
        self.examples: dict[str, list[Example]] = {}
        self.forbidden_seen: set[str] = set()  # types with an instance not permitted
        self.fault_kinds: frozenset[str] = frozenset()
        self.rules: dict[str, str] = {}
        self.faults: list[dict[str, Any]] = []
        self.measures: dict[str, Any] = {}
        self.below_log_start = 0
        self.indeterminate = 0
        self.indeterminate_read = 0
        self.iso_ack_offset: list[int] = []  # slots: ack offset empty in the drain

    def set_faults(self, nemesis: Sequence[Op], measures: Measures, parts: Sequence[Part],
                   sent_to: set[int], isr: IsrTimeline | None = None) -> None:
        """Pair the nemesis ops, derive the permission rules (with the ISR timeline when
        there is one) and finish the measures."""
        actions = nemesis_actions(nemesis)
        self.fault_kinds = faults_of_actions(actions, isr)
        self.rules = rules(self.config, self.fault_kinds)
        self.measures = measures.finish([(p.topic, p.partition) for p in parts], sent_to,
                                        actions)
        self.faults = self.measures["faults"]

    def reason(self, name: str) -> str | None:
        """Why ``name`` is permitted, or None if it is forbidden."""
        return self.rules.get(name)

    def iso_reason(self, involves_ack: bool) -> str | None:
        """Why an inconsistent-offsets instance of this kind is permitted, or None."""
        return self.rules.get(ISO_ACK if involves_ack else ISO_READS)

    def add(self, name: str, make: Callable[[], Example], allowed: bool | None = None) -> None:
        """Count one anomaly; build its example while fewer than MAX_EXAMPLES are kept.

        ``allowed`` says whether this instance is permitted (default: whether ``name``
        is); an inconsistent-offsets instance passes its own DESIGN.md row's answer
        (:meth:`iso_reason`).
        """
        if allowed is None:
            allowed = name in self.rules
        if not allowed:
            self.forbidden_seen.add(name)
        self.counts[name] += 1
        kept = self.examples.setdefault(name, [])
        if len(kept) < MAX_EXAMPLES:
            example = make()
            example["permitted"] = allowed
            kept.append(example)

    @staticmethod
    def tell(story: explain.Story) -> Example:
        """The ``story`` and ``explanation`` fields of an example."""
        return {"story": story[0], "explanation": story[1]}

    def violations(self) -> list[str]:
        """Types seen that the guarantees forbid, in DESIGN.md's order."""
        return [name for name in ANOMALIES if name in self.forbidden_seen]


def build_result(c: Collected, engine: Engine) -> Result:
    """results.json's fields (HISTORY.md) and extras, from what the engine found."""
    unknown: list[dict[str, Any]] = []
    if c.truncated:
        unknown.append({"kind": "truncated-history", "affects_verdict": True,
                        "why": "the history's last line was cut mid-write (the run died): "
                               "what happened after it is not known"})
    partitions = []
    for p in engine.parts:
        if not p.complete:
            unknown.append({"kind": "incomplete-drain", "topic": p.topic,
                            "partition": p.partition, "affects_verdict": True,
                            "why": "no ok drain with last: true, so lost writes, phantom "
                                   "reads and skips cannot be decided for this partition"})
        partitions.append({
            "topic": p.topic, "partition": p.partition, "complete": p.complete,
            "drained": p.drained, "high_watermark": p.hw, "log_start_offset": p.lso,
            "polled": p.polled,
            "sends": {"ok": p.sends[1], "fail": p.sends[2], "info": p.sends[3],
                      "open": p.sends[0]}})
    if c.indeterminate:
        unknown.append({"kind": "indeterminate-sends", "count": c.indeterminate,
                        "affects_verdict": False,
                        "why": "sends that ended info (or never completed) and were never "
                               "read: whether they were written is unknown, so they are "
                               "neither lost nor failed"})
    if c.below_log_start:
        unknown.append({"kind": "below-log-start", "count": c.below_log_start,
                        "affects_verdict": False,
                        "why": "acknowledged values at offsets below the drain's log start "
                               "(deleted by retention): whether they were lost is unknown"})
    violations = c.violations()
    if violations:
        valid: bool | str = False
    elif any(u["affects_verdict"] for u in unknown):
        valid = UNKNOWN
    else:
        valid = True
    send = [0, 0, 0, 0]
    for p in engine.parts:
        send = [a + b for a, b in zip(send, p.sends, strict=True)]
    stats = {
        "send": {"ok": send[1], "fail": send[2], "info": send[3]},
        "send_open": send[0],
        "poll": dict(zip(("ok", "fail", "info"), engine.polls, strict=True)),
        "drain": dict(zip(("ok", "fail", "info"), engine.drains, strict=True)),
        "records_polled": sum(p.polled for p in engine.parts),
        "records_drained": sum(p.drained for p in engine.parts),
        "indeterminate_read": c.indeterminate_read,
        "indeterminate_unread": c.indeterminate,
        "ops": engine.ops,
        "other_ops": engine.other,
    }
    permitted = [name for name in ANOMALIES if name in c.rules]
    return Result(
        valid=valid,  # type: ignore[arg-type]
        anomaly_counts=c.counts,
        anomalies={k: v for k, v in c.examples.items() if v},
        permitted=permitted,
        violations=violations,
        unknown=unknown,
        stats=stats,
        extra={
            "permitted_reasons": {name: c.rules[name] for name in permitted},
            "forbidden_reasons": forbidden(c.config, c.fault_kinds),
            "permitted_rules": dict(sorted(c.rules.items())),
            "faults_seen": sorted(c.fault_kinds),
            "config": dataclasses.asdict(c.config),
            "measures": c.measures,
            "partitions": partitions,
            "checker": {"name": "queue", "version": 1},
        })
