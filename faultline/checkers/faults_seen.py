"""The faults each partition saw (a :class:`~faultline.checkers.partition_faults.PartitionFaults`),
from a run's nemesis ops and the broker's own state, for
:func:`faultline.checkers.guarantees.rules` to judge.

Faults come from the history's nemesis ops (:func:`faults_by_partition`), not from
the spec: a fault that was configured but never fired, or that the nemesis skipped
(``result: "skipped"``: no target could be planned), permits nothing. One that failed
(its completion has an ``error``) or never completed may have done all it names or
nothing: everything it gives counts only in the permissive reading (see
:func:`faults_by_partition`'s ``strict``). They are
judged per topic-partition, because a fault on one partition's leader excuses
nothing on another's. The faults of one partition are:

- ``families``, those that happened to it: ``kill``, ``pause``, ``stop``, ``partition``,
  ``wipe``, ``lose-unflushed``, ``links`` (the node whose links were degraded) when
  they touched one of its replicas (every node counts while the metadata log does not
  name the replicas), ``toxics``, ``clock``, ``clients`` (a crashed client: no
  broker touched, so it permits nothing).
  A network partition touches the nodes it cut off from the majority when its grudge
  splits the nodes it names cleanly and one side holds a majority of them (isolating
  a node, halves: a replica on the majority side keeps its leader, or its leader keeps
  the quorum and its followers there; a bridge of 4 nodes, whose middle node the
  grudge does not name, cuts off the node alone on its side); any other (a ring, a split
  with no majority) every node it names. A targeted ``isolate`` is judged by its
  ``grudge`` alone, whatever ``replication`` hold is in effect beside it, and a ``hold``
  touches the nodes it held (its ``targets``), not the leader it cut them off from. A
  ``stop`` that had to SIGKILL nodes (``killed``) is a ``kill`` too of the partitions
  they replicate, and one that failed or never completed (it may have had to) of the
  partitions its nodes replicate;
- ``leader_fault`` when a node fault touched the partition's leader, or when the
  metadata log shows its leader change (an election moves leadership whatever caused
  it, and truncates what only the old leader had). A pause or a network partition
  (:data:`KEEP_PROCESS`) leaves the leader's process and log alone: it moves leadership
  only by an election, so where the metadata log covers it only an election the log
  shows counts; where the log does not, it counts when it may fence the leader, and a
  ``hold`` (see :func:`fences`), which leaves it unfenced and leading, only in the
  permissive reading (it may have ended in an election nobody saw). A kill, stop, wipe
  or lose-unflushed of the leader counts in any case: a leader restarted before the
  controller fenced it may lead again with what its log kept, no election
  recorded. A fault touched the leader when
  the metadata log shows one of its nodes leading within :data:`CLOCK_MARGIN_NS` of the
  fault, or, where the log does not reach back to the fault, the ``leaders`` snapshot
  the nemesis recorded in its op (``{"<topic>/<partition>": node}``, invoke or
  completion) names one of them; a snapshot that names one against the log (a broker
  cut off from the controller answers from a frozen cache), or neither witness for the
  partition, says it may have (the permissive reading: an anomaly only such readings
  permit makes the run unknown, see :func:`faults_by_partition`'s ``strict``);
- ``data_loss``, the most of its replicas whose data a ``wipe`` or ``lose-unflushed``
  had destroyed *at once* (5 when the op names no nodes); one that failed (an
  ``error``) or never completed may have destroyed its nodes' data, or none of it:
  it counts, but only in the permissive reading. A
  ``lose-unflushed`` of one node whose completion says it cut nothing from
  the partition (``truncated``: its ``new_end`` is its ``old_end``) destroyed nothing
  there: it is a ``kill`` of that replica, as what it did was SIGKILL it. Without
  broker state a destroyed node counts for the rest of the run. Given
  the partition's states from the KRaft metadata log (:data:`Timeline`), a node stops
  counting once the log shows it leave the partition's ISR after the fault and come
  back: rejoining the ISR means it fetched everything up to the HW again, so it again
  holds every committed record. Both changes must lie :data:`CLOCK_MARGIN_NS` inside
  the window (after the fault, before the next one), since the log's times come from
  the wall clock and the history's from a monotonic one; a change the margin hides
  keeps the node counting (permissive);
- ``faulted``, how many of its replicas may have fallen out of step
  with the leader: those a node fault touched, and those the metadata log shows
  outside the ISR at some point (a replica can lag out of the ISR with no fault,
  under load). Without the metadata log, once a node fault touched the partition,
  every replica may have (5); with neither, none;
- ``fenced``, how many of its replicas a fault may have fenced from the
  KRaft controller or restarted uncleanly (:func:`fences`): every node fault on the
  nodes it touched (as above), but a ``hold``, whose nodes keep the controller link
  and stay registered and unfenced. Counted over the whole run, not at once (the
  permissive reading); an op naming no node may have fenced any (5), and so
  may any fault or load once the metadata log shows an unclean election there (a leader
  from neither the ISR nor the ELR before: every member of both was fenced or dropped);
- the family ``producer-restart`` when a nemesis op of that name says a producer was
  restarted and may have re-sent values (no workload does this yet).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline.checkers.partition_faults import DATA_LOSS_FAULTS, NODE_FAULTS, OTHER_FAULTS, PartitionFaults
from faultline.faults import family_of_fault
from faultline.history import NEMESIS, Op

#: Node faults that leave a node's process and its log as they were (no restart, nothing
#: destroyed): its leadership moves only by an election, which the metadata log records.
KEEP_PROCESS: frozenset[str] = frozenset(("pause", "partition", "links"))


def fault_of(action: str) -> str | None:
    """The fault a nemesis op's ``f`` applies (a family name, or one of
    :data:`OTHER_FAULTS`); None for a heal or anything else."""
    family = family_of_fault(action)
    return family.name if family is not None else action if action in OTHER_FAULTS else None


#: Assumed node count when a data-loss op names no nodes (the largest cluster).
_MAX_NODES = 5
#: How far apart the metadata log's wall-clock times and the history's monotonic
#: times may be, at most, for one event (ns).
CLOCK_MARGIN_NS = 500_000_000

#: A topic-partition: ``(topic, partition)``.
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MetadataState:
    """A partition's state after one record of the KRaft metadata log.

    ``time`` is ns since the run started, from the wall clock (so :data:`CLOCK_MARGIN_NS`
    apart from history times at most); ``replicas`` is empty when the log did not say.
    """

    time: int
    leader: int | None
    isr: frozenset[int]
    replicas: frozenset[int] = frozenset()
    elr: frozenset[int] = frozenset()
    epoch: int | None = None  # the leader epoch after the record, where the log says


#: topic-partition -> its state after each change, in metadata log order.
Timeline = Mapping[TopicPartition, Sequence[MetadataState]]


@dataclass(frozen=True, slots=True)
class NemesisAction:
    """One nemesis action: its two ``info`` ops paired by ``f`` (begin, then what was done).

    ``end`` is None when the completion never came (the run died); ``value`` merges
    the begin's value with the completion's (the completion wins on shared keys).
    """

    f: str
    start: int
    end: int | None
    value: Mapping[str, Any]
    error: str | None = None

    @property
    def skipped(self) -> bool:
        """Whether the nemesis skipped it (no target could be planned): nothing happened."""
        return self.value.get("result") == "skipped"


def nemesis_actions(ops: Iterable[Op]) -> list[NemesisAction]:
    """Pair a history's nemesis ops into actions, sorted by start.

    Both ends of an action are ``info`` ops with the same ``f``; the first is its
    begin, the next one with that ``f`` its completion. Pairing is by ``f`` so that
    actions of different kinds may interleave.
    """
    begun: dict[str, Op] = {}
    out: list[NemesisAction] = []
    for op in ops:
        if op.process != NEMESIS:
            continue
        first = begun.pop(op.f, None)
        if first is None:
            begun[op.f] = op
            continue
        value = {**_as_dict(first.value), **_as_dict(op.value)}
        out.append(NemesisAction(op.f, first.time, op.time, value, op.error or first.error))
    out.extend(NemesisAction(op.f, op.time, None, _as_dict(op.value), op.error)
               for op in begun.values())
    out.sort(key=lambda a: a.start)
    return out


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def faults_of(ops: Iterable[Op], timeline: Timeline | None = None,
              partition: TopicPartition = ("fl-queue", 0)) -> PartitionFaults:
    """The faults one partition saw, from a history's nemesis ops (see module doc)."""
    return faults_by_partition(nemesis_actions(ops), [partition], timeline)[partition]


def faults_by_partition(actions: Iterable[NemesisAction], partitions: Iterable[TopicPartition],
                        timeline: Timeline | None = None, strict: bool = False,
                        narrow: bool = False) -> dict[TopicPartition, PartitionFaults]:
    """Per partition, the faults :func:`~faultline.checkers.guarantees.rules` reads (see
    the module docstring).

    ``actions`` come from :func:`nemesis_actions`; ``timeline`` is the partitions' state
    from the KRaft metadata log, when the run has one. A skipped action permits nothing;
    one whose completion carries an error, or that never completed, still counts: it
    may have happened. ``strict`` leaves out what only the permissive readings give, so
    only what a witness shows is left: a leader fault neither the snapshot nor the log
    shows, or only the snapshot against the log, every replica out of step without the
    log, whatever a node fault naming no node may have touched, and everything a fault
    that failed or never completed may have done (its ``error`` does not say which of
    its nodes got it), while what the metadata log shows, an election or a replica out
    of the ISR, stays witnessed on its own
    (:func:`faultline.checkers.verdict.Collected.assumed_permitted` makes what only the
    permissive readings permit unknown).

    ``narrow``: the metadata log covers every action and state given (:class:`Windows`),
    so it decides what it records: a leader moves only by an election it shows (or under
    a fault that destroys the leader's data, which needs none); replicas are fenced only
    where it shows an unclean election; destroyed data counts only where it shows a
    node whose data was destroyed lead before it rejoined the ISR.
    """
    parts = list(partitions)
    out: dict[TopicPartition, set[str]] = {tp: set() for tp in parts}  # families
    leader: dict[TopicPartition, bool] = dict.fromkeys(parts, False)
    states = {tp: (timeline or {}).get(tp) for tp in parts}
    destroyed = {tp: _Destroyed(states[tp]) for tp in parts}
    # replicas faulted or seen out of the ISR; None: every replica may have been
    out_of_step: dict[TopicPartition, set[str] | None] = {
        tp: _left_isr(states[tp], strict) for tp in parts}
    # replicas a fault may have fenced (see fences); None: every replica may have been,
    # as when the metadata log shows an unclean election (the broker's own word: every
    # ISR and ELR member was fenced or dropped, whatever fenced it, a fault or a load)
    fenced: dict[TopicPartition, set[str] | None] = {
        tp: None if _elected_unclean(states[tp]) else set() for tp in parts}
    # a fault-made fact where the log records what it stands for: not when ``narrow``
    assumed = not narrow
    for action in actions:
        kind = fault_of(action.f)
        if kind is None or action.skipped:
            continue
        cut_off = _cut_off(action.value) if kind == "partition" else None
        named = cut_off if cut_off is not None else {str(n) for n in nodes_of(action.value)}
        done = action.end is not None and action.error is None
        if strict and (not done or (kind in NODE_FAULTS and not named)):
            continue
        flushed = _cut_nothing(action)
        said = action.value.get("killed") if kind == "stop" else None
        killed = {str(n) for n in said} if isinstance(said, list) else set()
        # a stop that failed or never completed may have had to SIGKILL any of its nodes
        unsure = kind == "stop" and not done
        fencing = fences(kind, action.value)
        for tp in parts:
            replicas = _replicas(states[tp])
            nodes = named & replicas if kind in NODE_FAULTS and named and replicas else named
            if named and not nodes:  # the fault touched no replica of this partition
                continue
            did = "kill" if f"{tp[0]}/{tp[1]}" in flushed else kind
            out[tp].add(did)
            if unsure or nodes & killed:  # a stop with no clean shutdown of those
                out[tp].add("kill")
            if kind in NODE_FAULTS:
                # a fault that leaves the leader's process and log alone (a pause, a network
                # partition) moves leadership only by an election, which the metadata log
                # shows (_elected); where it does not cover the fault, a fencing one may
                # have, and a hold (unfenced) may only in the permissive reading
                covered = _log_covers(states[tp], action)
                may_move = kind not in KEEP_PROCESS or (not covered and (fencing or not strict))
                if (may_move and (assumed or did in DATA_LOSS_FAULTS)
                        and _hit_leader(action, nodes, tp, states[tp] if covered else None, strict)):
                    leader[tp] = True
                out_of_step[tp] = _with(out_of_step[tp], nodes)
                if fencing and assumed:
                    fenced[tp] = _with(fenced[tp], nodes)
            if did in DATA_LOSS_FAULTS:
                destroyed[tp].add(nodes, action.start)
    found: dict[TopicPartition, PartitionFaults] = {}
    for tp in parts:
        led = leader[tp] or _elected(states[tp])
        seen = out_of_step[tp]
        found[tp] = PartitionFaults(
            frozenset(out[tp]), led,
            faulted=_count(seen) if out[tp] & NODE_FAULTS or led or seen else 0,
            fenced=_count(fenced[tp]),
            data_loss=destroyed[tp].most if assumed or destroyed[tp].led() else 0)
    return found


class Windows:
    """One partition's faults for an anomaly at a time: those of the faults and
    elections that could have touched a write (or read) made then, up to the drain.

    A fault bears on what was written at ``time`` unless it was over, with the
    partition whole again, before then (:func:`expiry`); elections count from
    :data:`CLOCK_MARGIN_NS` before ``time``, or before the first such fault that began
    earlier and left its nodes' processes running (:data:`KEEP_PROCESS`: a leader paused
    or cut off by it may acknowledge after the log shows another).
    Where the metadata log reaches back that far it decides (``narrow`` of
    :func:`faults_by_partition`). They are kept per distinct window.
    """

    def __init__(self, actions: Sequence[NemesisAction], tp: TopicPartition,
                 states: Sequence[MetadataState] | None, strict: bool) -> None:
        self._tp, self._strict = tp, strict
        self._states = list(states or ())
        faults = [a for a in actions if fault_of(a.f) is not None and not a.skipped]
        ends = [expiry(a, self._states, strict) for a in faults]
        order = sorted(range(len(faults)), key=lambda i: ends[i])
        self._faults = [faults[i] for i in order]
        self._ends = [ends[i] for i in order]
        # the earliest start among _faults[k:] that leave a leader's process running
        self._first = [math.inf] * (len(faults) + 1)
        for k in reversed(range(len(faults))):
            keeps = fault_of(self._faults[k].f) in KEEP_PROCESS
            self._first[k] = min(self._first[k + 1], self._faults[k].start if keeps else math.inf)
        self._times = [st.time for st in self._states]
        self._cache: dict[tuple[int, int], tuple[PartitionFaults, list[NemesisAction],
                                                 list[MetadataState], bool]] = {}

    def at(self, time: int) -> PartitionFaults:
        """The faults of the window of a write or read at ``time``."""
        return self._window(time)[0]

    def excuse(self, time: int) -> dict[str, Any]:
        """What in the window of ``time`` could have lost what was written or read then,
        for a person: an election the metadata log shows in it (when, from and to whom,
        the epoch, and whether the new leader was in the ISR, the ELR or neither: the
        first unclean one, else the first from the ELR, else the first), else the first
        fault in it, which the log covers or not (``witnessed``)."""
        _, kept, states, covered = self._window(time)
        elections = [{"kind": "election", "time": b.time, "from": a.leader, "to": b.leader,
                      "epoch": b.epoch, "witnessed": True,
                      "how": "isr" if b.leader in a.isr else "elr" if b.leader in a.elr else "unclean"}
                     for a, b in itertools.pairwise(states) if b.leader is not None and b.leader != a.leader]
        if elections:  # the one that can lose the most: an unclean one, else one from the ELR
            return min(elections, key=lambda e: ("unclean", "elr", "isr").index(e["how"]))
        if kept:
            return {"kind": "fault", "fault": fault_of(kept[0].f), "time": kept[0].start,
                    "nodes": nodes_of(kept[0].value), "witnessed": covered}
        return {"kind": "none", "witnessed": covered}

    def _window(self, time: int) -> tuple[PartitionFaults, list[NemesisAction],
                                          list[MetadataState], bool]:
        k = bisect.bisect_right(self._ends, time - CLOCK_MARGIN_NS)
        since = int(min(time, self._first[k])) - CLOCK_MARGIN_NS
        j = max(bisect.bisect_right(self._times, since) - 1, 0)
        found = self._cache.get((k, j))
        if found is None:
            covered = bool(self._states) and self._states[0].time <= since
            kept = sorted(self._faults[k:], key=lambda a: a.start)
            states = {self._tp: self._states[j:]} if self._states else None
            faults = faults_by_partition(kept, [self._tp], states, self._strict, narrow=covered)[self._tp]
            found = self._cache[(k, j)] = (faults, kept, self._states[j:], covered)
        return found


def expiry(action: NemesisAction, states: Sequence[MetadataState], strict: bool) -> float:
    """From when on ``action`` bears on no later write: where the metadata log reaches
    back to it, the first state after it (by :data:`CLOCK_MARGIN_NS`) with every replica in
    the ISR (every committed record on every replica again, its leader elected); never
    where none follows or it never completed. Without the log, when it completed in the
    strict reading (no witness says it did more), never in the permissive one."""
    if action.end is None:
        return math.inf
    if not _log_covers(states, action):
        return action.end if strict else math.inf
    return next((s.time for s in states if s.time > action.end + CLOCK_MARGIN_NS
                 and s.replicas and s.isr >= s.replicas), math.inf)


def _with(nodes: set[str] | None, more: set[str]) -> set[str] | None:
    """The replicas ``nodes`` (None: every one) and ``more``, which an op naming no node
    (empty) may have been any of."""
    return None if nodes is None or not more else nodes | more


def _count(nodes: set[str] | None) -> int:
    """How many replicas ``nodes`` are (None: any, so up to 5)."""
    return _MAX_NODES if nodes is None else len(nodes)


def fences(kind: str, value: Mapping[str, Any]) -> bool:
    """Whether a fault of family ``kind`` (its op's ``value``) may fence the nodes it
    touched from the KRaft controller, or restart them uncleanly (which drops them from
    the ELR): every node fault (a kill, pause, stop, wipe, lose-unflushed, network
    partition), but a ``hold``, which cuts only inter-broker traffic: its nodes keep
    heartbeating to the controller, stay registered and unfenced, and an ELR member
    among them is elected before any unclean candidate."""
    return kind in NODE_FAULTS and not (kind == "partition" and value.get("kind") == "hold")


def _cut_off(value: Mapping[str, Any]) -> set[str] | None:
    """The nodes a network partition op touched: for a targeted ``hold`` (``kind``) the nodes
    it held, its ``targets`` (else the side its ``replication`` grudge cuts off from the
    majority); for any other the side its ``grudge`` cuts off (:func:`_minority_cut`), also
    beside a ``replication`` grudge when its ``kind`` is ``isolate`` (the nodes held there
    are their own hold's). None when it cannot say so: then every node it names."""
    if value.get("kind") == "hold":
        targets = value.get("targets")
        if isinstance(targets, list) and targets and all(t.__class__ is int for t in targets):
            return {str(t) for t in targets}
        return _minority_cut(value.get("replication"))
    if value.get("replication") and value.get("kind") != "isolate":
        return None  # two grudges, and no kind to say which one this op set
    return _minority_cut(value.get("grudge"))


def _minority_cut(grudge: Any) -> set[str] | None:
    """The nodes a history-form grudge cuts off from the majority: when it splits the nodes
    it names into sides whose nodes all reach each other and none across, and one side
    holds more than half of them, the nodes outside it. None when it cannot say so (no
    grudge, a side cut within, no majority side)."""
    if not isinstance(grudge, dict) or not grudge:
        return None
    if not all(isinstance(v, list) for v in grudge.values()):
        return None
    drops = {str(k): {str(d) for d in v} for k, v in grudge.items()}
    named = set(drops).union(*drops.values())
    side = {n: frozenset(m for m in named if m not in drops.get(n, ()) and n not in drops.get(m, ()))
            for n in named}
    if any(side[m] != s for s in side.values() for m in s):
        return None
    majority = [s for s in set(side.values()) if 2 * len(s) > len(named)]
    return named - majority[0] if majority else None


def unflushed_cuts(action: NemesisAction) -> dict[str, Any] | None:
    """What a completed ``lose-unflushed`` of one node says it cut (its ``truncated``:
    ``"<topic>/<partition>"`` -> its log ends before and after, docs/history.md); None for
    another action, or where it cannot say: several nodes, whose entries the op does not
    tell apart; no completion; an error."""
    truncated = action.value.get("truncated")
    if (fault_of(action.f) != "lose-unflushed" or action.end is None or action.error is not None
            or len(nodes_of(action.value)) != 1 or not isinstance(truncated, dict)):
        return None
    return truncated


def _cut_nothing(action: NemesisAction) -> set[str]:
    """The partitions (``"<topic>/<partition>"``) a completed ``lose-unflushed`` of one node
    says it cut nothing from (its ``truncated`` entry: ``new_end`` equal to ``old_end``).
    Anything less clear (:func:`unflushed_cuts`, no entry) may have destroyed data."""
    return {tp for tp, entry in (unflushed_cuts(action) or {}).items() if isinstance(entry, dict)
            and entry.get("old_end").__class__ is int and entry.get("old_end") == entry.get("new_end")}


def _left_isr(states: Sequence[MetadataState] | None, strict: bool = False) -> set[str] | None:
    """The replicas the metadata log shows outside the ISR at some point; None without
    the log (unknown), or none if ``strict``."""
    if not states:
        return set() if strict else None
    return {str(n) for s in states for n in s.replicas - s.isr}


def _elected_unclean(states: Sequence[MetadataState] | None) -> bool:
    """Whether the metadata log shows the partition elect a leader that was in neither
    the ISR nor the ELR before (an unclean election, or KIP-966's last known leader with
    both empty)."""
    return any(b.leader is not None and b.leader != a.leader and b.leader not in a.isr | a.elr
               for a, b in itertools.pairwise(states or ()))


def _replicas(states: Sequence[MetadataState] | None) -> set[str]:
    """The partition's replicas per the metadata log (empty when unknown)."""
    return {str(n) for s in states or () for n in s.replicas}


def _hit_leader(action: NemesisAction, nodes: set[str], tp: TopicPartition,
                covering: Sequence[MetadataState] | None, strict: bool = False) -> bool:
    """Whether a node fault touched ``tp``'s leader.

    Two witnesses: the metadata log's leaders from :data:`CLOCK_MARGIN_NS` before the
    fault began to as long after it completed, when the log reaches back to the fault's
    start (``covering``: the log's states then, None where it does not,
    :func:`_log_covers`), and the ``leaders`` snapshot the nemesis recorded. The log is the controller's
    own record; the snapshot may come from a broker cut off from the controller that
    answers from a frozen metadata cache. So where the log covers the fault, it decides,
    and a snapshot that says otherwise counts only in the permissive reading, which
    either witness suffices for. With neither (no snapshot for ``tp``, no log that
    reaches back), or when the op names no node, it may have: the permissive reading,
    unless ``strict``.
    """
    if not nodes:
        return not strict
    snapshot = action.value.get("leaders")
    key = f"{tp[0]}/{tp[1]}"
    said = str(snapshot[key]) in nodes if isinstance(snapshot, dict) and key in snapshot else None
    logged: bool | None = None
    if covering is not None:
        end = action.end if action.end is not None else action.start
        logged = bool(nodes & {str(n) for n in leaders_between(
            covering, action.start - CLOCK_MARGIN_NS, end + CLOCK_MARGIN_NS)})
    if strict:
        return logged if logged is not None else said is True
    return bool(logged or said) or (logged is None and said is None)


def _log_covers(states: Sequence[MetadataState] | None, action: NemesisAction) -> bool:
    """Whether the metadata log reaches back to :data:`CLOCK_MARGIN_NS` before ``action``
    began, so that it shows every leader the partition had from then on."""
    return states is not None and len(states) > 0 and states[0].time <= action.start - CLOCK_MARGIN_NS


def leaders_between(states: Sequence[MetadataState], start: int, end: int) -> set[int]:
    """Every leader the partition had at some moment of ``[start, end]``."""
    out: set[int] = set()
    current: int | None = None
    for s in states:
        if s.time > end:
            break
        if s.time > start and current is not None:
            out.add(current)
        current = s.leader
    if current is not None:
        out.add(current)
    return out


def elected_between(states: Sequence[MetadataState], start: int, end: int) -> set[int]:
    """Every leader the partition elected in ``(start, end]``: a state naming a leader
    where the one before it named another, none, or another leader epoch."""
    return {b.leader for a, b in itertools.pairwise(states)
            if start < b.time <= end and b.leader is not None and _elects(a, b)}


def _elects(before: MetadataState, after: MetadataState) -> bool:
    """Whether ``after`` elects its leader anew: another one than ``before``'s, or in another epoch."""
    epochs = (before.epoch, after.epoch)
    return after.leader != before.leader or (None not in epochs and epochs[0] != epochs[1])


def _elected(states: Sequence[MetadataState] | None) -> bool:
    """Whether the metadata log shows the partition's leader change after it was created."""
    leaders = [s.leader for s in states or ()]
    return any(a != b for a, b in itertools.pairwise(leaders))


class _Destroyed:
    """One partition's nodes whose data is destroyed and not yet replicated back.

    :meth:`add` records a wipe / lose-unflushed at ``time``; :attr:`most` is the largest
    number destroyed at once so far (see the module docstring for when a node recovers).
    """

    def __init__(self, states: Sequence[MetadataState] | None) -> None:
        self._states = states
        self._since: dict[str, int] = {}  # node -> fault time
        self._every: list[tuple[str | None, int]] = []  # node (None: any), fault start
        self.most = 0

    def add(self, nodes: set[str], time: int) -> None:
        self._every += [(n, time) for n in nodes] or [(None, time)]
        if not nodes:  # an op naming no node: assume the worst
            self.most = _MAX_NODES
            return
        for n, t in list(self._since.items()):
            back = self._rejoined_at(n, t)
            if back is not None and back < time - CLOCK_MARGIN_NS:  # both changes inside the window
                del self._since[n]
        self._since.update(dict.fromkeys(nodes, time))
        self.most = max(self.most, len(self._since))

    def led(self) -> bool:
        """Whether the metadata log shows a node whose data was destroyed lead with what it
        lost: after the fault began (by :data:`CLOCK_MARGIN_NS`) and before it rejoined the
        ISR, elected (a state naming it leader where the one before named another leader,
        none, or another leader epoch), or never deposed (leader then, and every state to
        that end names it). A record naming it leader from before the fault that a later
        one replaces is no leadership: it stands until the controller fences the node,
        seconds after a kill, and the node serves nothing meanwhile. Any node may have, for
        an op naming none."""
        states = self._states or ()
        for node, lost_at in self._every:
            if node is None:
                return True
            back = self._rejoined_at(node, lost_at)
            start, end = lost_at + CLOCK_MARGIN_NS, 2**62 if back is None else back
            if node in {str(n) for n in elected_between(states, start, end)}:
                return True
            then = [s for s in states if s.time <= start][-1:]
            if then and str(then[0].leader) == node and all(
                    str(s.leader) == node for s in states if start < s.time <= end):
                return True
        return False

    def _rejoined_at(self, node: str, lost_at: int) -> int | None:
        """When the ISR regained ``node`` after losing it, both after ``lost_at`` by a
        clear :data:`CLOCK_MARGIN_NS`; None if the log does not show it."""
        left = False
        for s in self._states or ():
            if s.time <= lost_at + CLOCK_MARGIN_NS:
                continue
            if not any(str(m) == node for m in s.isr):
                left = True
            elif left:
                return s.time
        return None

def nodes_of(value: Mapping[str, Any]) -> list[Any]:
    """Node ids a nemesis op's value names: ``nodes``, else every node in a ``grudge``."""
    nodes = value.get("nodes")
    if isinstance(nodes, list):
        return list(nodes)
    grudge = value.get("grudge")
    if isinstance(grudge, dict):
        found: dict[str, None] = {}
        for k, dropped in grudge.items():
            if dropped:
                found[str(k)] = None
                if isinstance(dropped, list):
                    found.update((str(d), None) for d in dropped)
        return [int(n) if n.lstrip("-").isdigit() else n for n in found]
    return []
