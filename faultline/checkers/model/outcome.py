"""End of a model run: heal, drain, and judge it with docs/design.md's anomaly names.

``settle`` does what the harness does after its main phase: resolve what clients
still wait for (a timeout, so ``info``), undo every fault, and run ticks and fetch
rounds until the partition has a leader, a full ISR and HW = LEO everywhere. The
drain is then the leader's log below its HW. ``judge`` compares what clients saw
(acks, failed sends, records readable below some leader's HW) with the drain.

Only the anomalies a one-partition model without producer retries or consumer
groups can show are judged: ``MODEL_ANOMALIES``. Besides anomalies, the white-box
invariants of docs/design.md are checked on states: HW <= LEO, and replicas agree below
the HW (``replicas-diverge``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from faultline.checkers.model.state import State
from faultline.checkers.model.steps import ModelStep, apply

MODEL_ANOMALIES: tuple[str, ...] = ("lost-write", "phantom-read", "inconsistent-offsets", "aborted-read")
#: The anomaly that is a loss of data: an acknowledged write lost.
LOST_WRITE = "lost-write"


@dataclass(frozen=True, slots=True)
class ModelOutcome:
    """What a run of the model came to."""

    drain: tuple[tuple[int, int], ...] | None  # (offset, value); None: no leader after healing
    anomalies: dict[str, tuple[str, ...]]  # name -> examples, only names that occurred
    invariants: tuple[str, ...]  # invariant violations seen on the settled state

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.anomalies)


def _converged(st: State) -> bool:
    if st.c_leader is None or len(st.c_isr) != len(st.replicas):
        return False
    leader = st.replicas[st.c_leader]
    if not leader.is_leader or leader.epoch != st.c_epoch or leader.hw != leader.leo:
        return False
    return all(r.up and r.leo == leader.leo and r.hw == r.leo and r.epoch == st.c_epoch
               for r in st.replicas.values())


def settle(st: State, on_step: Callable[[ModelStep, str, State], None] | None = None,
           max_rounds: int = 40) -> State:
    """Heal a copy of ``st`` the way the harness heals a cluster; ``st`` is not changed.

    Calls ``on_step(step, note, state)`` after each healing step if given. Sends
    still waiting are timed out (``info``) first; exposures are not recorded while
    healing: the workload has stopped.
    """
    st = st.clone()
    st.record_exposures = False
    for p in st.pending:
        st.indeterminate = st.indeterminate | {p.value}
    st.pending = []

    def do(step: ModelStep) -> None:
        note = apply(st, step)
        if on_step is not None:
            on_step(step, note, st)

    if st.cuts:
        do(ModelStep("heal"))
    for rid, r in st.replicas.items():
        if r.paused:
            do(ModelStep("resume", rid))
    for rid, r in st.replicas.items():
        if not r.up:
            do(ModelStep("restart", rid))
    for _ in range(max_rounds):
        if _converged(st):
            break
        do(ModelStep("tick"))
        for rid in st.replicas:
            if st.replicas[rid].leader not in (None, rid):
                do(ModelStep("fetch", rid))
    return st


def drain_of(st: State) -> tuple[tuple[int, int], ...] | None:
    """The leader's records below its HW, or None when no replica leads."""
    if st.c_leader is None:
        return None
    leader = st.replicas[st.c_leader]
    if not leader.is_leader:
        return None
    return tuple((o, leader.log[o][1]) for o in range(leader.hw))


def invariant_violations(st: State) -> tuple[str, ...]:
    """docs/design.md's replica invariants on one state: HW <= LEO, agreement below the HW.

    A follower that has not yet reconciled with its leader (KIP-101's first fetch
    after becoming follower) is left out of the agreement check: its HW is still the
    checkpointed one, and reconciling is what makes it agree.
    """
    found: list[str] = []
    ups = [r for r in st.replicas.values() if r.up]
    if any(r.hw > r.leo for r in ups):
        found.append("hw-above-leo")
    ups = [r for r in ups if not r.must_truncate]
    for i, a in enumerate(ups):
        for b in ups[i + 1:]:
            below = min(a.hw, b.hw)
            if a.log[:below] != b.log[:below]:
                found.append("replicas-diverge")
                return tuple(found)
    return tuple(found)


def judge(before: State, settled: State) -> ModelOutcome:
    """Anomalies of a run: clients' view in ``before``, the drain of ``settled``."""
    drain = drain_of(settled)
    found: dict[str, list[str]] = {}

    def add(name: str, example: str) -> None:
        found.setdefault(name, []).append(example)

    stored = dict(drain) if drain is not None else {}
    values = {v: o for o, v in stored.items()}
    if drain is not None:
        for v, o in sorted(before.acked.items()):
            if v not in values:
                add("lost-write", f"value {v} acked" + (f" at offset {o}" if o >= 0 else " (acks=0)")
                    + " is not in the drain")
        for o, v in sorted(before.exposed):
            if v not in values:
                add("phantom-read", f"value {v} readable at offset {o} is not in the drain")
    by_offset: dict[int, set[int]] = {}
    for v, o in before.acked.items():
        if o >= 0:
            by_offset.setdefault(o, set()).add(v)
    for o, v in before.exposed:
        by_offset.setdefault(o, set()).add(v)
    for o, v in stored.items():
        by_offset.setdefault(o, set()).add(v)
    for o, vs in sorted(by_offset.items()):
        if len(vs) > 1:
            add("inconsistent-offsets", f"offset {o} holds values {sorted(vs)}")
    seen = {v for _, v in before.exposed} | set(values)
    for v in sorted(before.failed & seen):
        add("aborted-read", f"value {v} failed but was read")
    return ModelOutcome(drain, {k: tuple(v) for k, v in found.items()}, invariant_violations(settled))


def outcome(st: State) -> ModelOutcome:
    """Settle a copy of ``st`` and judge it."""
    return judge(st, settle(st))
