"""From anomalies found to a :class:`~faultline.checkers.result.Result`, and the facts it
was judged by for the checkers after it.

:class:`Permissions` is what the guarantees permit on each partition of a run, in the
window of each anomaly, in the permissive reading and the strict one. :class:`Collected`
counts every anomaly, keeps the first ``MAX_ANOMALY_EXAMPLES`` examples per type,
forbidden ones before permitted ones (built lazily, so a run that lost a million writes
does not build a million stories), and asks its :class:`Permissions` of each.
:func:`build_result` turns it into results.json's fields and extras, :func:`queue_facts`
into the typed facts a later checker reads (:class:`QueueFacts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any, Protocol

from faultline.checkers import explain
from faultline.checkers.columns import Part
from faultline.checkers.faults_seen import (
    NemesisAction,
    Timeline,
    TopicPartition,
    Windows,
    faults_by_partition,
    nemesis_actions,
)
from faultline.checkers.guarantees import ISO_ACK, ISO_READS, GuaranteeConfig, culprit, forbidden, rules
from faultline.checkers.measures import Measures
from faultline.checkers.partition_faults import DATA_LOSS_FAULTS, PartitionFaults
from faultline.checkers.result import ANOMALIES, MAX_ANOMALY_EXAMPLES, UNKNOWN, Result, displace_permitted
from faultline.history import Op
from faultline.spec import TestSpec

Example = dict[str, Any]

#: Why an anomaly only the permissive readings of :mod:`.faults_seen` permit leaves the
#: verdict unknown (results.json's ``permitted-on-assumption``).
PERMITTED_ON_ASSUMPTION = (
    "permitted only by faults assumed, not witnessed (a fault on the partition's leader where "
    "neither the nemesis op's leaders snapshot nor the metadata log says who led, or only the "
    "snapshot against a metadata log that covers the fault, every replica out of step where "
    "there is no metadata log, what a node fault naming no node may have touched, or anything "
    "a fault that failed or never completed may have done), so whether it was permitted is unknown")


class Tally(Protocol):
    """What :func:`build_result` reads of the engine that fed the rows: every
    topic-partition's :class:`~faultline.checkers.columns.Part`, the poll and drain
    completions (ok, fail, info), and how many ops there were and how many the
    checker does not read."""

    @property
    def parts(self) -> Sequence[Part]: ...
    @property
    def polls(self) -> Sequence[int]: ...
    @property
    def drains(self) -> Sequence[int]: ...
    @property
    def ops(self) -> int: ...
    @property
    def other(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Ruling:
    """How the guarantees judge one anomaly instance: ``permitted`` by the faults of its
    window as the permissive reading has them (``faults``); ``assumed`` when the strict
    reading, which keeps only what a witness shows, would forbid it."""

    permitted: bool
    assumed: bool
    faults: PartitionFaults


class Permissions:
    """What the guarantees (:func:`~faultline.checkers.guarantees.rules`) permit on each
    partition of one run, by the faults each saw.

    Partitions are the engine's ids (``tp``), so a fault on one partition's leader excuses
    nothing on another's. An anomaly is judged by the faults of its own window (``at``:
    the time of the write or read it is about,
    :class:`~faultline.checkers.faults_seen.Windows`), so a fault that was over before
    the write excuses nothing; ``faults`` and ``rules``, each partition's over the whole
    run, only describe it.
    """

    def __init__(self, config: GuaranteeConfig, actions: Sequence[NemesisAction],
                 keys: Sequence[TopicPartition], timeline: Timeline | None) -> None:
        self.config = config
        by_part = faults_by_partition(actions, keys, timeline)
        self.faults: list[PartitionFaults] = [by_part[k] for k in keys]  # tp -> over the run
        self.rules: list[dict[str, str]] = [rules(config, f) for f in self.faults]  # tp -> key -> reason
        states = timeline or {}
        self._windows = [(Windows(actions, k, states.get(k), strict=False),
                          Windows(actions, k, states.get(k), strict=True)) for k in keys]
        # id(faults) -> the faults (kept, so that the id stays theirs) and their rules: a
        # window's faults are one object, judged once per anomaly in it, by identity
        # (hashing a dataclass per anomaly costs more than the rest of the look-up)
        self._rules: dict[int, tuple[PartitionFaults, dict[str, str]]] = {}
        self._rulings: dict[tuple[bool, bool, int], Ruling] = {}  # the few distinct rulings

    def rules_at(self, tp: int, at: int, strict: bool = False) -> dict[str, str]:
        """The rules of partition ``tp`` for an anomaly about a write or read at ``at``."""
        return self._rules_of(self._windows[tp][strict].at(at))

    def _rules_of(self, faults: PartitionFaults) -> dict[str, str]:
        found = self._rules.get(id(faults))
        if found is None:
            found = self._rules[id(faults)] = (faults, rules(self.config, faults))
        return found[1]

    def ruling(self, tp: int, at: int, keys: Sequence[str]) -> Ruling:
        """An instance on ``tp`` about a write or read at ``at`` is permitted when every rule
        of ``keys`` permits it in its window (an inconsistent-offsets instance passes
        :func:`iso_rows`)."""
        faults = self._windows[tp][False].at(at)
        allowed = all(k in self._rules_of(faults) for k in keys)
        assumed = allowed and not all(k in self.rules_at(tp, at, strict=True) for k in keys)
        key = (allowed, assumed, id(faults))  # the faults are kept in _rules
        found = self._rulings.get(key)
        if found is None:
            found = self._rulings[key] = Ruling(allowed, assumed, faults)
        return found

    def reason(self, name: str, tp: int, at: int) -> str | None:
        """Why ``name`` at ``at`` is permitted on partition ``tp``, or None if it is forbidden."""
        return self.rules_at(tp, at).get(name)

    def iso_reason(self, involves_ack: bool, reads_disagree: bool, tp: int, at: int) -> str | None:
        """Why an inconsistent-offsets instance is permitted on ``tp``, or None: every
        docs/design.md row that applies must permit it (:func:`iso_rows`)."""
        found = self.rules_at(tp, at)
        reasons = [found.get(k) for k in iso_rows(involves_ack, reads_disagree)]
        if None in reasons:
            return None
        return "; ".join(dict.fromkeys(r for r in reasons if r is not None))

    def excuse(self, tp: int, at: int) -> dict[str, Any]:
        """What in the window of ``at`` on ``tp`` could have lost what was written or read
        then (:meth:`~faultline.checkers.faults_seen.Windows.excuse`)."""
        return self._windows[tp][False].excuse(at)


class Collected:
    """Anomaly counts and examples of one run, per partition, and what its
    :class:`Permissions` (made by :meth:`set_faults`) ruled of each."""

    def __init__(self, spec: TestSpec, config: GuaranteeConfig, truncated: bool) -> None:
        self.spec = spec
        self.config = config
        self.truncated = truncated
        self.permissions = Permissions(config, (), (), None)  # until set_faults
        self.counts: dict[str, int] = dict.fromkeys(ANOMALIES, 0)
        self.examples: dict[str, list[Example]] = {}
        self.kept_permitted: dict[str, int] = {}  # anomaly -> its permitted examples kept
        self.part_assumed: list[set[str]] = []  # tp -> types permitted there only by assumption
        self.violation_faults: dict[tuple[int, str], PartitionFaults] = {}  # first violation's window
        self.part_counts: list[dict[str, int]] = []  # tp -> anomaly -> count
        self.part_violations: list[set[str]] = []  # tp -> types seen there, not permitted
        self.unverified: dict[int, dict[str, int]] = {}  # tp -> anomaly -> set aside (short drain)
        self.after_drain: dict[int, dict[str, int]] = {}  # tp -> anomaly -> set aside (ended late)
        self.faults: list[dict[str, Any]] = []
        self.measures: dict[str, Any] = {}
        self.below_log_start = 0
        self.drain_missed = 0  # lost writes, reads, acks at an offset every replica holds below the HW
        self.drain_gap = 0  # lost writes, reads, acks at an offset the drain skipped below its HW
        self.first_loss_ns: int | None = None  # the earliest ack of a lost write, example kept or not
        self.indeterminate = 0
        self.indeterminate_read = 0
        self.iso_ack_offset: list[int] = []  # slots: ack offset empty in the drain
        self.causes: dict[str, dict[str, int]] = {}  # anomaly -> provenance cause -> count
        self.violations_by: dict[str, set[str]] = {}  # culprit -> anomaly types it violated

    def set_faults(self, nemesis: Sequence[Op], measures: Measures, parts: Sequence[Part],
                   sent_to: set[int], timeline: Timeline | None = None) -> None:
        """Pair the nemesis ops, judge each partition by the faults it saw (with the
        metadata log's timeline when there is one) and finish the measures."""
        actions = nemesis_actions(nemesis)
        keys = [(p.topic, p.partition) for p in parts]
        self.permissions = Permissions(self.config, actions, keys, timeline)
        self.part_assumed = [set() for _ in keys]
        self.part_counts = [dict.fromkeys(ANOMALIES, 0) for _ in keys]
        self.part_violations = [set() for _ in keys]
        self.measures = measures.finish(keys, sent_to, actions)
        self.faults = self.measures["faults"]

    def add(self, name: str, tp: int, at: int, make: Callable[[], Example],
            rows: Sequence[str] | None = None, cause: str | None = None) -> None:
        """Count one anomaly on partition ``tp`` about a write or read at ``at``; build its
        example while fewer than MAX_ANOMALY_EXAMPLES are kept, or, for a forbidden
        instance, while a permitted example kept can make room (the last one kept goes).

        It is judged by :meth:`Permissions.ruling` with the rules of ``rows`` (default:
        its name's); when only the permissive reading permits it, the partition's verdict
        is unknown (:meth:`assumed_permitted`). ``cause``, for the anomalies the batches
        can attribute (:mod:`~faultline.checkers.provenance`), is counted, and a forbidden
        instance is a violation by its culprit (:data:`~faultline.checkers.guarantees.CULPRITS`).
        """
        ruling = self.permissions.ruling(tp, at, rows or (name,))
        allowed = ruling.permitted
        if ruling.assumed:
            self.part_assumed[tp].add(name)
        elif not allowed:
            self.violation_faults.setdefault((tp, name), ruling.faults)
        if cause is not None:
            counts = self.causes.setdefault(name, {})
            counts[cause] = counts.get(cause, 0) + 1
            if not allowed:
                self.violations_by.setdefault(culprit(cause)[0], set()).add(name)
        if not allowed:
            self.part_violations[tp].add(name)
        self.counts[name] += 1
        self.part_counts[tp][name] += 1
        kept = self.examples.setdefault(name, [])
        if len(kept) >= MAX_ANOMALY_EXAMPLES:  # the count spares a scan once none is left to displace
            if allowed or not self.kept_permitted.get(name):
                return
            displace_permitted(kept)
            self.kept_permitted[name] -= 1
        example = make()
        example["permitted"] = allowed
        if allowed:
            excuse = example["excused_by"] = self.permissions.excuse(tp, at)
            if isinstance(example.get("story"), list):
                example["story"].append({"time": excuse.get("time"), "text": excuse_text(excuse)})
        kept.append(example)
        self.kept_permitted[name] = self.kept_permitted.get(name, 0) + allowed

    def assumed_permitted(self, tp: int) -> list[str]:
        """The anomaly types seen on ``tp`` with an instance that only what the permissive
        readings of :mod:`.faults_seen` assume (faults no witness shows) permits."""
        return [n for n in ANOMALIES if n in self.part_assumed[tp]]

    def set_aside(self, name: str, tp: int, late: bool = False) -> None:
        """An instance on ``tp`` that a short drain cannot decide, or (``late``) whose op
        ended once the drain had begun: unknown, not counted."""
        counts = (self.after_drain if late else self.unverified).setdefault(tp, {})
        counts[name] = counts.get(name, 0) + 1

    @staticmethod
    def tell(story: explain.Story) -> Example:
        """The ``story`` and ``explanation`` fields of an example."""
        return {"story": story[0], "explanation": story[1]}

    def violations(self) -> list[str]:
        """Types seen that the guarantees forbid, in docs/design.md's order."""
        return [name for name in ANOMALIES if any(name in seen for seen in self.part_violations)]

    def run_reasons(self, names: Sequence[str], engine: Tally) -> tuple[dict[str, str], dict[str, str]]:
        """Run-wide ``permitted_reasons`` and ``forbidden_reasons``: per type, each
        distinct reason of the partitions that permit (forbid) it, naming its partitions
        when not all of them share it (one partition's reason is not said of another,
        whose faults differ). A forbidden type's reasons from partitions where it was
        seen come first."""
        allowed: dict[str, str] = {}
        denied: dict[str, str] = {}
        part_rules, part_faults = self.permissions.rules, self.permissions.faults
        every = range(len(part_rules))
        for name in names:
            yes = [tp for tp in every if name in part_rules[tp]]
            no = [tp for tp in every if tp not in yes]
            if yes:
                allowed[name] = _grouped([(tp, part_rules[tp][name]) for tp in yes], engine, every)
            seen = [tp for tp in every if name in self.part_violations[tp]]
            whys = [(tp, forbidden(self.config, self.violation_faults.get((tp, name), part_faults[tp]))
                     .get(name)) for tp in [*seen, *(tp for tp in no if tp not in seen)]]
            if any(why is not None for _, why in whys):
                denied[name] = _grouped([(tp, why) for tp, why in whys if why is not None], engine, every)
        return allowed, denied


def excuse_text(excuse: dict[str, Any]) -> str:
    """An example's ``excused_by`` (:meth:`~faultline.checkers.faults_seen.Windows.excuse`)
    in words."""
    if excuse["kind"] == "election":
        how = {"isr": "a clean election, from the ISR", "elr": "from the eligible leader replicas",
               "unclean": "an unclean election, from neither the ISR nor the ELR"}[excuse["how"]]
        epoch = f", epoch {excuse['epoch']}" if excuse["epoch"] is not None else ""
        return (f"the metadata log shows leadership move from {excuse['from']} to {excuse['to']}"
                f"{epoch} ({how}) after it: what only the old leader had may be gone")
    if excuse["kind"] == "fault":
        nodes = ",".join(map(str, excuse["nodes"])) or "unnamed nodes"
        seen = "" if excuse["witnessed"] else "; no metadata log covers it, so what it did is assumed"
        return f"excused by the {excuse['fault']} of {nodes} in its window{seen}"
    return "excused by the config alone: no fault or election is needed"


def iso_rows(involves_ack: bool, reads_disagree: bool) -> tuple[str, ...]:
    """The docs/design.md rows an inconsistent-offsets instance is judged by: the ack's
    when an ack's association is wrong (``involves_ack``), the reads' when reads disagree
    among themselves (``reads_disagree``; also when neither is said)."""
    keys = tuple(k for k, on in ((ISO_ACK, involves_ack), (ISO_READS, reads_disagree)) if on)
    return keys or (ISO_READS,)


def _grouped(reasons: Sequence[tuple[int, str]], engine: Tally, every: range) -> str:
    """Partitions' reasons as one text: each distinct reason once, followed by the
    partitions it is theirs on unless it is every partition's."""
    by: dict[str, list[int]] = {}
    for tp, why in reasons:
        by.setdefault(why, []).append(tp)
    return "; ".join(why + _on(engine, tps, every) for why, tps in by.items())


def _on(engine: Tally, tps: Sequence[int], every: range) -> str:
    """`` (on fl-queue/0, fl-queue/2)`` unless ``tps`` is every partition."""
    if len(tps) == len(every):
        return ""
    return " (on " + ", ".join(f"{engine.parts[tp].topic}/{engine.parts[tp].partition}"
                               for tp in tps) + ")"


def build_result(c: Collected, engine: Tally) -> Result:
    """results.json's fields (docs/history.md) and extras, from what the engine found."""
    unknown: list[dict[str, Any]] = []
    if c.truncated:
        unknown.append({"kind": "truncated-history", "affects_verdict": True,
                        "why": "the history's last line was cut mid-write (the run died): "
                               "what happened after it is not known"})
    partitions = []
    part_rules = c.permissions.rules
    for tp, p in enumerate(engine.parts):
        if not p.complete:
            unknown.append({"kind": "incomplete-drain", "topic": p.topic,
                            "partition": p.partition, "affects_verdict": True,
                            "why": "no ok drain with last: true, so lost writes, phantom "
                                   "reads and skips cannot be decided for this partition"})
        elif p.short is not None:
            set_aside = c.unverified.get(tp, {})
            what = ", ".join(f"{n} ×{k}" for n, k in set_aside.items()) or "no anomaly"
            unknown.append({"kind": "short-drain", "topic": p.topic, "partition": p.partition,
                            "count": sum(set_aside.values()), "affects_verdict": True,
                            "why": f"the drain read to offset {p.hw}, but every replica's log "
                                   f"holds the same batches up to {p.short} (replicas.jsonl): "
                                   f"the drain stopped short, so {what} at or past {p.hw} "
                                   "cannot be decided (set aside, not counted)"})
        late = c.after_drain.get(tp)
        if p.complete and late:
            unknown.append({"kind": "after-drain", "topic": p.topic, "partition": p.partition,
                            "count": sum(late.values()), "affects_verdict": True,
                            "why": f"{', '.join(f'{n} ×{k}' for n, k in late.items())} by acks or "
                                   f"polls that ended once the drain had begun (at {p.drain_start} "
                                   "ns), past the HW it read to: whether what they acknowledged "
                                   "or read is there, the drain cannot say (set aside, not counted)"})
        assumed = c.assumed_permitted(tp)
        if assumed:
            unknown.append({
                "kind": "permitted-on-assumption", "topic": p.topic, "partition": p.partition,
                "anomalies": assumed, "affects_verdict": True,
                "why": f"{', '.join(assumed)} seen here: {PERMITTED_ON_ASSUMPTION}"})
        partitions.append({
            "topic": p.topic, "partition": p.partition, "complete": p.complete,
            "drained": p.drained, "high_watermark": p.hw, "log_start_offset": p.lso,
            "replicas_agree_to": p.agreed, "polled": p.polled,
            "sends": {"ok": p.sends[1], "fail": p.sends[2], "info": p.sends[3],
                      "open": p.sends[0]},
            "faults": c.permissions.faults[tp].tokens(),
            "anomaly_counts": {k: v for k, v in c.part_counts[tp].items() if v},
            "violations": [n for n in ANOMALIES if n in c.part_violations[tp]],
            "permitted_reasons": {n: part_rules[tp][n] for n in ANOMALIES
                                  if n in part_rules[tp]}})
    if c.indeterminate:
        unknown.append({"kind": "indeterminate-sends", "count": c.indeterminate,
                        "affects_verdict": False,
                        "why": "sends that ended info (or never completed) and were never "
                               "read: whether they were written is unknown, so they are "
                               "neither lost nor failed"})
    if c.below_log_start:
        unknown.append({"kind": "below-log-start", "count": c.below_log_start,
                        "affects_verdict": True,
                        "why": "acknowledged values and records read at offsets below the "
                               "drain's log start, not in the drain: the test sets no retention "
                               "and deletes no records, so they went missing, but the drain "
                               "cannot say whether they were lost or deleted (a retention a "
                               "broker default or broker_config set, DeleteRecords)"})
    if c.drain_gap:
        unknown.append({"kind": "drain-missed", "count": c.drain_gap, "affects_verdict": True,
                        "why": "acknowledged values the drain did not read, records a consumer "
                               "read, and acks whose value the drain read elsewhere, at offsets "
                               "the complete drain read nothing at between its log start and "
                               "its HW (or, for an ack without an offset, with such an offset "
                               "anywhere): offsets there are dense, so the drain skipped a "
                               "record it should have read; not counted as lost writes, phantom "
                               "reads or inconsistent offsets"})
    if c.drain_missed:
        unknown.append({"kind": "drain-missed-held", "count": c.drain_missed,
                        "affects_verdict": True,
                        "why": "acknowledged values the drain did not read, records a consumer "
                               "read, and acks whose value the drain read elsewhere, at offsets it "
                               "read nothing at below its HW where every replica's log holds the "
                               "same batch (replicas.jsonl): the history says lost, the brokers say "
                               "held; not counted as lost writes, phantom reads or inconsistent "
                               "offsets"})
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
    permitted = [name for name in ANOMALIES if any(name in r for r in part_rules)]
    permitted_reasons, forbidden_reasons = c.run_reasons(ANOMALIES, engine)
    return Result(
        valid=valid,  # type: ignore[arg-type]
        anomaly_counts=c.counts,
        anomalies={k: v for k, v in c.examples.items() if v},
        permitted=permitted,
        violations=violations,
        unknown=unknown,
        stats=stats,
        extra={
            "permitted_reasons": permitted_reasons,
            "forbidden_reasons": forbidden_reasons,
            "permitted_rules": dict(sorted({k: v for r in reversed(part_rules)
                                            for k, v in r.items()}.items())),
            "causes": {name: dict(sorted(c.causes[name].items())) for name in ANOMALIES
                       if name in c.causes},
            "violations_by": {who: [n for n in ANOMALIES if n in names]
                              for who, names in sorted(c.violations_by.items())},
            "faults_seen": reduce(or_, c.permissions.faults, PartitionFaults()).tokens(),
            "first_loss_ns": c.first_loss_ns,
            "config": dataclasses.asdict(c.config),
            "measures": c.measures,
            "partitions": partitions,
            "checker": {"name": "queue", "version": 1},
        })


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    """What the queue checker judged one partition by: the faults it saw over the run, and
    the HW its complete drain read to (None without one)."""

    faults: PartitionFaults
    high_watermark: int | None


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """What the queue checker judged a run by, typed, for the checkers after it: the
    guarantees' config, each topic-partition's :class:`PartitionFacts`, and per node the
    start of the first fault window that destroyed its data (wipe, lose-unflushed)."""

    config: GuaranteeConfig
    partitions: Mapping[TopicPartition, PartitionFacts]
    data_loss_since: Mapping[int, int]


def queue_facts(c: Collected, engine: Tally) -> QueueFacts:
    """The :class:`QueueFacts` of what :func:`build_result` made a Result of."""
    lost: dict[int, int] = {}
    for w in c.faults:
        if w["kind"] in DATA_LOSS_FAULTS and isinstance(w["start"], int):
            for n in w["nodes"]:
                if isinstance(n, int):
                    lost[n] = min(lost.get(n, w["start"]), w["start"])
    return QueueFacts(c.config, {(p.topic, p.partition): PartitionFacts(c.permissions.faults[tp], p.hw)
                                 for tp, p in enumerate(engine.parts)}, lost)
