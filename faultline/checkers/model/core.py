"""State and steps of the reference model: one partition's replication protocol.

The model is a deterministic, discrete-step simulation written from the mechanics
of the five articles the project started from ("the seeds", numbered 000 to 004: LEO/HW,
ISR shrink and expand, HW checkpoints, leader epochs) and docs/design.md's "Reference
model" section, for Kafka 4.x in KRaft mode.

Contracts:

- ``apply(state, step)`` mutates ``state`` in place and returns a one-line note of
  what happened. Same state and same step give the same result: no wall clock, no
  randomness anywhere in this module.
- Time is the integer ``state.now``; it advances only on a ``tick`` step. At each
  tick the controller fences brokers it cannot reach (the session timeout is one
  tick), leaders run the ISR expiration check every ``max(1, lag_ticks // 2)``
  ticks, and every running replica checkpoints its HW every ``checkpoint_ticks``.
- Replica ids are ``1..replication_factor``; replica 1 leads at epoch 0. Node
  ``0`` is the controller (a KRaft quorum that never fails in this model).
- Nothing is fsynced per write: ``crash`` keeps the log (page cache),
  ``lose-unflushed`` drops what lies above the replica's flushed offset (which
  moves only on ``flush`` and on a graceful ``stop``), ``wipe`` empties the log
  and every checkpoint.

Simplifications, stated once: a fetch is one step (request and response), the
response carries the leader's HW as read *before* the leader processes the fetch
offset (``ModelConfig.follower_hw``: "modern", from Kafka's ``Partition.fetchRecords``;
"seed" replays seed 000's figures, where it carries the HW after) so a follower's HW
trails the leader's by a round; AlterPartition is atomic. Without ELR an ISR never
shrinks below its last member (Kafka's controller fences the last ISR member without
removing it: the partition shows "Leader: none" with that ISR, until it returns).

Sources of the rules the seeds do not cover: KRaft fencing and registration (KIP-631:
a broker that misses its heartbeats for the session timeout is fenced, out of every
ISR; a restarted broker registers anew, fenced until it catches up with the metadata);
a fenced broker does not hold the HW back (KIP-841); controlled shutdown (``stop``:
KIP-631's ``BrokerHeartbeatRequest.wantShutDown``, the controller moves leadership and
shrinks the ISR before the broker exits); the recovery point (``flush``,
``lose-unflushed``: Kafka's ``recovery-point-offset-checkpoint``, seed 000; what lies
above it is in the page cache only, which a machine crash loses, seed 003's "no fsync");
leader-epoch truncation across several epochs (KIP-279, after KIP-101 of seed 000).

KIP-966 eligible leader replicas (``ModelConfig.elr``; ``controller.py``), as read
in Kafka 4.x's source:

- HW: the leader does not advance its HW while its ISR is smaller than
  min(min.insync.replicas, RF) (``Partition.maybeIncrementLeaderHW`` returns early
  on ``isUnderMinIsr``; ``effectiveMinIsr``). In 4.x this check is unconditional
  (the "strict min ISR" rule, KAFKA-15583), not tied to the ELR feature; the model
  applies it with ``elr`` only, so ``elr=False`` keeps modelling the older broker.
- ELR upkeep (``PartitionChangeBuilder.maybePopulateTargetElr``, run on every
  partition change: AlterPartition shrinks and expands, fencing, controlled
  shutdown, re-registration): when the new ISR reaches the effective min ISR the
  ELR is cleared; otherwise ELR := (ELR | old ISR) - new ISR - replicas with an
  unclean shutdown. So the ELR never holds an ISR member, and a replica that
  leaves the ISR while it is below min ISR (fenced, shrunk out by the leader,
  controlled shutdown) joins it. With ELR on the ISR may become empty
  (``build``: "If ELR is enabled, the ISR is allowed to be empty"), so fencing
  the last ISR member moves it to the ELR.
- Election (``electAnyLeader`` / ``isValidNewLeader``): an unfenced ISR member;
  if the ISR is empty, an unfenced ELR member, which becomes the ISR and leaves
  the ELR (``tryElection``); if ISR and ELR are both empty, the last known
  leader when it is unfenced (``canElectLastKnownLeader``: ``lastKnownElr`` holds
  the leader of the moment the ISR became empty, ``maybeUpdateLastKnownLeader``;
  the election counts as unclean but needs no unclean setting); then, with
  unclean.leader.election.enable, any unfenced replica. An unclean election
  sets ISR = {leader} and clears the ELR (``maybeUpdateRecordElr``).
- Unclean shutdown (``ClusterControlManager.registerBroker``: a new incarnation
  whose ``previousBrokerEpoch``, read from the clean-shutdown file, differs from
  the stored broker epoch; ``ReplicationControlManager.handleBrokerShutdown`` with
  ``isCleanShutdown=false``): the broker leaves the ISR and the ELR and is not an
  acceptable leader for that change. Only a graceful ``stop`` writes the file, so
  ``crash`` + ``restart``, ``wipe`` and ``lose-unflushed`` all restart uncleanly,
  even when (``crash``) the log survived intact. A clean restart leaves the ELR
  as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from faultline.checkers.model import controller

Acks = Literal["0", "1", "all"]
Truncation = Literal["leader-epoch", "hw"]
FollowerHw = Literal["modern", "seed"]
CONTROLLER = 0
_NEVER = -(10**6)


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """One partition's configuration, in model terms (ticks for times)."""

    replication_factor: int = 3
    acks: Acks = "all"
    min_insync: int = 2
    unclean: bool = False
    truncation: Truncation = "leader-epoch"
    lag_ticks: int = 2
    checkpoint_ticks: int = 1
    # KRaft refuses a restarted broker's registration while its old session lives,
    # so the old incarnation is fenced (dropped from the ISR) first. False gives the
    # ZooKeeper-era quick restart that KIP-101's first case assumes.
    fence_on_restart: bool = True
    # KIP-966 eligible leader replicas (see the module docstring). Off by default so
    # the seeds' scenarios keep their pre-KIP-966 step tables; the Kafka the harness
    # tests (4.1 and later) runs with it on.
    elr: bool = False
    # Which leader HW a fetch response carries. "modern": the HW read before the leader
    # processes the fetch offset, as Kafka's ``Partition.fetchRecords`` reads the log
    # (``readFromLocalLog``) and only then updates the follower's state
    # (``updateFollowerFetchState``, which may move the HW): the follower's HW trails by
    # a round. "seed": the HW after it, as seed 000's figures draw it (the leader
    # updates the remote LEO and its HW, then answers with the new HW).
    follower_hw: FollowerHw = "modern"

    def __post_init__(self) -> None:
        if self.replication_factor < 1:
            raise ValueError("replication_factor must be >= 1")
        if self.acks not in ("0", "1", "all"):
            raise ValueError(f"acks must be '0', '1' or 'all', not {self.acks!r}")
        if self.min_insync < 1:
            raise ValueError("min_insync must be >= 1")
        if self.truncation not in ("leader-epoch", "hw"):
            raise ValueError("truncation must be 'leader-epoch' or 'hw'")
        if self.follower_hw not in ("modern", "seed"):
            raise ValueError("follower_hw must be 'modern' or 'seed'")
        if self.lag_ticks < 1 or self.checkpoint_ticks < 1:
            raise ValueError("lag_ticks and checkpoint_ticks must be >= 1")


_STEP_RE = re.compile(r"^([a-z-]+)(?:\((\d+)(?:,\s*(\d+))?\))?$")


@dataclass(frozen=True, slots=True)
class Step:
    """One step: ``kind`` with up to two replica arguments, printed as ``crash(1)``."""

    kind: str
    a: int | None = None
    b: int | None = None

    def __str__(self) -> str:
        if self.a is None:
            return self.kind
        if self.b is None:
            return f"{self.kind}({self.a})"
        return f"{self.kind}({self.a},{self.b})"

    @staticmethod
    def parse(text: str) -> Step:
        """Parse ``kind``, ``kind(a)`` or ``kind(a,b)``; ValueError if malformed."""
        m = _STEP_RE.match(text.strip())
        if m is None or m.group(1) not in STEP_KINDS:
            raise ValueError(f"not a step: {text!r} (kinds: {', '.join(sorted(STEP_KINDS))})")
        a = int(m.group(2)) if m.group(2) else None
        b = int(m.group(3)) if m.group(3) else None
        return Step(m.group(1), a, b)


# step kind -> number of replica arguments
STEP_KINDS: dict[str, int] = {
    "produce": 0, "produce-to": 1, "fetch": 1, "tick": 0, "flush": 1,
    "crash": 1, "restart": 1, "stop": 1, "pause": 1, "resume": 1,
    "isolate": 1, "cut": 2, "cut-ctrl": 1, "heal": 0,
    "wipe": 1, "lose-unflushed": 1, "toxic-request": 0, "toxic-reply": 0,
}
#: Step kinds that fault the replicas they name (both of ``cut``'s). With lag shrinks
#: (a follower the leader drops for not keeping up) they make up ``State.faulted``: an
#: untouched follower keeps fetching, so only one of these takes it out of sync.
FAULT_TOUCHES: frozenset[str] = frozenset(
    ("crash", "stop", "pause", "wipe", "lose-unflushed", "isolate", "cut", "cut-ctrl"))


@dataclass(slots=True)
class Remote:
    """The leader's view of one follower (Kafka's remote replica state)."""

    leo: int = -1
    last_caught_up: int = _NEVER
    last_fetch_time: int = _NEVER
    last_fetch_leader_leo: int = -1


@dataclass(slots=True)
class Replica:
    """One replica: disk state, in-memory state, and its view of the metadata."""

    rid: int
    log: tuple[tuple[int, int], ...] = ()  # (leader epoch, value); offset = index
    hw: int = 0
    epochs: tuple[tuple[int, int], ...] = ()  # leader-epoch-checkpoint: (epoch, start offset)
    ckpt_hw: int = 0  # replication-offset-checkpoint
    flushed: int = 0  # recovery point: records below it survive lose-unflushed
    up: bool = True
    paused: bool = False
    leader: int | None = None  # the leader it believes in
    epoch: int = -1  # the leader epoch it knows
    isr: frozenset[int] = frozenset()
    epoch_start: int = 0  # as leader: start offset of its epoch
    must_truncate: bool = False  # became follower; reconcile with the leader on first fetch
    remote: dict[int, Remote] = field(default_factory=dict)
    clean_shutdown: bool = False  # down after a graceful stop: its restart registers as clean

    @property
    def leo(self) -> int:
        return len(self.log)

    @property
    def is_leader(self) -> bool:
        return self.up and self.leader == self.rid

    def clone(self) -> Replica:
        return Replica(self.rid, self.log, self.hw, self.epochs, self.ckpt_hw, self.flushed, self.up,
                       self.paused, self.leader, self.epoch, self.isr, self.epoch_start, self.must_truncate,
                       {k: Remote(r.leo, r.last_caught_up, r.last_fetch_time, r.last_fetch_leader_leo)
                        for k, r in self.remote.items()}, self.clean_shutdown)


@dataclass(slots=True)
class Pending:
    """An acks=all produce waiting for the HW: value at offset on leader rid in epoch."""

    value: int
    offset: int
    rid: int
    epoch: int


@dataclass(slots=True)
class State:
    """The whole model: replicas, controller, network, and what clients saw."""

    config: ModelConfig
    replicas: dict[int, Replica]
    now: int = 0
    c_leader: int | None = 1
    c_epoch: int = 0
    c_isr: frozenset[int] = frozenset()
    c_elr: frozenset[int] = frozenset()  # eligible leader replicas (config.elr); never meets c_isr
    c_last_leader: int | None = None  # Kafka's lastKnownElr: the leader when the ISR became empty
    fenced: frozenset[int] = frozenset()
    cuts: frozenset[frozenset[int]] = frozenset()  # links down; node 0 is the controller
    next_value: int = 1
    acked: dict[int, int] = field(default_factory=dict)  # value -> offset (-1: acks=0)
    failed: frozenset[int] = frozenset()  # certainly not written
    indeterminate: frozenset[int] = frozenset()
    pending: list[Pending] = field(default_factory=list)
    exposed: frozenset[tuple[int, int]] = frozenset()  # (offset, value) readable below a leader's HW
    data_lost: frozenset[int] = frozenset()  # replicas a wipe or lose-unflushed destroyed data on
    # replicas a fault step touched or the leader shrank out of the ISR by lag (see FAULT_TOUCHES)
    faulted: frozenset[int] = frozenset()
    record_exposures: bool = True

    def clone(self) -> State:
        return State(self.config, {k: r.clone() for k, r in self.replicas.items()}, self.now,
                     self.c_leader, self.c_epoch, self.c_isr, self.c_elr, self.c_last_leader, self.fenced,
                     self.cuts, self.next_value, dict(self.acked), self.failed, self.indeterminate,
                     [Pending(p.value, p.offset, p.rid, p.epoch) for p in self.pending],
                     self.exposed, self.data_lost, self.faulted, self.record_exposures)

    def key(self) -> tuple[object, ...]:
        """A hashable summary for deduplicating states in exploration.

        Absolute time is folded into its phase and capped ages: two states that
        differ only in how long ago something happened beyond the lag are alike.
        ``faulted`` is left out: a search that bounds it adds it to the key.
        """
        cfg = self.config
        cap = cfg.lag_ticks + 2
        period = _check_period(cfg) * cfg.checkpoint_ticks

        def age(t: int) -> int:
            return min(self.now - t, cap)

        reps = tuple(
            (r.log, r.hw, r.epochs, r.ckpt_hw, r.flushed, r.up, r.paused, r.leader, r.epoch, r.isr,
             r.epoch_start, r.must_truncate, r.clean_shutdown,
             tuple((k, m.leo, age(m.last_caught_up), age(m.last_fetch_time), m.last_fetch_leader_leo)
                   for k, m in sorted(r.remote.items())) if r.leader == r.rid else ())
            for r in self.replicas.values())
        return (reps, self.now % period, self.c_leader, self.c_epoch, self.c_isr, self.c_elr,
                self.c_last_leader, self.fenced, self.cuts,
                tuple(sorted(self.acked.items())), self.failed, self.indeterminate,
                tuple((p.value, p.offset, p.rid, p.epoch) for p in self.pending), self.exposed,
                self.data_lost)


def initial_state(config: ModelConfig) -> State:
    """All replicas up and empty, replica 1 leading epoch 0 with the full ISR."""
    ids = range(1, config.replication_factor + 1)
    isr = frozenset(ids)
    st = State(config, {i: Replica(i) for i in ids}, c_isr=isr)
    for i in ids:
        _apply_metadata(st, st.replicas[i])
    return st


def _check_period(cfg: ModelConfig) -> int:
    return max(1, cfg.lag_ticks // 2)


# ---------------------------------------------------------------- network


def _linked(st: State, a: int, b: int) -> bool:
    return frozenset((a, b)) not in st.cuts


def _serving(r: Replica) -> bool:
    return r.up and not r.paused


def _reaches_controller(st: State, r: Replica) -> bool:
    return _serving(r) and _linked(st, r.rid, CONTROLLER)


# ---------------------------------------------------------------- leader epochs


def end_offset_for(epochs: tuple[tuple[int, int], ...], leo: int, requested: int) -> tuple[int, int]:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``: (epoch, end offset), (-1, -1) if undefined."""
    if requested < 0 or not epochs:
        return (-1, -1)
    if requested == epochs[-1][0]:
        return (requested, leo)
    higher = next((e for e in epochs if e[0] > requested), None)
    if higher is None:
        return (-1, -1)
    floor = [e for e in epochs if e[0] <= requested]
    return (floor[-1][0] if floor else requested, higher[1])


def _truncate(r: Replica, offset: int) -> None:
    """Truncate the log and the epoch cache (Kafka's truncateFromEnd: entries starting at or above)."""
    r.epochs = tuple(e for e in r.epochs if e[1] < offset)
    if offset >= r.leo:
        return
    r.log = r.log[:offset]
    r.hw = min(r.hw, offset)
    r.flushed = min(r.flushed, offset)


def _append(r: Replica, records: tuple[tuple[int, int], ...]) -> None:
    for ep, _ in records:
        if not r.epochs or ep > r.epochs[-1][0]:
            r.epochs = (*r.epochs, (ep, r.leo))
        r.log = (*r.log, (ep, _))


def _reconcile_by_epoch(f: Replica, leader: Replica) -> int:
    """OffsetsForLeaderEpoch rounds (KIP-101, KIP-279); returns the truncation offset."""
    target = f.leo
    for _ in range(len(f.epochs) + 1):  # each intermediate round drops at least one epoch entry
        if not (f.log and f.epochs):
            break
        asked = f.epochs[-1][0]
        l_epoch, l_end = end_offset_for(leader.epochs, leader.leo, asked)
        if l_end < 0:
            return min(f.hw, f.leo)
        own_epoch, own_end = end_offset_for(f.epochs, f.leo, l_epoch)
        if own_end < 0:
            return min(l_end, f.leo)
        if own_epoch != l_epoch:
            target = min(own_end, f.leo)
            _truncate(f, target)
            continue
        return min(l_end, own_end, f.leo)
    return target


# ---------------------------------------------------------------- metadata and HW


def _apply_metadata(st: State, r: Replica) -> None:
    """The broker learns the controller's (leader, epoch, ISR): becomes leader or follower."""
    if st.c_epoch > r.epoch:
        r.epoch, r.leader, r.isr = st.c_epoch, st.c_leader, st.c_isr
        if st.c_leader == r.rid:
            _become_leader(st, r)
        else:
            r.remote = {}
            if st.c_leader is not None:
                if st.config.truncation == "hw":
                    _truncate(r, r.hw)  # pre-KIP-101: truncate to the HW on becoming follower
                else:
                    r.must_truncate = True
    elif st.c_epoch == r.epoch and r.isr != st.c_isr:
        r.isr = st.c_isr
        if r.leader == r.rid:
            _maybe_advance_hw(st, r)


def _become_leader(st: State, r: Replica) -> None:
    r.must_truncate = False
    if not r.epochs or r.epochs[-1][0] < r.epoch:
        r.epochs = (*r.epochs, (r.epoch, r.leo))
    r.epoch_start = r.epochs[-1][1]
    r.remote = {i: Remote(last_caught_up=st.now if i in r.isr else _NEVER)
                for i in st.replicas if i != r.rid}
    _maybe_advance_hw(st, r)


def _push_metadata(st: State) -> None:
    for r in st.replicas.values():
        if _reaches_controller(st, r):
            _apply_metadata(st, r)


def _maybe_advance_hw(st: State, r: Replica) -> None:
    """Leader HW = max(old HW, min LEO over the ISR and recently caught-up replicas).

    A fenced broker is not ISR-eligible (KIP-841), so it does not hold the HW back.
    With ELR the HW does not move while the leader's ISR is below the effective min
    ISR (``Partition.maybeIncrementLeaderHW``'s ``isUnderMinIsr`` check).
    """
    if st.config.elr and len(r.isr) < controller.effective_min_isr(st.config):
        return
    lag = st.config.lag_ticks
    leos = [r.leo]
    for i, m in r.remote.items():
        if i in r.isr or (st.now - m.last_caught_up <= lag and i not in st.fenced):
            leos.append(m.leo)
    r.hw = max(r.hw, min(leos))


# ---------------------------------------------------------------- controller


def _fence(st: State, rid: int, elect: bool = True) -> str:
    """``controller.fence``, then the brokers learn the new registration."""
    note = controller.fence(st, rid, elect)
    _push_metadata(st)
    return note


def _controller_tick(st: State) -> list[str]:
    notes: list[str] = []
    for rid, r in st.replicas.items():
        if rid not in st.fenced and not _reaches_controller(st, r):
            notes.append(_fence(st, rid, elect=False))
    for rid, r in st.replicas.items():
        if rid in st.fenced and _reaches_controller(st, r):
            st.fenced = st.fenced - {rid}
            notes.append(f"controller unfences {rid}")
    if st.c_leader is None or st.c_leader in st.fenced:
        elected = controller.elect(st)
        if elected:
            notes.append(elected)
    _push_metadata(st)
    return notes


def _alter_isr(st: State, leader: Replica, new_isr: frozenset[int]) -> bool:
    """AlterPartition: accepted only from the current leader at the current epoch."""
    if not (_reaches_controller(st, leader) and st.c_leader == leader.rid and st.c_epoch == leader.epoch):
        return False
    controller.change_isr(st, new_isr)
    _push_metadata(st)
    return True


# ---------------------------------------------------------------- client side


def _resolve_pending(st: State) -> list[str]:
    keep: list[Pending] = []
    notes: list[str] = []
    for p in st.pending:
        r = st.replicas[p.rid]
        if not r.up or r.leader != r.rid or r.epoch != p.epoch:
            st.indeterminate = st.indeterminate | {p.value}
            notes.append(f"send {p.value}: leader {p.rid} gone, outcome unknown")
        elif r.hw > p.offset:
            if len(r.isr) >= st.config.min_insync:
                st.acked[p.value] = p.offset
                notes.append(f"send {p.value} acked at offset {p.offset}")
            else:  # written, but the client can't tell: it must count as info, never fail
                st.indeterminate = st.indeterminate | {p.value}
                notes.append(f"send {p.value}: NOT_ENOUGH_REPLICAS_AFTER_APPEND")
        else:
            keep.append(p)
    st.pending = keep
    return notes


def _expose(st: State) -> None:
    for r in st.replicas.values():
        if r.leader == r.rid and _serving(r) and r.hw:
            new = {(o, r.log[o][1]) for o in range(r.hw)}
            if not new <= st.exposed:
                st.exposed = st.exposed | new


def _produce(st: State, target: int | None, lost: str = "") -> str:
    cfg = st.config
    value = st.next_value
    st.next_value += 1
    rid = st.c_leader if target is None else target
    r = st.replicas.get(rid) if rid is not None else None
    if r is None or not r.up:
        st.failed = st.failed | {value}
        return f"send {value}: no leader reachable, fails"
    if lost == "request" or r.paused:
        if cfg.acks == "0":
            st.acked[value] = -1
            return f"send {value}: request lost on the way to {rid}; acks=0 reports ok"
        st.indeterminate = st.indeterminate | {value}
        return f"send {value}: request to {rid} times out"
    if r.leader != r.rid:
        if cfg.acks == "0":
            st.acked[value] = -1
            return f"send {value}: {rid} is not leader, drops it; acks=0 reports ok"
        st.failed = st.failed | {value}
        return f"send {value}: NOT_LEADER_OR_FOLLOWER from {rid}"
    if cfg.acks == "all" and len(r.isr) < cfg.min_insync:
        st.failed = st.failed | {value}
        return f"send {value}: NOT_ENOUGH_REPLICAS (ISR {_fmt_set(r.isr)} < {cfg.min_insync})"
    offset = r.leo
    _append(r, ((r.epoch, value),))
    _maybe_advance_hw(st, r)
    where = f"{rid} appends {value} at offset {offset}"
    if lost == "reply":
        st.indeterminate = st.indeterminate | {value}
        return f"send {value}: {where}; reply lost"
    if cfg.acks == "0":
        st.acked[value] = -1
        return f"send {value}: {where}; acks=0 ok"
    if cfg.acks == "1":
        st.acked[value] = offset
        return f"send {value}: {where}; acks=1 ok"
    st.pending.append(Pending(value, offset, r.rid, r.epoch))
    return f"send {value}: {where}; waits for HW"


def _fmt_set(s: frozenset[int]) -> str:
    return "{" + ",".join(str(i) for i in sorted(s)) + "}"


# ---------------------------------------------------------------- replication


def _fetch(st: State, fid: int) -> str:
    f = st.replicas[fid]
    if not _serving(f) or f.leader is None or f.leader == fid:
        return f"{fid} does not fetch"
    leader = st.replicas[f.leader]
    if not _serving(leader) or not _linked(st, fid, leader.rid):
        return f"{fid} cannot reach {leader.rid}"
    if leader.leader != leader.rid or leader.epoch != f.epoch:
        return f"{fid} fetch rejected by {leader.rid} (epoch {leader.epoch} vs {f.epoch})"
    notes: list[str] = []
    if f.must_truncate:
        leo = f.leo
        to = _reconcile_by_epoch(f, leader)
        f.must_truncate = False
        if to < f.leo:
            _truncate(f, to)
        if f.leo < leo:
            notes.append(f"{fid} truncates to {f.leo} by leader epoch")
        elif leo:
            notes.append(f"{fid} keeps offsets below {leo} by leader epoch")
    if st.config.truncation == "hw" and f.leo > leader.leo:
        notes.append(f"{fid} LEO {f.leo} > leader LEO, truncates to {leader.leo}")
        _truncate(f, leader.leo)
    offset = f.leo
    if offset > leader.leo:  # cannot happen after reconciliation; kept as a guard
        return f"{fid} fetch offset {offset} out of range"
    n_before = len(notes)
    response_hw = leader.hw  # "modern": read before the leader processes this fetch offset
    records = leader.log[offset:]
    m = leader.remote.setdefault(fid, Remote())
    if offset >= leader.leo:
        m.last_caught_up = st.now
    elif offset >= m.last_fetch_leader_leo:
        m.last_caught_up = max(m.last_caught_up, m.last_fetch_time)
    m.leo, m.last_fetch_leader_leo, m.last_fetch_time = offset, leader.leo, st.now
    if fid not in leader.isr and offset >= leader.hw and offset >= leader.epoch_start \
            and fid not in st.fenced and _alter_isr(st, leader, leader.isr | {fid}):
        notes.append(f"ISR expands to {_fmt_set(st.c_isr)}")
    _maybe_advance_hw(st, leader)
    if st.config.follower_hw == "seed":
        response_hw = leader.hw
    _append(f, records)
    # follower HW = min(leader HW, own LEO); like Kafka's maybeUpdateHighWatermark it never moves back
    f.hw = max(f.hw, min(response_hw, f.leo))
    got = f"{len(records)} record(s)" if records else "nothing"
    notes.insert(n_before, f"{fid} fetches at {offset}: {got}, HW {f.hw}")
    return "; ".join(notes)


def _tick(st: State) -> str:
    st.now += 1
    notes = _controller_tick(st)
    cfg = st.config
    if st.now % _check_period(cfg) == 0:
        for r in st.replicas.values():
            if r.leader != r.rid or not _serving(r):
                continue
            out = {i for i in r.isr - {r.rid}
                   if r.remote[i].leo != r.leo and st.now - r.remote[i].last_caught_up > cfg.lag_ticks}
            if out and _alter_isr(st, r, r.isr - out):
                st.faulted = st.faulted | out
                notes.append(f"{r.rid} shrinks ISR to {_fmt_set(st.c_isr)} (lag)")
                _maybe_advance_hw(st, r)
    if st.now % cfg.checkpoint_ticks == 0:
        for r in st.replicas.values():
            if _serving(r):
                r.ckpt_hw = r.hw
    return f"t={st.now}" + ("; " + "; ".join(notes) if notes else "")


# ---------------------------------------------------------------- faults


def _go_down(r: Replica) -> None:
    r.up, r.paused, r.clean_shutdown = False, False, False
    r.leader, r.epoch, r.isr, r.remote, r.must_truncate = None, -1, frozenset(), {}, False


def _restart(st: State, r: Replica, how: str) -> str:
    """The broker comes back: the old incarnation is fenced (``fence_on_restart``); with
    ELR, a restart not preceded by a graceful stop registers as an unclean shutdown."""
    notes = [how]
    if r.rid not in st.fenced and st.config.fence_on_restart:
        notes.append(_fence(st, r.rid))
    if st.config.elr and not r.clean_shutdown:
        dropped = controller.unclean_shutdown(st, r.rid)
        if dropped:
            notes.append(dropped)
            _push_metadata(st)
    r.clean_shutdown = False
    r.up, r.paused = True, False
    r.hw = min(r.ckpt_hw, r.leo)
    leo = r.leo
    if _reaches_controller(st, r):
        _apply_metadata(st, r)
    if r.leo < leo:
        notes.append(f"{r.rid} truncates to its HW {r.leo} as follower")
    return "; ".join(notes)


def _crash_and_restart(st: State, r: Replica, kind: str) -> str:
    _go_down(r)
    st.data_lost = st.data_lost | {r.rid}
    if kind == "wipe":
        r.log, r.epochs, r.hw, r.ckpt_hw, r.flushed = (), (), 0, 0, 0
        return _restart(st, r, f"{r.rid} wiped (log and checkpoints gone), restarts")
    lost = r.leo - r.flushed
    _truncate(r, r.flushed)
    return _restart(st, r, f"{r.rid} loses {lost} unflushed record(s), restarts")


def _stop(st: State, r: Replica) -> str:
    """Graceful stop: leadership moved away and the ISR shrunk first, then flush and exit."""
    notes = [f"{r.rid} controlled shutdown"]
    if r.rid not in st.fenced:
        notes.append(_fence(st, r.rid))
    r.flushed = r.leo
    r.ckpt_hw = r.hw
    _go_down(r)
    r.clean_shutdown = True
    return "; ".join(notes)


def apply(st: State, step: Step) -> str:
    """Apply one step to ``st`` (in place); return what happened. ValueError on a bad step."""
    kind, a, b = step.kind, step.a, step.b
    if kind not in STEP_KINDS:
        raise ValueError(f"unknown step kind {kind!r}")
    nargs = STEP_KINDS[kind]
    ids = [x for x in (a, b) if x is not None]
    if len(ids) != nargs or any(x not in st.replicas for x in ids):
        raise ValueError(f"{step}: needs {nargs} replica id(s) among {sorted(st.replicas)}")
    r = st.replicas[a] if a is not None else None
    if kind == "produce":
        note = _produce(st, None)
    elif kind == "produce-to":
        note = _produce(st, a)
    elif kind == "toxic-request":
        note = _produce(st, None, lost="request")
    elif kind == "toxic-reply":
        note = _produce(st, None, lost="reply")
    elif kind == "fetch":
        assert r is not None
        note = _fetch(st, r.rid)
    elif kind == "tick":
        note = _tick(st)
    elif kind == "heal":
        note = _heal(st)
    else:
        assert r is not None
        if kind in FAULT_TOUCHES:
            st.faulted = st.faulted | frozenset(ids)
        note = _fault(st, kind, r, b)
    if st.pending:
        note = "; ".join([note, *_resolve_pending(st)])
    if st.record_exposures:
        _expose(st)
    return note


def _heal(st: State) -> str:
    st.cuts = frozenset()
    _push_metadata(st)
    return "network healed"


def _fault(st: State, kind: str, r: Replica, b: int | None) -> str:
    rid = r.rid
    if kind in ("crash", "stop", "pause", "wipe", "lose-unflushed") and not r.up:
        return f"{rid} is down: no-op"
    if kind == "crash":
        _go_down(r)
        return f"{rid} crashes (page cache kept)"
    if kind == "restart":
        if r.up:
            return f"{rid} is up: no-op"
        return _restart(st, r, f"{rid} restarts, HW {min(r.ckpt_hw, r.leo)} from checkpoint")
    if kind == "stop":
        return _stop(st, r)
    if kind == "pause":
        r.paused = True
        return f"{rid} paused"
    if kind == "resume":
        if not r.paused:
            return f"{rid} not paused: no-op"
        r.paused = False
        if _reaches_controller(st, r):
            _apply_metadata(st, r)
        return f"{rid} resumed"
    if kind in ("wipe", "lose-unflushed"):
        return _crash_and_restart(st, r, kind)
    if kind == "flush":
        r.flushed = r.leo if r.up else r.flushed
        return f"{rid} flushes to {r.flushed}"
    if kind == "isolate":
        others = [i for i in (*st.replicas, CONTROLLER) if i != rid]
        st.cuts = st.cuts | {frozenset((rid, i)) for i in others}
        return f"{rid} isolated"
    if kind == "cut-ctrl":
        st.cuts = st.cuts | {frozenset((rid, CONTROLLER))}
        return f"{rid} cut from the controller"
    assert kind == "cut" and b is not None
    st.cuts = st.cuts | {frozenset((rid, b))}
    return f"{rid} and {b} cut"
