"""The steps of the reference model and how they apply: one partition's replication protocol.

This module owns ``ModelStep`` (the step kinds), ``initial_state`` and ``apply``: the
client side (produce, acks, what a reader may see), fetches, ticks and faults. The values
it changes live in ``state.py``, a replica's own mechanics (log, leader epochs, metadata,
HW) in ``replica.py``, the controller's ISR, ELR and election rules in ``controller.py``.
Where each rule comes from, and what the model simplifies: docs/design.md, "Reference
model".

Contracts:

- ``apply(state, step)`` mutates ``state`` in place and returns a one-line note of
  what happened. Same state and same step give the same result: no wall clock, no
  randomness anywhere in the model.
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultline.checkers.model import controller
from faultline.checkers.model.replica import (
    append,
    apply_metadata,
    linked,
    maybe_advance_hw,
    push_metadata,
    reaches_controller,
    reconcile_by_epoch,
    serving,
    truncate,
)
from faultline.checkers.model.state import (
    CONTROLLER,
    ModelConfig,
    Pending,
    Remote,
    Replica,
    State,
    check_period,
)

_STEP_RE = re.compile(r"^([a-z-]+)(?:\((\d+)(?:,\s*(\d+))?\))?$")


@dataclass(frozen=True, slots=True)
class ModelStep:
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
    def parse(text: str) -> ModelStep:
        """Parse ``kind``, ``kind(a)`` or ``kind(a,b)``; ValueError if malformed."""
        m = _STEP_RE.match(text.strip())
        if m is None or m.group(1) not in STEP_KINDS:
            raise ValueError(f"not a step: {text!r} (kinds: {', '.join(sorted(STEP_KINDS))})")
        a = int(m.group(2)) if m.group(2) else None
        b = int(m.group(3)) if m.group(3) else None
        return ModelStep(m.group(1), a, b)


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



def initial_state(config: ModelConfig) -> State:
    """All replicas up and empty, replica 1 leading epoch 0 with the full ISR."""
    ids = range(1, config.replication_factor + 1)
    isr = frozenset(ids)
    st = State(config, {i: Replica(i) for i in ids}, c_isr=isr)
    for i in ids:
        apply_metadata(st, st.replicas[i])
    return st



# ---------------------------------------------------------------- controller


def _fence(st: State, rid: int, elect: bool = True) -> str:
    """``controller.fence``, then the brokers learn the new registration."""
    note = controller.fence(st, rid, elect)
    push_metadata(st)
    return note


def _controller_tick(st: State) -> list[str]:
    notes: list[str] = []
    for rid, r in st.replicas.items():
        if rid not in st.fenced and not reaches_controller(st, r):
            notes.append(_fence(st, rid, elect=False))
    for rid, r in st.replicas.items():
        if rid in st.fenced and reaches_controller(st, r):
            st.fenced = st.fenced - {rid}
            notes.append(f"controller unfences {rid}")
    if st.c_leader is None or st.c_leader in st.fenced:
        elected = controller.elect(st)
        if elected:
            notes.append(elected)
    push_metadata(st)
    return notes


def _alter_isr(st: State, leader: Replica, new_isr: frozenset[int]) -> bool:
    """AlterPartition: accepted only from the current leader at the current epoch."""
    if not (reaches_controller(st, leader) and st.c_leader == leader.rid and st.c_epoch == leader.epoch):
        return False
    controller.change_isr(st, new_isr)
    push_metadata(st)
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
            if len(r.isr) >= controller.effective_min_isr(st.config):
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
        if r.leader == r.rid and serving(r) and r.hw:
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
    min_isr = controller.effective_min_isr(cfg)  # Partition.effectiveMinIsr: capped at the RF
    if cfg.acks == "all" and len(r.isr) < min_isr:
        st.failed = st.failed | {value}
        return f"send {value}: NOT_ENOUGH_REPLICAS (ISR {_fmt_set(r.isr)} < {min_isr})"
    offset = r.leo
    append(r, ((r.epoch, value),))
    maybe_advance_hw(st, r)
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
    if not serving(f) or f.leader is None or f.leader == fid:
        return f"{fid} does not fetch"
    leader = st.replicas[f.leader]
    if not serving(leader) or not linked(st, fid, leader.rid):
        return f"{fid} cannot reach {leader.rid}"
    if leader.leader != leader.rid or leader.epoch != f.epoch:
        return f"{fid} fetch rejected by {leader.rid} (epoch {leader.epoch} vs {f.epoch})"
    notes: list[str] = []
    if f.must_truncate:
        leo = f.leo
        to = reconcile_by_epoch(f, leader)
        f.must_truncate = False
        if to < f.leo:
            truncate(f, to)
        if f.leo < leo:
            notes.append(f"{fid} truncates to {f.leo} by leader epoch")
        elif leo:
            notes.append(f"{fid} keeps offsets below {leo} by leader epoch")
    if st.config.truncation == "hw" and f.leo > leader.leo:
        notes.append(f"{fid} LEO {f.leo} > leader LEO, truncates to {leader.leo}")
        truncate(f, leader.leo)
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
    maybe_advance_hw(st, leader)
    if st.config.follower_hw == "seed":
        response_hw = leader.hw
    append(f, records)
    # follower HW = min(leader HW, own LEO), kept from moving back. Kafka only clamps it to
    # [log start, LEO] (UnifiedLog.updateHighWatermark) and could move it back, but every
    # offset below it was already exposed by a leader, so no anomaly turns on the difference
    f.hw = max(f.hw, min(response_hw, f.leo))
    got = f"{len(records)} record(s)" if records else "nothing"
    notes.insert(n_before, f"{fid} fetches at {offset}: {got}, HW {f.hw}")
    return "; ".join(notes)


def _tick(st: State) -> str:
    st.now += 1
    notes = _controller_tick(st)
    cfg = st.config
    if st.now % check_period(cfg) == 0:
        for r in st.replicas.values():
            if r.leader != r.rid or not serving(r):
                continue
            out = {i for i in r.isr - {r.rid}
                   if r.remote[i].leo != r.leo and st.now - r.remote[i].last_caught_up > cfg.lag_ticks}
            if out and _alter_isr(st, r, r.isr - out):
                st.faulted = st.faulted | out
                notes.append(f"{r.rid} shrinks ISR to {_fmt_set(st.c_isr)} (lag)")
                maybe_advance_hw(st, r)
    if st.now % cfg.checkpoint_ticks == 0:
        for r in st.replicas.values():
            if serving(r):
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
            push_metadata(st)
    r.clean_shutdown = False
    r.up, r.paused = True, False
    r.hw = min(r.ckpt_hw, r.leo)
    leo = r.leo
    if reaches_controller(st, r):
        apply_metadata(st, r)
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
    truncate(r, r.flushed)
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


def apply(st: State, step: ModelStep) -> str:
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
    push_metadata(st)
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
        if reaches_controller(st, r):
            apply_metadata(st, r)
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
