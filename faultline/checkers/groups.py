"""What each consumer-group anomaly is, in plain Python over one run's group ops.

The group workload's ops (docs/history.md: ``poll``, ``commit``, ``assign``, ``revoke``,
``lost``) and the drain, read from a history into a
:class:`~faultline.checkers.group_history.Group`. One
function per anomaly says what is an instance of it, per partition of the run's one
group; whether the run's config and the faults in the instance's window
(:class:`FaultWindows`) permit it is
:func:`faultline.checkers.guarantees.group_permitted`'s question (and
:data:`~faultline.checkers.guarantees.OVERLAP_AFTER_LOST`'s, ``OVERLAP_AFTER_FENCED``'s and
:func:`~faultline.checkers.guarantees.offsets_destroyed`'s, per instance).
:func:`judge` makes the ``group`` checker's Result (results.json's ``group``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from faultline.checkers.faults_seen import (
    CLOCK_MARGIN_NS,
    MetadataState,
    NemesisAction,
    Timeline,
    Windows,
    nodes_of,
    unflushed_cuts,
)
from faultline.checkers.group_end import CommitLogs, kept_to_end, stored_before
from faultline.checkers.group_history import UNSURE, Commit, Group, Ownership, Read, Value
from faultline.checkers.guarantees import (
    OVERLAP_AFTER_FENCED,
    OVERLAP_AFTER_LOST,
    OVERLAP_AFTER_PAUSE,
    GuaranteeConfig,
    committed_loss_reason,
    group_permitted,
    offsets_destroyed,
)
from faultline.checkers.result import MAX_ANOMALY_EXAMPLES, UNKNOWN, Result, Valid, displace_permitted
from faultline.checkers.table import SendTable
from faultline.faults import family_of_fault
from faultline.spec import GROUP_SESSION_TIMEOUT_MS
from faultline.targeted import OFFSETS_TOPIC

#: The anomalies, in the order results.json's ``group`` lists them.
GROUP_ANOMALIES = ("commit-backwards", "commit-beyond-polled", "overlapping-owners",
                   "lost-to-group", "unassigned-member", "commit-lost", "redelivery-below-commit",
                   "reset-without-cause")
#: How long after the last fault, retirement or new member a member must have had to get
#: an assignment, in ns:
#: past a session timeout (6 s under either protocol,
#: :data:`faultline.spec.GROUP_SESSION_TIMEOUT_MS`) and the rebalance that
#: follows; KIP-848 assigns as soon as a member heartbeats.
QUIET_NS = 10 * 10**9
#: Examples kept per anomaly in results.json's ``group``, in the order seen.
MAX_GROUP_EXAMPLES = 100


# -- the anomalies ------------------------------------------------------------------------


class Backwards(NamedTuple):
    commit: Commit
    earlier: Commit


def requested_after(g: Group, c: Commit, asynchronous: bool) -> int | None:
    """The earliest time ``c``'s request may have been sent: its invoke for a sync commit;
    for an async or auto one, whose journaled invoke is only an upper bound
    (docs/history.md), the invoke of the first poll in which its process got the record
    just below the offset (the client stores it before that poll ends); None: no such poll."""
    if not asynchronous:
        return c.invoked
    return g.got.get((c.process, c.partition, c.offset - 1))


def commits_backwards(g: Group, asynchronous: bool = False) -> tuple[list[Backwards], list[Backwards]]:
    """commit-backwards: an ok commit of a partition requested after an ok commit of a
    higher offset of it had ended (:func:`requested_after`): the group's committed
    position went back. Also the async or auto commits that would be one by their
    invoke time but whose request has no lower bound: undecided."""
    ok = sorted((c for c in g.commits if c.outcome == "ok"), key=lambda c: c.ended)
    ends: dict[int, list[int]] = {}
    top: dict[int, list[Commit]] = {}  # per partition, the highest offset ended by each end
    for c in ok:
        tops = top.setdefault(c.partition, [])
        ends.setdefault(c.partition, []).append(c.ended)
        tops.append(c if not tops or c.offset > tops[-1].offset else tops[-1])

    def highest(c: Commit, before: int) -> Commit | None:
        i = bisect.bisect_left(ends.get(c.partition, []), before)
        found = top[c.partition][i - 1] if i else None
        return found if found is not None and found.offset > c.offset else None

    found: list[Backwards] = []
    undecided: list[Backwards] = []
    for c in sorted(ok, key=lambda c: c.invoked):
        since = requested_after(g, c, asynchronous)
        earlier = highest(c, c.invoked if since is None else since)
        if earlier is not None:
            (found if since is not None else undecided).append(Backwards(c, earlier))
    return found, undecided


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


def stale_assignment(o: Overlap) -> bool:
    """Whether the later assignment of an overlap (classic protocol) was one its member
    learned of only after the group had moved on: of a generation older than the first
    owner's, and lost (a member stopped past its session takes a queued assign when it
    runs again, then finds itself expelled)."""
    a, b = o.first.generation, o.second.generation
    return o.second.how == "lost" and a is not None and b is not None and b < a


class Pause(NamedTuple):
    processes: frozenset[int]  # those its client had used by then
    began: int  # the pause-client's invoke
    stopped: int  # its completion: the process stopped
    resumed: int  # the completion of the resume-client that continued it


def pauses(g: Group) -> list[Pause]:
    """Each completed ``pause-client`` with the first completed ``resume-client`` after it
    that names its client (a pause never resumed is not one: the run ended in it)."""
    found = []
    for a in g.actions:
        if a.f != "pause-client" or a.end is None:
            continue
        role = "consumers" if "consumers" in a.value else "clients"
        resumed = min((r.end for r in g.actions if r.f == "resume-client" and r.end is not None
                       and r.end >= a.end and set(a.value[role]) <= set(r.value.get(role, ()))),
                      default=None)
        if resumed is not None:
            found.append(Pause(frozenset(a.value.get("processes", ())), a.start, a.end, resumed))
    return found


def paused_past_session(g: Group, o: Overlap, paused: Sequence[Pause]) -> bool:
    """Whether the first owner's process was stopped by one of the ``paused`` from before
    the second owner's assignment until after it, longer than a member's session
    (:data:`~faultline.spec.GROUP_SESSION_TIMEOUT_MS`), polled nothing that ended since the
    pause began, and was retired after the resume: a member that sends no heartbeat loses
    its partitions only by its session's expiry, and it read nothing while it held them."""
    p = o.first.process
    return p in g.retired and any(
        p in x.processes and x.stopped <= o.second.began <= x.resumed
        and x.resumed - x.stopped > GROUP_SESSION_TIMEOUT_MS * 1_000_000
        and g.last_poll.get(p, 0) <= x.began and g.retired[p] >= x.resumed for x in paused)


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


def lost_window(u: Unreceived, had: list[Value], sends: SendTable | None) -> tuple[int, int | None]:
    """When a truncation could have lost ``u`` to the group: after the earliest send invoke of
    the values members received at its offset (``had``; 0 where none, or where one has no
    send), and before its own value was appended there, by its send's acknowledgement of
    that offset where each value members had there was acknowledged there before that
    send's invoke (None otherwise: up to the drain; a copy acknowledged elsewhere, a
    duplicate, may have been appended there later, by a request held in the network, and
    one sent before what members had may sit on another branch of the log, restored by an
    unclean election). ``sends``: the history's sends (None: not known, so neither bound)."""
    if sends is None:
        return 0, None
    written = [sends.get(w) for w in had]
    since = 0 if None in written else min((s.invoke_time for s in written if s is not None), default=0)
    sent = sends.get(u.value)
    if sent is None or sent.outcome != "ok" or (sent.partition, sent.offset) != (u.partition, u.offset):
        return since, None
    if not written or any(w is None or w.outcome != "ok" or w.end_time is None
                          or (w.partition, w.offset) != (u.partition, u.offset)
                          or w.end_time >= sent.invoke_time for w in written):
        return since, None  # u may have been appended first, on another branch of the log
    return since, sent.end_time


def received_at(g: Group, offsets: set[tuple[int, int]]) -> dict[tuple[int, int], list[Value]]:
    """(partition, offset) -> the values members received there, for ``offsets``."""
    out: dict[tuple[int, int], list[Value]] = {}
    for part, got in g.received.items():
        for off, value in got:
            if (part, off) in offsets:
                out.setdefault((part, off), []).append(value)
    return out


class Unassigned(NamedTuple):
    process: int
    time: int
    unowned: list[int]


def gone_members(g: Group) -> dict[int, int]:
    """The processes no longer in the group -> since when: retired, left or killed (a
    process's stop over its retirement, its retirement over its kill)."""
    return {**g.killed, **g.retired, **g.left}


def settled_at(g: Group) -> int | None:
    """When the group is judged settled: the first last poll of a member that was neither
    retired, left nor killed (before any closes), if it ended :data:`QUIET_NS` or more
    after the last fault ended, the last member retired, left or was killed and the last
    member began (each of which rebalances the group); else None."""
    gone = gone_members(g)
    ends = [t for p, t in g.last_poll.items() if p not in gone]
    members = list(g.last_poll)
    quiet = max([g.quiet_since, *(g.first_op[p] for p in members),
                 *(gone[p] for p in members if p in gone)])
    if not ends or min(ends) - quiet < QUIET_NS:
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
    gone = gone_members(g)
    return [Unassigned(p, t, unowned) for p in sorted(g.last_poll)
            if p not in gone and not held.get(p) and g.first_op[p] <= t - QUIET_NS]


class Lost(NamedTuple):
    partition: int
    committed: int | None  # the coordinator's committed offset at the end; None: none
    last: Commit  # the highest ok commit that may have been the last it stored


def last_stored(g: Group, partition: int, asynchronous: bool) -> list[Commit]:
    """The ok commits of ``partition`` that may have been the last the coordinator stored:
    each one no other ok commit was requested after the end of (:func:`requested_after`;
    one with no lower bound may have been requested before)."""
    ok = [c for c in g.commits if c.outcome == "ok" and c.partition == partition]
    after = [t for d in ok if (t := requested_after(g, d, asynchronous)) is not None]
    return [c for c in ok if not any(t > c.ended for t in after)]


def commits_lost(g: Group, end: Mapping[int, int], asynchronous: bool = False) -> list[Lost]:
    """commit-lost: a partition whose committed offset at the end (``end``, partition ->
    offset, as the coordinator answered after the drain) is below the highest ok commit
    that may have been the last stored (:func:`last_stored`), or missing, and is no
    offset of one of those, nor of an :data:`UNSURE` commit (whose request may have been
    stored at any time): an acknowledged commit the coordinator no longer holds."""
    found = []
    for part in range(g.partitions):
        finals = last_stored(g, part, asynchronous)
        if not finals:
            continue
        top = max(finals, key=lambda c: (c.offset, c.ended))
        at = end.get(part)
        stored = {c.offset for c in g.commits if c.partition == part and c.outcome in UNSURE}
        if at is None or (at < top.offset and at not in stored | {c.offset for c in finals}):
            found.append(Lost(part, at, top))
    return found


class Start(NamedTuple):
    """A member's first read of a partition it was assigned, and the group's committed
    offsets it may have fetched (:func:`fetchable`)."""

    span: Ownership
    read: Read
    fetchable: list[Commit]
    since: int  # the earliest invoke among them (none: the assignment)


def fetchable(g: Group, partition: int, began: int, by: int, asynchronous: bool) -> list[Commit]:
    """The commits of ``partition`` whose offset a member assigned it at ``began`` may have
    fetched as the group's committed offset (OffsetFetch, sent after the assignment), by
    ``by``: each one that may have been requested before ``by`` (:func:`requested_after`)
    and, for an ok one, that no ok commit ended before ``began`` was requested after the
    end of (the coordinator stored that one later); an :data:`UNSURE` one may have been
    stored at any time."""
    stored_after = max((t for d in g.commits if d.partition == partition and d.outcome == "ok"
                        and d.ended < began and (t := requested_after(g, d, asynchronous)) is not None),
                       default=None)  # the latest request of an ok commit ended before began
    return [c for c in g.commits if c.partition == partition
            and ((t := requested_after(g, c, asynchronous)) is None or t < by)
            and (c.outcome in UNSURE or stored_after is None or stored_after <= c.ended)]


def starts(g: Group, asynchronous: bool = False) -> tuple[list[Start], list[Start]]:
    """Members' first reads of a partition after an assignment that are at none of the
    offsets they may have fetched (:func:`fetchable`, by the end of that read's poll):
    ``redelivery-below-commit`` where an ok commit of it had ended before the assignment
    and the read is below every offset fetchable (a member took over after the commit
    and read again what the group had committed past); ``reset-without-cause`` where the
    read is elsewhere, and not at or below the log start (``auto.offset.reset=earliest``,
    which a group that may have had no committed offset resets to)."""
    below: list[Start] = []
    elsewhere: list[Start] = []
    for o in g.owned:
        if o.first is None:
            continue
        x = o.first.offset
        cs = fetchable(g, o.partition, o.began, o.first.ended, asynchronous)
        committed = any(c.outcome == "ok" and c.ended < o.began for c in cs)
        if x in {c.offset for c in cs} or (not committed and x <= g.log_start.get(o.partition, 0)):
            continue
        start = Start(o, o.first, cs, min((c.invoked for c in cs), default=o.began))
        (below if committed and x < min(c.offset for c in cs) else elsewhere).append(start)
    return below, elsewhere


class Jump(NamedTuple):
    span: Ownership
    previous: int
    read: Read


def jumps(g: Group) -> list[Jump]:
    """``reset-without-cause`` within an assignment: a read of the partition that is not
    at the offset after the one the member read before it in that assignment (offsets
    are dense, docs/history.md), back or forward: its position moved, not by its reads."""
    return [Jump(o, previous, read) for o in g.owned for previous, read in o.jumps]


# -- the verdict ----------------------------------------------------------------------------


#: The guarantees of a ``__consumer_offsets`` partition where none are given: 3 replicas,
#: min.insync.replicas=1, no unclean election, eligible leader replicas on (Kafka 4.1 and
#: later); a stored run's come from its spec (:func:`~faultline.checkers.guarantees.offsets_config`).
OFFSETS_DEFAULT = GuaranteeConfig(acks="all", min_insync_replicas=1)


@dataclass(frozen=True, slots=True)
class OffsetsPartition:
    """The group's ``__consumer_offsets`` partition as a run's records know it: its number
    and the nodes holding it (None: not known), its states in the metadata log (None: no
    log, or one whose times witness no order, ``nemesis.skews_clocks``), and the guarantees
    its commits have (:func:`~faultline.checkers.guarantees.offsets_config`)."""

    partition: int | None = None
    nodes: frozenset[str] | None = None
    states: Sequence[MetadataState] | None = None
    config: GuaranteeConfig = OFFSETS_DEFAULT


class FaultWindows:
    """The run's faults as the group's anomalies are judged by them: per partition, those
    that bore on a span of time (:class:`~faultline.checkers.faults_seen.Windows`, in the
    permissive and the strict reading, over the actions begun and the metadata log's
    states logged before its end), and the data-destroying ones on the nodes holding a
    replica of the group's ``__consumer_offsets`` partition (``offsets.nodes``; None: not
    known, so any node may), unless the fault's own record says it cut nothing of that
    partition (:func:`cut_nothing`), where that partition's own faults could lose a commit
    (the committed-loss rule of its config, over its metadata states)."""

    def __init__(self, actions: Sequence[NemesisAction], topic: str, timeline: Timeline | None,
                 offsets: OffsetsPartition | None = None) -> None:
        self._actions, self._topic, self._timeline = actions, topic, timeline or {}
        self._offsets = offsets or OffsetsPartition()
        self._windows: dict[tuple[str, int, int | None, bool], Windows] = {}

    def permitted(self, config: GuaranteeConfig, anomaly: str, partition: int, since: int,
                  until: int | None) -> tuple[str | None, bool]:
        """Why the faults that bore on ``partition`` from ``since`` and began before
        ``until`` (None: up to the drain) permit ``anomaly`` (None: they do not), and whether
        only the permissive reading does (assumed)."""
        why, strict = (group_permitted(config, self._window(partition, until, s).at(since)).get(anomaly)
                       for s in (False, True))
        return why, why is not None and strict is None

    def destroyed(self, since: int, until: int,
                  replicas_kept: bool | None = False) -> tuple[str | None, bool]:
        """Why data-destroying faults that may have acted after ``since`` and began before
        ``until`` may have lost the group's commits (:func:`offsets_destroyed`; None: none
        could have), and whether only assumed ones do: a fault counts where it names a
        node holding a replica of the group's offsets partition, completed with no error;
        one that names no node, failed, never completed, or acted while those nodes are not
        known may have, an assumption; one whose own record says it cut nothing of that
        partition (:func:`cut_nothing`) did not. And only where that partition's own faults
        from ``since`` permit losing a committed record
        (:func:`~faultline.checkers.guarantees.committed_loss_reason` of its config, over its
        metadata states): None where no reading does, assumed where only the permissive one
        does. ``replicas_kept``: what the offsets partition's replicas say of the commit lost
        (:func:`~faultline.checkers.group_end.stored_before`): True, every one kept it, so
        nothing lost it; None, they disagree, so only assumed; False, none says so."""
        witnessed: set[str] = set()
        assumed: set[str] = set()
        holders, partition = self._offsets.nodes, self._offsets.partition
        for a in self._actions:
            f = family_of_fault(a.f)
            if (f is None or not f.destroys_data or a.skipped or a.start >= until
                    or (a.end is not None and a.end <= since)):
                continue
            named = {str(n) for n in nodes_of(a.value)}
            if holders is not None and named and not named & holders:
                continue  # no replica of the offsets partition was on its nodes
            if cut_nothing(a, partition):
                continue
            done = a.end is not None and a.error is None
            (witnessed if holders is not None and named and done else assumed).add(f.name)
        families = sorted(witnessed or assumed)
        if not families or replicas_kept is True:
            return None, False
        config = self._offsets.config
        loss, strict_loss = (committed_loss_reason(config, self._offsets_window(until, s).at(since))
                             for s in (False, True))
        if loss is None:
            return None, False
        return (offsets_destroyed(families, loss),
                replicas_kept is None or not witnessed or strict_loss is None)

    def excused(self, config: GuaranteeConfig, anomaly: str, partition: int, since: int,
                until: int, replicas_kept: bool | None = False) -> tuple[str | None, bool]:
        """Why the faults from ``since`` to ``until`` permit ``anomaly``, by the test topic's
        faults (:meth:`permitted`) or the group's commits lost with destroyed data
        (:meth:`destroyed`, given ``replicas_kept``), a witnessed reason before an assumed
        one; and whether only assumed ones do."""
        why, assumed = self.permitted(config, anomaly, partition, since, until)
        lost, lost_assumed = self.destroyed(since, until, replicas_kept)
        if why is None or (assumed and lost is not None and not lost_assumed):
            return lost, lost_assumed
        return why, assumed

    def _window(self, partition: int, until: int | None, strict: bool) -> Windows:
        return self._windows_of((self._topic, partition), self._timeline.get((self._topic, partition)),
                                until, strict)

    def _offsets_window(self, until: int | None, strict: bool) -> Windows:
        """The group's offsets partition's faults (every node's, its number not known)."""
        tp = (OFFSETS_TOPIC, -1 if self._offsets.partition is None else self._offsets.partition)
        return self._windows_of(tp, self._offsets.states, until, strict)

    def _windows_of(self, tp: tuple[str, int], states: Sequence[MetadataState] | None,
                    until: int | None, strict: bool) -> Windows:
        key = (*tp, until, strict)
        if key not in self._windows:
            begun = [a for a in self._actions if until is None or a.start < until]
            if states is not None and until is not None:  # what the log shows once it was over
                states = [st for st in states if st.time < until + CLOCK_MARGIN_NS]
            self._windows[key] = Windows(begun, tp, states, strict)
        return self._windows[key]


def cut_nothing(a: NemesisAction, partition: int | None) -> bool:
    """Whether ``a`` is a ``lose-unflushed`` whose own record says it cut nothing of
    ``__consumer_offsets`` partition ``partition`` (None: not known, so it cannot say): it
    names one node, completed with no error, and its ``truncated`` (docs/history.md), which
    lists every partition of that node of a topic other than the test topic's that lost
    records, lists none of that partition, or one whose log end did not fall."""
    truncated = None if partition is None else unflushed_cuts(a)
    if truncated is None:
        return False
    cut = truncated.get(f"{OFFSETS_TOPIC}/{partition}")
    if cut is None:
        return True
    old, new = (cut.get(k) if isinstance(cut, dict) else None for k in ("old_end", "new_end"))
    return type(old) is int and type(new) is int and new >= old


#: Why an instance is unknown, by the ``unknown`` entry's kind.
UNDECIDED = {
    "owner-end-unknown": "overlapping-owners whose first owner's process was retired: its closing "
                         "callbacks (a revoke, a lost) are not journaled, so when its ownership "
                         "ended is not known",
    "commit-request-unknown": "commit-backwards by an async or auto commit whose process polled no "
                              "record just below its offset: when its request was sent is not known "
                              "(its journaled invoke is only an upper bound)",
    "group-permitted-on-assumption": "group anomalies permitted only by faults assumed, not witnessed "
                                     "(the permissive reading of the faults in their window, or data "
                                     "destroyed by a fault that names no node, failed or never "
                                     "completed, or on nodes while which ones hold the group's "
                                     "__consumer_offsets partition is not known, or where its "
                                     "replicas disagree on whether they kept the commit lost)",
    "commit-unjournaled": "a group anomaly judged by the group's committed offset (commit-lost, "
                          "redelivery-below-commit, reset-without-cause) where a retired member commits "
                          "async or auto: the commits its client reported after it was retired are not "
                          "journaled, and one of them may have stored the offset seen",
}


def judge(g: Group, config: GuaranteeConfig, windows: FaultWindows, asynchronous: bool = False,
          *, end: Mapping[int, int] | str, static: bool = False, classic: bool = True,
          sends: SendTable | None = None, commits: CommitLogs | None = None) -> Result:
    """The ``group`` checker's Result: ``valid`` false where an instance the guarantees do
    not permit was seen, else unknown where an instance could not be decided
    (:data:`UNDECIDED`; each entry names its ``anomalies``), else true; the group
    anomalies' counts, examples (at most :data:`MAX_ANOMALY_EXAMPLES` each, a violation
    displacing the last permitted one kept; each says ``permitted`` as a boolean,
    ``permitted_by`` and ``unknown``), which were permitted (and why,
    ``permitted_reasons``) and which were violations, as the run's own
    (:func:`~faultline.checkers.stored.compose` adds them to the queue checker's);
    results.json's ``group``: that verdict, the same counts, permitted, reasons and
    violations, up to :data:`MAX_GROUP_EXAMPLES` examples each in the order seen (each
    says ``permitted``: the reason or null, and ``unknown``), and whether the group
    settled for :func:`unassigned_members` to be judged. ``asynchronous``: the members
    commit ``async`` or ``auto`` (:func:`requested_after`). ``end``: the group's committed
    offsets after the drain (partition -> offset, for :func:`commits_lost`), or why they
    are not known, which leaves the verdict at most unknown (``group-end-unknown``).
    ``static``: the members join with a ``group.instance.id`` (``consumer.static``), the one
    way another member can fence a member for good (:data:`OVERLAP_AFTER_FENCED`);
    ``classic``: the classic protocol, whose generations are the group's (comparable
    across members), not KIP-848's member epochs (:func:`stale_assignment`); ``sends``:
    the history's sends, which bound ``lost-to-group``'s window (:func:`lost_window`);
    ``commits``: the commit records in the logs of the replicas of the group's offsets
    partition, which refute destroyed data as the cause of ``commit-backwards`` and
    ``commit-lost`` where every one kept the higher commit before the lower one (or, for
    ``commit-lost``, to the end: :func:`~faultline.checkers.group_end.stored_before`,
    :func:`~faultline.checkers.group_end.kept_to_end`)."""
    counts = dict.fromkeys(GROUP_ANOMALIES, 0)
    examples: dict[str, list[dict[str, Any]]] = {a: [] for a in GROUP_ANOMALIES}
    own: dict[str, list[dict[str, Any]]] = {a: [] for a in GROUP_ANOMALIES}  # group's, as seen
    permitted: dict[str, str] = {}
    violations: set[str] = set()
    undecided: dict[str, dict[str, int]] = {}  # kind -> anomaly -> instances

    def add(anomaly: str, example: dict[str, Any], why: str | None = None,
            unknown: str | None = None) -> None:
        counts[anomaly] += 1
        if unknown is not None:
            per = undecided.setdefault(unknown, {})
            per[anomaly] = per.get(anomaly, 0) + 1
        elif why is None:
            violations.add(anomaly)
        else:
            permitted.setdefault(anomaly, why)
        if len(own[anomaly]) < MAX_GROUP_EXAMPLES:
            own[anomaly].append({**example, "permitted": why, "unknown": unknown})
        kept, violation = examples[anomaly], why is None and unknown is None
        if len(kept) < MAX_ANOMALY_EXAMPLES or (violation and displace_permitted(kept)):
            kept.append({**example, "permitted": why is not None, "permitted_by": why, "unknown": unknown})

    found, unbounded = commits_backwards(g, asynchronous)
    for b, kind in [*((b, None) for b in found), *((b, "commit-request-unknown") for b in unbounded)]:
        why, assumed = windows.excused(config, "commit-backwards", b.commit.partition, b.earlier.invoked,
                                       b.commit.invoked, stored_before(commits, b.commit.partition,
                                                                       b.earlier.offset, b.commit.offset))
        add("commit-backwards", {
            "partition": b.commit.partition, "process": b.commit.process, "offset": b.commit.offset,
            "time": b.commit.invoked, "earlier_offset": b.earlier.offset,
            "earlier_process": b.earlier.process, "earlier_ended": b.earlier.ended},
            why, kind or ("group-permitted-on-assumption" if assumed else None))
    for x in commits_beyond_polled(g):
        add("commit-beyond-polled", {
            "partition": x.commit.partition, "process": x.commit.process, "offset": x.commit.offset,
            "time": x.commit.invoked, "outcome": x.commit.outcome, "polled": x.polled})
    paused = pauses(g)
    for o in overlapping_owners(g):
        retired = o.first.how == "end" and o.first.process in g.retired
        fenced = retired and static and o.first.process in g.fenced
        asleep = retired and paused_past_session(g, o, paused)
        add("overlapping-owners", {
            "partition": o.first.partition, "first": _span(o.first), "second": _span(o.second)},
            OVERLAP_AFTER_LOST if o.first.how == "lost" or (classic and stale_assignment(o))
            else OVERLAP_AFTER_FENCED if fenced else OVERLAP_AFTER_PAUSE if asleep else None,
            "owner-end-unknown" if retired and not fenced and not asleep else None)
    unreceived = lost_to_group(g)
    had = received_at(g, {(u.partition, u.offset) for u in unreceived}) if unreceived else {}
    for u in unreceived:
        since, until = lost_window(u, had.get((u.partition, u.offset), []), sends)
        why, assumed = windows.permitted(config, "lost-to-group", u.partition, since, until)
        add("lost-to-group", {
            "partition": u.partition, "offset": u.offset, "value": u.value,
            "committed": u.committed.offset, "committed_by": u.committed.process,
            "time": u.committed.ended}, why, "group-permitted-on-assumption" if assumed else None)
    for m in unassigned_members(g):
        add("unassigned-member", {"process": m.process, "time": m.time, "unowned": m.unowned})
    unjournaled = asynchronous and bool(g.retired)
    for lost in [] if isinstance(end, str) else commits_lost(g, end, asynchronous):
        replicas_kept = kept_to_end(commits, lost.partition, lost.last.offset, lost.committed)
        why, assumed = windows.destroyed(lost.last.invoked, 2**63, replicas_kept)
        add("commit-lost", {
            "partition": lost.partition, "committed": lost.committed, "offset": lost.last.offset,
            "process": lost.last.process, "time": lost.last.ended},
            why, "group-permitted-on-assumption" if assumed else
            "commit-unjournaled" if unjournaled and why is None else None)
    below, elsewhere = starts(g, asynchronous)
    for anomaly, instances in (("redelivery-below-commit", below), ("reset-without-cause", elsewhere)):
        for st in instances:
            why, assumed = windows.excused(config, anomaly, st.span.partition, st.since, st.read.ended)
            retired = asynchronous and any(t < st.read.ended for t in g.retired.values())
            add(anomaly, {**_read(st.span, st.read), "previous": None,
                          "committed": sorted({c.offset for c in st.fetchable})},
                why, "group-permitted-on-assumption" if assumed else
                "commit-unjournaled" if why is None and retired else None)
    for j in jumps(g):
        why, assumed = windows.permitted(config, "reset-without-cause", j.span.partition, j.span.began,
                                         j.read.ended)
        add("reset-without-cause", {**_read(j.span, j.read), "previous": j.previous, "committed": None},
            why, "group-permitted-on-assumption" if assumed else None)
    settled = settled_at(g) is not None
    valid: Valid = False if violations else UNKNOWN if undecided or isinstance(end, str) else True
    unknown = [{"kind": kind, "count": sum(per.values()), "affects_verdict": True,
                "anomalies": list(per), "why": UNDECIDED[kind]} for kind, per in undecided.items()]
    if isinstance(end, str):
        unknown.append({"kind": "group-end-unknown", "count": 1, "affects_verdict": True,
                        "why": f"commit-lost not judged: {end}"})
    if not settled:
        unknown.append({
            "kind": "group-not-settled", "affects_verdict": False,
            "why": f"no member lived {QUIET_NS // 10**9} s past the last fault, retirement or new "
                   "member, so members without an assignment (unassigned-member) were not judged"})
    kinds, allowed = sorted(violations), sorted(permitted)
    return Result(valid=valid, anomaly_counts=counts, anomalies={a: e for a, e in examples.items() if e},
                  permitted=allowed, violations=kinds, unknown=unknown,
                  extra={"group": {"valid": valid, "anomaly_counts": counts,
                                   "anomalies": {a: e for a, e in own.items() if e}, "permitted": allowed,
                                   "permitted_reasons": permitted, "violations": kinds, "settled": settled},
                         "permitted_reasons": permitted})


def _read(o: Ownership, r: Read) -> dict[str, Any]:
    return {"partition": o.partition, "process": o.process, "offset": r.offset, "time": r.ended,
            "assigned": o.began}


def _span(o: Ownership) -> dict[str, Any]:
    return {"process": o.process, "member": o.member, "began": o.began, "ended": o.ended, "how": o.how}
