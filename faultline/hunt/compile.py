"""Compile a reference-model schedule into a targeted schedule (:mod:`faultline.targeted`). Pure.

:func:`compile_schedule` turns each fault step of the model into the targeted step that
causes it, each run of ``tick`` steps into a wait on what the model's own replayed state
shows changed, and the steps a real cluster performs on its own (``produce``, ``fetch``)
into nothing: the rule table of docs/design.md, "Hunts". A step no rule realises
faithfully raises :class:`CompileError` naming it. The waits come from replaying the
schedule on one model config; on another config a wait may not be met, which ends that
run's schedule early, as any unmet wait does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faultline.checkers.model.state import ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state

LEADER, FOLLOWERS = 1, frozenset({2, 3})
#: Steps the real cluster performs on its own.
_ON_ITS_OWN = frozenset({"produce", "produce-to", "fetch"})
#: Fault kinds that act on both followers together, and their targeted verbs.
_GROUP = {"cut": "hold", "pause": "pause", "resume": "resume", "crash": "crash", "restart": "restart"}
#: (kind, replica up) of the model's faults that do nothing, and what the targeted step does there.
_IGNORED = {("restart", True): "stops and starts it", ("wipe", False): "deletes its data and starts it",
            ("lose-unflushed", False): "cuts its logs back and starts it"}
#: Faults on replica 1 that destroy its data; the model restarts it at once.
_DESTROY = frozenset({"wipe", "lose-unflushed"})


class CompileError(ValueError):
    """A model step the compiler has no faithful targeted step for."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the waits read of the model's state."""

    leader: int | None
    isr: frozenset[int]
    fenced: frozenset[int]
    down: frozenset[int]

    @staticmethod
    def of(st: State) -> _Seen:
        return _Seen(st.c_leader, st.c_isr, st.fenced,
                     frozenset(r.rid for r in st.replicas.values() if not r.up))


def compile_schedule(steps: Sequence[ModelStep], config: ModelConfig) -> tuple[str, ...]:
    """The targeted schedule for the model's ``steps``, replayed on ``config`` (3
    replicas); CompileError naming the first step no rule covers (module docstring)."""
    if config.replication_factor != 3:
        raise CompileError("the compiler maps replica 1 to the leader of 0 and 2, 3 to its followers: "
                           "replication factor 3 only")
    st = initial_state(config)
    out: list[str] = ["wait for 2 s"]
    last = max((i for i, s in enumerate(steps) if s.kind not in (*_ON_ITS_OWN, "tick")), default=-1)
    bound: set[str] = set()
    held = False  # the followers cut or paused
    produced = False  # the model produced while they were
    i = 0
    while i <= last:
        step = steps[i]
        where = f"step {i + 1} {step}"
        if step.kind in _ON_ITS_OWN:
            produced |= held and step.kind != "fetch"
            apply(st, step)
            i += 1
            continue
        if step.kind == "tick":
            out_of_quorum = sorted(rid for rid, r in st.replicas.items() if not r.up or r.paused)
            if len(out_of_quorum) >= 2:
                raise CompileError(f"{where}: replicas {', '.join(map(str, out_of_quorum))} are down or "
                                   "paused, so two of the three KRaft voters: the quorum is gone, and the "
                                   "model's controller acts here")
            before = _Seen.of(st)
            while i <= last and steps[i].kind == "tick":
                apply(st, steps[i])
                i += 1
            out.append(_wait(before, _Seen.of(st), where))
            continue
        _refuse_ignored(st, step, where)
        pair = steps[i + 1] if i + 1 < len(steps) else None
        if step.kind in _GROUP and _on_followers(step, pair):
            assert pair is not None
            _refuse_ignored(st, pair, f"step {i + 2} {pair}")
            if "held" not in bound and st.c_leader != LEADER:
                raise CompileError(f"{where}: replica 1 no longer leads, so 'followers of 0' would not "
                                   "name replicas 2 and 3")
            verb = _GROUP[step.kind]
            out.append(f"{verb} {'held' if 'held' in bound else 'followers of 0 as held'}")
            bound.add("held")
            held = {"cut": True, "pause": True, "resume": False}.get(step.kind, held)
            produced &= held
            apply(st, step)
            apply(st, pair)
            i += 2
            continue
        if step.kind in ("crash", "restart") and step.a in FOLLOWERS and "held" in bound:
            out.append(f"{step.kind} {_followers(frozenset({step.a}))}")
            apply(st, step)
            i += 1
            continue
        if step.kind in ("crash", "restart", *_DESTROY) and step.a == LEADER:
            if step.kind != "restart" and held and produced:
                out.append("wait for 1 s")
            if step.kind == "restart":
                out.append("restart old")
            else:
                out.append(f"{step.kind} {'old' if 'old' in bound else 'leader of 0 as old'}")
                bound.add("old")
                if step.kind in _DESTROY:
                    out.append("restart old")
            apply(st, step)
            i += 1
            continue
        if step.kind == "heal" and held and st.cuts:
            out.append("release held")
            held = produced = False
            apply(st, step)
            i += 1
            continue
        raise CompileError(f"{where}: no targeted step realises it (the compiler covers faults on "
                           "replica 1, on both followers together, and a heal of their hold)")
    return tuple(out)


def _refuse_ignored(st: State, step: ModelStep, where: str) -> None:
    """CompileError when the model ignores ``step`` (:data:`_IGNORED`) and its targeted
    step would act."""
    up = step.a is not None and st.replicas[step.a].up
    if (step.kind, up) in _IGNORED:
        raise CompileError(f"{where}: replica {step.a} is {'up' if up else 'down'}: the model's "
                           f"{step.kind} does nothing, a targeted one {_IGNORED[step.kind, up]}")


def _on_followers(step: ModelStep, pair: ModelStep | None) -> bool:
    """``step`` and ``pair`` do the same to both followers (``cut``: each from replica 1)."""
    if pair is None or pair.kind != step.kind:
        return False
    if step.kind == "cut":
        links = {frozenset((s.a, s.b)) for s in (step, pair)}
        return links == {frozenset((LEADER, f)) for f in FOLLOWERS}
    return {step.a, pair.a} == FOLLOWERS


def _followers(replicas: frozenset[int]) -> str:
    """The target naming followers ``replicas`` once ``held`` binds both (2 the first)."""
    if replicas == FOLLOWERS:
        return "held"
    return f"{'first' if replicas == {2} else 'second'} of held"


def _wait(before: _Seen, after: _Seen, where: str) -> str:
    """The wait on what a run of ticks changed (module docstring)."""
    if after.isr != before.isr and after.isr == {LEADER} and after.leader == LEADER:
        return "wait until isr of 0 is {leader} within 20 s"
    if after.leader not in (None, LEADER, before.leader) and before.leader in (None, LEADER):
        return "wait until 0 has a new leader within 30 s"
    fenced, unfenced = after.fenced - before.fenced, before.fenced - after.fenced
    if fenced and fenced <= FOLLOWERS and fenced <= after.down:
        return f"wait until {_followers(fenced)} fenced within 30 s"
    if unfenced and unfenced <= FOLLOWERS and not unfenced & after.down:
        return f"wait until {_followers(unfenced)} registered within 60 s"
    raise CompileError(f"{where}: the ticks change nothing a wait can observe (leader {before.leader} -> "
                       f"{after.leader}, ISR {sorted(before.isr)} -> {sorted(after.isr)}, fenced "
                       f"{sorted(before.fenced)} -> {sorted(after.fenced)})")
