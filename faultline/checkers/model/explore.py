"""Search fault schedules: which anomalies can a config show under which faults.

A schedule is a list of steps: the environment's (``produce``, ``fetch``, ``tick``)
and the faults' (the step kinds of each fault family, see ``FAULT_STEPS``). ``explore``
searches schedules breadth-first, exhaustively up to ``depth`` steps (states seen
before are not expanded again), then by seeded random walks up to
``walk_length`` steps, each walk that shows an anomaly shrunk greedily. Every
schedule ends with the harness's heal (``outcome.settle``) and is judged.

An anomaly found is certain (the schedule replays it); one not found is absent
up to the bound. The shortest schedule for each anomaly is kept: exact from the
breadth-first part, best effort from the walks.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from faultline.checkers.model.outcome import outcome
from faultline.checkers.model.state import CONTROLLER, ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state
from faultline.faults import FAMILIES

LEADER_FAULT = "leader-fault"
#: fault family -> the step kinds it may use (:attr:`faultline.faults.Family.model_steps`).
FAULT_STEPS: dict[str, tuple[str, ...]] = {f.name: f.model_steps for f in FAMILIES.values()}


@dataclass(frozen=True, slots=True)
class Bound:
    """How far to search: exhaustive depth, then ``walks`` random walks of ``walk_length``."""

    depth: int = 5
    walks: int = 300
    walk_length: int = 14
    seed: int = 0
    max_data_loss: int | None = None  # at most this many distinct replicas wiped / lose-unflushed
    max_faulted: int | None = None  # at most this many distinct replicas in ``State.faulted``


@dataclass(slots=True)
class Exploration:
    """What a search found: each anomaly with the shortest schedule that shows it."""

    config: ModelConfig
    faults: frozenset[str]
    bound: Bound
    found: dict[str, tuple[ModelStep, ...]] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)  # found breadth-first: no shorter schedule exists
    schedules: int = 0  # schedules judged (each one healed and drained)
    states: int = 0  # distinct states reached

    @property
    def anomalies(self) -> frozenset[str]:
        return frozenset(self.found)


def replay(config: ModelConfig, schedule: Iterable[ModelStep]) -> State:
    """The state after ``schedule`` from the initial state."""
    st = initial_state(config)
    for step in schedule:
        apply(st, step)
    return st


def _leaderish(st: State, rid: int) -> bool:
    r = st.replicas[rid]
    return st.c_leader == rid or r.leader == rid


def enabled_steps(st: State, faults: frozenset[str], max_data_loss: int | None = None,
                  max_faulted: int | None = None) -> list[ModelStep]:
    """Steps that may change ``st``: environment steps plus the given fault kinds' steps.

    Without ``leader-fault`` in ``faults`` no fault step touches a replica that is,
    or believes it is, the leader. With ``max_data_loss``, wipe and lose-unflushed
    reach at most that many distinct replicas. With ``max_faulted``, at most that many
    distinct replicas are ever faulted (``State.faulted``): fault steps spare the
    others, and a ``tick`` that would shrink one of them out of the ISR by lag is not
    offered (it must fetch first: an untouched follower keeps up, and seed 002's leader
    drops only a follower that has not caught up for ``replica.lag.time.max.ms``).
    """
    steps: list[ModelStep] = []
    ids = sorted(st.replicas)
    if st.c_leader is not None:
        steps.append(ModelStep("produce"))
    for rid in ids:
        r = st.replicas[rid]
        if rid != st.c_leader and r.leader == rid and r.up and not r.paused:
            steps.append(ModelStep("produce-to", rid))
    for rid in ids:
        r = st.replicas[rid]
        if r.up and not r.paused and r.leader not in (None, rid):
            steps.append(ModelStep("fetch", rid))
    if max_faulted is None or _tick_keeps_budget(st, max_faulted):
        steps.append(ModelStep("tick"))
    kinds = {k for f in faults for k in FAULT_STEPS.get(f, ())}
    if not kinds:
        return steps
    free = LEADER_FAULT in faults

    def may_fault(*rids: int) -> bool:
        return max_faulted is None or len(st.faulted | set(rids)) <= max_faulted

    for rid in ids:
        r = st.replicas[rid]
        if not free and _leaderish(st, rid):
            continue
        if not may_fault(rid):  # so it is up and not paused: nothing to undo either
            continue
        if r.up:
            may_lose = max_data_loss is None or rid in st.data_lost or len(st.data_lost) < max_data_loss
            steps += [ModelStep(k, rid) for k in ("crash", "stop") if k in kinds]
            if "wipe" in kinds and may_lose:
                steps.append(ModelStep("wipe", rid))
            if "pause" in kinds and not r.paused:
                steps.append(ModelStep("pause", rid))
            if r.flushed < r.leo:
                if "lose-unflushed" in kinds and may_lose:
                    steps.append(ModelStep("lose-unflushed", rid))
                if "flush" in kinds:
                    steps.append(ModelStep("flush", rid))
        elif "restart" in kinds:
            steps.append(ModelStep("restart", rid))
        if r.paused and "resume" in kinds:
            steps.append(ModelStep("resume", rid))
        if "isolate" in kinds:
            if any(frozenset((rid, o)) not in st.cuts for o in (*ids, CONTROLLER) if o != rid):
                steps.append(ModelStep("isolate", rid))
            if frozenset((rid, CONTROLLER)) not in st.cuts:
                steps.append(ModelStep("cut-ctrl", rid))
            steps += [ModelStep("cut", rid, o) for o in ids if o > rid and frozenset((rid, o)) not in st.cuts
                      and (free or not _leaderish(st, o)) and may_fault(rid, o)]
    if "heal" in kinds and st.cuts:
        steps.append(ModelStep("heal"))
    if st.c_leader is not None:
        steps += [ModelStep(k) for k in ("toxic-request", "toxic-reply") if k in kinds]
    return steps


def _tick_keeps_budget(st: State, max_faulted: int) -> bool:
    after = st.clone()
    apply(after, ModelStep("tick"))
    return len(after.faulted) <= max_faulted


def _judge(st: State) -> frozenset[str]:
    if not st.acked and not st.exposed and not st.failed:
        return frozenset()  # clients saw nothing: nothing to contradict
    return outcome(st).names


def _bfs(ex: Exploration) -> None:
    start = initial_state(ex.config)

    def key(st: State) -> tuple[object, ...]:
        return (st.key(), st.faulted) if ex.bound.max_faulted is not None else st.key()

    seen = {key(start)}
    frontier: list[tuple[State, tuple[ModelStep, ...]]] = [(start, ())]
    for _ in range(ex.bound.depth):
        nxt: list[tuple[State, tuple[ModelStep, ...]]] = []
        for st, sched in frontier:
            for step in enabled_steps(st, ex.faults, ex.bound.max_data_loss, ex.bound.max_faulted):
                s2 = st.clone()
                apply(s2, step)
                k = key(s2)
                if k in seen:
                    continue
                seen.add(k)
                path = (*sched, step)
                ex.schedules += 1
                for name in _judge(s2):
                    if name not in ex.found:
                        ex.found[name] = path
                        ex.exact.add(name)
                nxt.append((s2, path))
        frontier = nxt
    ex.states += len(seen)


def legal_replay(config: ModelConfig, faults: frozenset[str], bound: Bound,
                 schedule: Iterable[ModelStep]) -> State | None:
    """The state after ``schedule``, or None if some step is not among ``enabled_steps``
    there (a fault the cell's kinds, leader rule or bounds do not allow)."""
    st = initial_state(config)
    for step in schedule:
        if step not in enabled_steps(st, faults, bound.max_data_loss, bound.max_faulted):
            return None
        apply(st, step)
    return st


def _shrink(ex: Exploration, schedule: tuple[ModelStep, ...], name: str) -> tuple[ModelStep, ...]:
    """Greedily drop steps while the schedule stays legal and still shows ``name``."""
    best = schedule
    i = 0
    while i < len(best):
        cand = best[:i] + best[i + 1:]
        st = legal_replay(ex.config, ex.faults, ex.bound, cand)
        if st is not None and name in _judge(st):
            best = cand
        else:
            i += 1
    return best


def _walks(ex: Exploration) -> None:
    rng = random.Random(ex.bound.seed)
    for _ in range(ex.bound.walks):
        st = initial_state(ex.config)
        sched: list[ModelStep] = []
        for _ in range(ex.bound.walk_length):
            step = rng.choice(enabled_steps(st, ex.faults, ex.bound.max_data_loss, ex.bound.max_faulted))
            apply(st, step)
            sched.append(step)
        ex.schedules += 1
        for name in _judge(st) - ex.exact:
            short = _shrink(ex, tuple(sched), name)
            old = ex.found.get(name)
            if old is None or len(short) < len(old):
                ex.found[name] = short


def explore(config: ModelConfig, faults: Iterable[str], bound: Bound = Bound()) -> Exploration:
    """Search schedules of ``faults`` (fault kinds, plus ``leader-fault``) on ``config``.

    Unknown fault kinds raise ValueError. Deterministic for a given ``bound.seed``.
    """
    kinds = frozenset(faults)
    unknown = kinds - set(FAMILIES) - {LEADER_FAULT}
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAMILIES)}, "
                         f"{LEADER_FAULT}")
    ex = Exploration(config, kinds, bound)
    _bfs(ex)
    _walks(ex)
    return ex

