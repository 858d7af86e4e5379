"""What each consumer-group anomaly is, in plain Python over one run's group ops.

The group workload's ops (docs/history.md: ``poll``, ``commit``, ``assign``, ``revoke``,
``lost``) and the drain, read from a history into a :class:`Group` (:func:`group`). One
function per anomaly says what is an instance of it, per partition of the run's one
group; whether the run's config and faults permit it is
:func:`faultline.checkers.guarantees.group_permitted`'s question (and
:data:`~faultline.checkers.guarantees.OVERLAP_AFTER_LOST`'s, per instance).
:func:`judge` makes the ``group`` checker's Result (results.json's ``group``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from faultline.checkers.guarantees import OVERLAP_AFTER_LOST, GuaranteeConfig, group_permitted
from faultline.checkers.partition_faults import PartitionFaults
from faultline.checkers.result import Result

#: A record's value as the history holds it.
Value = int | str | None

#: The anomalies, in the order results.json's ``group`` lists them.
GROUP_ANOMALIES = ("commit-backwards", "commit-beyond-polled", "overlapping-owners",
                   "lost-to-group", "unassigned-member")
#: How long after the last fault a member must have had to get an assignment, in ns:
#: past a classic session timeout (6 s, :func:`faultline.workloads.group.group_config`) and
#: the rebalance that follows; KIP-848 assigns as soon as a member heartbeats.
QUIET_NS = 10 * 10**9
#: Examples kept per anomaly.
MAX_GROUP_EXAMPLES = 100


@dataclass(frozen=True)
class Commit:
    """One partition's offset in a commit op by ``process``: its invoke (``index``, time
    ``invoked``), when and how it ended (``outcome`` ok, fail or info)."""

    process: int
    index: int
    invoked: int
    ended: int
    outcome: str
    partition: int
    offset: int
    leader_epoch: int | None


@dataclass(frozen=True)
class Ownership:
    """A partition in ``process``'s assignment from ``began`` (its ``assign``) to ``ended``,
    which says ``how``: ``revoke``, ``lost``, or ``end`` (the process's last op; a retired
    process's closing callbacks are not journaled)."""

    process: int
    partition: int
    began: int
    ended: int
    how: str
    member: str


@dataclass
class Group:
    """One run's group: its commits and ownerships; what members received (per partition,
    the (offset, value) pairs any polled); each member's progress (per (process,
    partition), (poll end time, highest offset polled by then), as the highest grew); the
    complete drains (partition -> offset -> value); each process's first and last op
    time, and when its last poll ended; the retired processes; and when the last nemesis
    op ended (0: none)."""

    partitions: int
    commits: list[Commit] = field(default_factory=list)
    owned: list[Ownership] = field(default_factory=list)
    received: dict[int, set[tuple[int, Value]]] = field(default_factory=dict)
    progress: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)
    drained: dict[int, dict[int, Value]] = field(default_factory=dict)
    first_op: dict[int, int] = field(default_factory=dict)
    last_op: dict[int, int] = field(default_factory=dict)
    last_poll: dict[int, int] = field(default_factory=dict)
    retired: set[int] = field(default_factory=set)
    quiet_since: int = 0

    def polled_up_to(self, process: int, partition: int, time: int) -> int:
        """The highest offset of ``partition`` that ``process`` polled by ``time``; -1: none."""
        steps = self.progress.get((process, partition), [])
        i = bisect.bisect_right(steps, (time, 2**63))
        return steps[i - 1][1] if i else -1


def group(rows: Iterable[Mapping[str, Any]], topic: str, partitions: int) -> Group:
    """The :class:`Group` of a history's rows (pairing already checked by the reader)."""
    g = Group(partitions)
    open_commits: dict[int, tuple[int, int]] = {}
    holding: dict[tuple[int, int], tuple[int, str]] = {}
    drained: dict[int, dict[int, Value]] = {}
    for d in rows:
        p, f, typ, t = d["process"], d["f"], d["type"], d["time"]
        v: Any = d.get("value")
        if p == "nemesis":
            g.quiet_since = t
            continue
        g.first_op.setdefault(p, t)
        g.last_op[p] = t
        if typ == "info":
            g.retired.add(p)
        if f == "poll" and typ != "invoke":
            g.last_poll[p] = t
        if f == "poll" and typ == "ok":
            for tp, part, off, value in v["records"]:
                if tp == topic:
                    g.received.setdefault(part, set()).add((off, value))
                    steps = g.progress.setdefault((p, part), [])
                    if not steps or off > steps[-1][1]:
                        steps.append((t, off))
        elif f == "commit" and typ == "invoke":
            open_commits[p] = (d["index"], t)
        elif f == "commit":
            index, invoked = open_commits.pop(p)
            g.commits += [Commit(p, index, invoked, t, typ, part, off, epoch)
                          for tp, part, off, epoch in v["offsets"] if tp == topic]
        elif f in ("assign", "revoke", "lost") and typ == "ok":
            for tp, part in v["partitions"]:
                if tp != topic:
                    continue
                if f == "assign":
                    holding[(p, part)] = (t, v["member"])
                elif (p, part) in holding:
                    began, member = holding.pop((p, part))
                    g.owned.append(Ownership(p, part, began, t, f, member))
        elif f == "drain" and typ == "ok":
            records = drained.setdefault(v["partition"], {})
            records.update((off, value) for off, value in v["records"])
            if v.get("last"):
                g.drained[v["partition"]] = records
    g.owned += [Ownership(p, part, began, g.last_op[p], "end", member)
                for (p, part), (began, member) in holding.items()]
    return g


# -- the anomalies ------------------------------------------------------------------------


class Backwards(NamedTuple):
    commit: Commit
    earlier: Commit


def commits_backwards(g: Group) -> list[Backwards]:
    """commit-backwards: an ok commit of a partition invoked after an ok commit of a higher
    offset of it had ended: the group's committed position went back."""
    ok = [c for c in g.commits if c.outcome == "ok"]
    by_end = sorted(ok, key=lambda c: c.ended)
    highest: dict[int, Commit] = {}
    found, i = [], 0
    for c in sorted(ok, key=lambda c: c.invoked):
        while i < len(by_end) and by_end[i].ended < c.invoked:
            e = by_end[i]
            if e.partition not in highest or e.offset > highest[e.partition].offset:
                highest[e.partition] = e
            i += 1
        top = highest.get(c.partition)
        if top is not None and top.offset > c.offset:
            found.append(Backwards(c, top))
    return found


class Beyond(NamedTuple):
    commit: Commit
    polled: int  # the highest offset its process had polled of the partition; -1: none


def commits_beyond_polled(g: Group) -> list[Beyond]:
    """commit-beyond-polled: a commit (however it ended) of an offset past one after the
    highest its member had polled of the partition when it was invoked: it marked records
    consumed that the member was never given."""
    found = []
    for c in g.commits:
        polled = g.polled_up_to(c.process, c.partition, c.invoked)
        if c.offset > polled + 1:
            found.append(Beyond(c, polled))
    return found


class Overlap(NamedTuple):
    first: Ownership
    second: Ownership


def overlapping_owners(g: Group) -> list[Overlap]:
    """overlapping-owners: two members (processes) holding one partition at overlapping
    times, by their own assignments: ``first`` began first (or at once)."""
    found = []
    for part in range(g.partitions):
        spans = sorted((o for o in g.owned if o.partition == part), key=lambda o: o.began)
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if b.began >= a.ended:
                    break
                if b.process != a.process:
                    found.append(Overlap(a, b))
    return found


class Unreceived(NamedTuple):
    partition: int
    offset: int
    value: Value
    committed: Commit


def last_committed(g: Group, partition: int) -> Commit | None:
    """The group's last committed position of ``partition``: its ok commit that ended last."""
    ok = [c for c in g.commits if c.outcome == "ok" and c.partition == partition]
    return max(ok, key=lambda c: (c.ended, c.index)) if ok else None


def lost_to_group(g: Group) -> list[Unreceived]:
    """lost-to-group: a record the complete drain read below the group's last committed
    offset of its partition that no member ever polled (that offset with that value)."""
    found = []
    for part, records in sorted(g.drained.items()):
        last = last_committed(g, part)
        if last is None:
            continue
        received = g.received.get(part, set())
        found += [Unreceived(part, off, value, last) for off, value in sorted(records.items())
                  if off < last.offset and (off, value) not in received]
    return found


class Unassigned(NamedTuple):
    process: int
    time: int
    unowned: list[int]


def settled_at(g: Group) -> int | None:
    """When the group is judged settled: the first last poll of a member that was not
    retired (before any closes), if it ended :data:`QUIET_NS` or more after the last fault
    ended; else None."""
    ends = [t for p, t in g.last_poll.items() if p not in g.retired]
    if not ends or min(ends) - g.quiet_since < QUIET_NS:
        return None
    return min(ends)


def unassigned_members(g: Group) -> list[Unassigned]:
    """unassigned-member: at :func:`settled_at`, a member that had been in the group
    :data:`QUIET_NS` holding no partition while some partition had no owner."""
    t = settled_at(g)
    if t is None:
        return []
    held: dict[int, set[int]] = {}
    for o in g.owned:
        if o.began <= t and (t < o.ended or o.how == "end"):
            held.setdefault(o.process, set()).add(o.partition)
    owned = set().union(*held.values()) if held else set()
    unowned = [p for p in range(g.partitions) if p not in owned]
    if not unowned:
        return []
    return [Unassigned(p, t, unowned) for p in sorted(g.last_poll)
            if p not in g.retired and not held.get(p) and g.first_op[p] <= t - QUIET_NS]


# -- the verdict ----------------------------------------------------------------------------


def judge(g: Group, config: GuaranteeConfig, faults: Mapping[int, PartitionFaults]) -> Result:
    """The ``group`` checker's Result: ``valid`` false where an instance the guarantees do
    not permit was seen, else true; results.json's ``group`` (counts, examples, which
    anomalies were permitted and why, which were violations, and whether the group settled
    for :func:`unassigned_members` to be judged)."""
    permits = {p: group_permitted(config, f) for p, f in faults.items()}
    counts = dict.fromkeys(GROUP_ANOMALIES, 0)
    examples: dict[str, list[dict[str, Any]]] = {a: [] for a in GROUP_ANOMALIES}
    permitted: dict[str, str] = {}
    violations: set[str] = set()

    def add(anomaly: str, partition: int | None, example: dict[str, Any], why: str | None = None) -> None:
        why = why or (permits.get(partition, {}).get(anomaly) if partition is not None else None)
        counts[anomaly] += 1
        if why is None:
            violations.add(anomaly)
        else:
            permitted.setdefault(anomaly, why)
        if len(examples[anomaly]) < MAX_GROUP_EXAMPLES:
            examples[anomaly].append({**example, "permitted": why})

    for b in commits_backwards(g):
        add("commit-backwards", b.commit.partition, {
            "partition": b.commit.partition, "process": b.commit.process, "offset": b.commit.offset,
            "time": b.commit.invoked, "earlier_offset": b.earlier.offset,
            "earlier_process": b.earlier.process, "earlier_ended": b.earlier.ended})
    for x in commits_beyond_polled(g):
        add("commit-beyond-polled", None, {
            "partition": x.commit.partition, "process": x.commit.process, "offset": x.commit.offset,
            "time": x.commit.invoked, "outcome": x.commit.outcome, "polled": x.polled})
    for o in overlapping_owners(g):
        add("overlapping-owners", None, {
            "partition": o.first.partition, "first": _span(o.first), "second": _span(o.second)},
            OVERLAP_AFTER_LOST if o.first.how == "lost" else None)
    for u in lost_to_group(g):
        add("lost-to-group", u.partition, {
            "partition": u.partition, "offset": u.offset, "value": u.value,
            "committed": u.committed.offset, "committed_by": u.committed.process,
            "time": u.committed.ended})
    for m in unassigned_members(g):
        add("unassigned-member", None, {"process": m.process, "time": m.time, "unowned": m.unowned})
    settled = settled_at(g) is not None
    extra = {"group": {
        "valid": not violations, "anomaly_counts": counts,
        "anomalies": {a: e for a, e in examples.items() if e},
        "permitted": sorted(permitted), "permitted_reasons": permitted,
        "violations": sorted(violations), "settled": settled}}
    unknown = [] if settled else [{
        "kind": "group-not-settled", "affects_verdict": False,
        "why": f"no member lived {QUIET_NS // 10**9} s past the last fault, so members without an "
               "assignment (unassigned-member) were not judged"}]
    return Result(valid=not violations, unknown=unknown, extra=extra)


def _span(o: Ownership) -> dict[str, Any]:
    return {"process": o.process, "member": o.member, "began": o.began, "ended": o.ended, "how": o.how}
