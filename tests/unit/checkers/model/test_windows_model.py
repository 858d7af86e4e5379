"""The checker's window rule (``faults_seen.Windows``, ``expiry``) held to the reference
model (issue 33): the model's runs, with its step log as the metadata log, go through
the real checker.

The model has no history and no metadata log of its own, so :func:`run` replays a
schedule and the harness's heal (``outcome.settle``), recording per step what the
controller registered (leader, epoch, ISR, ELR) and when each write was sent, answered
and by whom; :func:`history` and :func:`timeline` turn that into a history (a send per
write, a nemesis op per fault step, the drain) and a metadata-log timeline, step ``i`` at
``i`` seconds, so every step lies two clock margins from the next.

- Writes after a heal: a write sent once every fault of a schedule is healed and every
  replica is back in the ISR, with nothing but fetches after it, is never lost in the
  model; so the checker must call such a loss a violation, however
  many faults and elections came before it (what ``expiry`` says).
- Elections it replays: wherever the model loses a write, its step log shows what the
  checker's narrow rule needs after the send (:func:`model_cause`: for an acks=1 write an
  election, or an ack by a deposed leader; for a committed one an election from outside
  the ISR and ELR, or a replica whose data was destroyed leading),
  and the checker, given the model's history and timeline, permits the loss, witnessed,
  naming that election; with the elections taken out of the timeline it is a violation.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from faultline.checkers.faults_seen import MetadataState
from faultline.checkers.model.explore import enabled_steps
from faultline.checkers.model.outcome import drain_of, settle
from faultline.checkers.model.scenarios import SCENARIOS
from faultline.checkers.model.state import ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state
from faultline.checkers.queue import check
from faultline.checkers.result import Result
from faultline.history import NEMESIS, Op
from faultline.spec import KafkaSpec, TestSpec
from tests.unit.checkers.queue_hist import TOPIC, make_spec

S = 1_000_000_000
MS = 1_000_000
P0 = (TOPIC, 0)
#: The fault families a schedule here may use: every node fault whose steps a history can
#: journal (``cut-ctrl`` cuts a broker from a KRaft controller the harness does not name).
FAULTS = frozenset({"kill", "pause", "stop", "wipe", "lose-unflushed", "partition", "leader-fault"})
#: Model steps the harness journals as a nemesis fault (restarts, resumes and heals are not).
JOURNALED = {"crash": "kill", "stop": "stop", "pause": "pause", "wipe": "wipe",
             "lose-unflushed": "lose-unflushed", "isolate": "partition", "cut": "partition"}
DESTROYS = frozenset({"wipe", "lose-unflushed"})


@dataclass(frozen=True, slots=True)
class Moment:
    """The model after one step (``step`` None: the initial state): the controller's
    registration, and whether the partition is whole (every replica up, unpaused,
    reachable and in the ISR)."""

    step: ModelStep | None
    leader: int | None
    epoch: int
    isr: frozenset[int]
    elr: frozenset[int]
    whole: bool


@dataclass(slots=True)
class Run:
    """A replayed schedule and the harness's heal after it, moment by moment."""

    config: ModelConfig
    moments: list[Moment] = field(default_factory=list)
    sent: dict[int, int] = field(default_factory=dict)  # value -> moment of its send
    by: dict[int, int | None] = field(default_factory=dict)  # value -> replica it was sent to
    answered: dict[int, tuple[int, str, int | None]] = field(default_factory=dict)  # moment, type, offset
    drain: tuple[tuple[int, int], ...] = ()
    lost: frozenset[int] = frozenset()


def _moment(step: ModelStep | None, st: State) -> Moment:
    whole = (not st.cuts and st.c_isr == frozenset(st.replicas)
             and all(r.up and not r.paused for r in st.replicas.values()))
    return Moment(step, st.c_leader, st.c_epoch, st.c_isr, st.c_elr, whole)


def run(config: ModelConfig, schedule: Sequence[ModelStep]) -> Run:
    """Replay ``schedule``, heal and drain the way the harness does (``outcome.settle``),
    and record it; the heal must leave a leader to drain."""
    st = initial_state(config)
    out = Run(config, [_moment(None, st)])

    def answer(st: State) -> None:
        i = len(out.moments) - 1
        for v, o in st.acked.items():
            out.answered.setdefault(v, (i, "ok", o))
        for v in st.failed:
            out.answered.setdefault(v, (i, "fail", None))
        for v in st.indeterminate:
            out.answered.setdefault(v, (i, "info", None))

    for step in schedule:
        value, leader = st.next_value, st.c_leader
        apply(st, step)
        out.moments.append(_moment(step, st))
        if st.next_value > value:
            out.sent[value] = len(out.moments) - 1
            out.by[value] = step.a if step.kind == "produce-to" else leader
        answer(st)
    def healed(step: ModelStep, _: str, st: State) -> None:
        out.moments.append(_moment(step, st))
        answer(st)

    drain = drain_of(settle(st, healed))
    assert drain is not None, f"no leader after healing {' '.join(map(str, schedule))}"
    out.drain = drain
    kept = {v for _, v in out.drain}
    out.lost = frozenset(v for v in st.acked if v not in kept)
    return out


# ---------------------------------------------------------------- the checker's view


def _at(i: int) -> int:
    """The history's and the metadata log's time of moment ``i``."""
    return i * S


def timeline(r: Run) -> list[MetadataState]:
    """The metadata log the model's controller would have written: a state per change."""
    replicas = frozenset(range(1, r.config.replication_factor + 1))
    out: list[MetadataState] = []
    for i, m in enumerate(r.moments):
        s = MetadataState(-S if i == 0 else _at(i), m.leader, m.isr, replicas, m.elr, m.epoch)
        if not out or dataclasses.replace(out[-1], time=s.time) != s:
            out.append(s)
    return out


def history(r: Run, lose: int | None = None) -> list[Op]:
    """The run as a history: each write's send and answer, each fault step as a nemesis
    op, the drain (given ``lose``, a value in it, ending below that value's offset, as a
    log that lost it would: a gap below the HW would be a missed read, not a loss)."""
    ops: list[tuple[int, Any, str, str, Any]] = []  # time, process, type, f, value
    for v, i in r.sent.items():
        ops.append((_at(i), v, "invoke", "send", {"topic": TOPIC, "partition": 0, "value": v}))
        if v in r.answered:
            j, how, offset = r.answered[v]
            value = {"topic": TOPIC, "partition": 0, "value": v}
            if how == "ok":
                value["offset"] = offset
            ops.append((_at(j) + MS, v, how, "send", value))
    for i, m in enumerate(r.moments):
        if m.step is not None and m.step.kind in JOURNALED:
            f, node = JOURNALED[m.step.kind], m.step.a
            value = {"nodes": [node]}
            if m.step.kind == "isolate":
                others = [o for o in range(1, r.config.replication_factor + 1) if o != node]
                value = {"grudge": {str(node): others, **{str(o): [node] for o in others}}}
            elif m.step.kind == "cut":
                value = {"grudge": {str(node): [m.step.b], str(m.step.b): [node]}}
            ops.append((_at(i), NEMESIS, "info", f, value))
            ops.append((_at(i) + 2 * MS, NEMESIS, "info", f, {**value, "result": "done"}))
    end = _at(len(r.moments))
    drain = [(o, v) for o, v in r.drain if o < next((o for o, v in r.drain if v == lose), len(r.drain))]
    records = [[o, v] for o, v in drain]
    ops.append((end, 99_999, "invoke", "drain", {"topic": TOPIC, "partition": 0}))
    ops.append((end + MS, 99_999, "ok", "drain", {"topic": TOPIC, "partition": 0, "records": records,
                                                   "log_start_offset": 0, "high_watermark": len(drain),
                                                   "last": True}))
    ops.sort(key=lambda o: o[0])
    return [Op(n, t, p, ty, f, v) for n, (t, p, ty, f, v) in enumerate(ops)]  # type: ignore[arg-type]


def spec_of(cfg: ModelConfig) -> TestSpec:
    """The test spec of a model config (Kafka 3.9 where the model runs without the ELR)."""
    spec = make_spec(acks=cfg.acks, min_insync=cfg.min_insync, unclean=cfg.unclean,
                     rf=cfg.replication_factor)
    return spec if cfg.elr else dataclasses.replace(spec, kafka=KafkaSpec(version="3.9.1"))


def judge(r: Run, lose: int | None = None, states: list[MetadataState] | None = None) -> Result:
    """The checker's verdict on the run (``lose``: with that value missing from the drain)."""
    states = timeline(r) if states is None else states
    return check(spec_of(r.config), history(r, lose), timeline={P0: states})


# ---------------------------------------------------------------- schedules


def _steps(st: State) -> list[ModelStep]:
    return [s for s in enabled_steps(st, FAULTS) if s.kind != "cut-ctrl"]


def schedules(cfg: ModelConfig, depth: int, walks: int, length: int,
              seed: int = 0) -> Iterator[tuple[ModelStep, ...]]:
    """Every schedule of :data:`FAULTS` up to ``depth`` steps that reaches a new state,
    then ``walks`` seeded random walks of ``length`` steps."""
    start = initial_state(cfg)
    seen = {start.key()}
    frontier: list[tuple[State, tuple[ModelStep, ...]]] = [(start, ())]
    for _ in range(depth):
        nxt = []
        for st, path in frontier:
            for step in _steps(st):
                s2 = st.clone()
                apply(s2, step)
                if s2.key() not in seen:
                    seen.add(s2.key())
                    nxt.append((s2, (*path, step)))
                    yield (*path, step)
        frontier = nxt
    rng = random.Random(seed)
    for _ in range(walks):
        st, walk = initial_state(cfg), []
        for _ in range(length):
            walk.append(rng.choice(_steps(st)))
            apply(st, walk[-1])
        yield tuple(walk)


# ---------------------------------------------------------------- the model's own causes


def elections(r: Run) -> dict[int, dict[str, Any]]:
    """Moment -> the election the controller made at it, as the checker's ``excused_by``
    names one (``how``: the new leader was in the ISR, the ELR, or neither before)."""
    out = {}
    for j in range(1, len(r.moments)):
        a, b = r.moments[j - 1], r.moments[j]
        if b.epoch > a.epoch and b.leader is not None:
            how = "isr" if b.leader in a.isr else "elr" if b.leader in a.elr else "unclean"
            out[j] = {"kind": "election", "time": _at(j), "from": a.leader, "to": b.leader,
                      "epoch": b.epoch, "witnessed": True, "how": how}
    return out


def _led_destroyed(r: Run, since: int) -> bool:
    """Whether a replica whose data a step after moment ``since`` destroyed leads before
    the ISR, having lost it, regains it."""
    for j in range(since + 1, len(r.moments)):
        step = r.moments[j].step
        if step is None or step.kind not in DESTROYS:
            continue
        left = False
        for m in r.moments[j:]:
            if m.leader == step.a:
                return True
            left = left or step.a not in m.isr
            if left and step.a in m.isr:
                break
    return False


def model_cause(r: Run, v: int) -> str | None:
    """What the model's step log shows after ``v``'s send that the checker's narrow rule
    needs to excuse its loss (docs/design.md, "Each anomaly in its own window"): for a
    committed write an election from neither the ISR nor the ELR, or a replica whose data
    was destroyed leading; for an acks=1 write any election, or an ack by a deposed
    leader. (The checker also lets the acknowledging leader's destroyed data excuse an
    acks=1 loss with no election; the model never needs it: it fences every restart, and
    elects.)"""
    i = r.sent[v]
    after = [e for j, e in elections(r).items() if j > i]
    if r.config.acks == "all":
        if any(e["how"] == "unclean" for e in after):
            return "unclean election"
        return "destroyed data led" if _led_destroyed(r, i) else None
    if after:
        return "election"
    return "deposed leader" if r.by[v] != r.moments[i - 1].leader else None


def lost_examples(res: Result) -> dict[int, Mapping[str, Any]]:
    """The checker's lost-write examples by value."""
    return {e["value"]: e for e in res.anomalies.get("lost-write", [])}


# ---------------------------------------------------------------- tests

CONFIGS = {
    "acks=1": ModelConfig(acks="1", min_insync=2, elr=True),
    "acks=1 no-elr": ModelConfig(acks="1", min_insync=1, elr=False),
    "acks=all min.insync=1 unclean": ModelConfig(acks="all", min_insync=1, unclean=True, elr=True),
    "acks=all min.insync=1 no-elr": ModelConfig(acks="all", min_insync=1, elr=False),
    "acks=all min.insync=1 unclean no-elr": ModelConfig(acks="all", min_insync=1, unclean=True, elr=False),
}


def _write(cfg: ModelConfig, leader: int) -> list[ModelStep]:
    """One send to a whole partition's ``leader``, and fetch rounds until it is acknowledged."""
    followers = [ModelStep("fetch", f) for f in range(1, cfg.replication_factor + 1) if f != leader]
    return [ModelStep("produce"), *followers, *followers]


@pytest.mark.parametrize("name", CONFIGS)
def test_a_write_after_the_heal_is_never_lost_so_its_loss_is_a_violation(name: str) -> None:
    """Whatever faults and elections came first (here schedules of every node fault, then the
    harness's heal, until the partition is whole), a write sent after them, with only fetches
    after it, is never lost in the model; so the checker, given the model's history and log
    with that write missing from the drain, must call it a violation: a fault over before
    the write, with every replica back in the ISR, excuses nothing (``expiry``)."""
    cfg = CONFIGS[name]
    excusing_prefixes = 0
    for prefix in schedules(cfg, depth=2, walks=150, length=12, seed=11):
        healed = run(cfg, prefix)
        heal = [m.step for m in healed.moments[len(prefix) + 1:] if m.step is not None]
        leader = healed.moments[-1].leader
        assert healed.moments[-1].whole and leader is not None, prefix
        r = run(cfg, [*prefix, *heal, *_write(cfg, leader)])
        v = max(r.sent)
        assert r.answered[v][1] == "ok" and v not in r.lost, prefix
        assert r.moments[r.sent[v] - 1].whole
        assert lost_examples(judge(r, lose=v))[v]["permitted"] is False, " ".join(map(str, prefix))
        # nothing after v can lose anything: what loses an earlier write came before v
        excusing_prefixes += any(model_cause(r, w) is not None for w in r.sent if w < v)
    assert excusing_prefixes > 0


@pytest.mark.parametrize("name", CONFIGS)
def test_every_loss_the_model_finds_has_a_cause_after_its_send_that_the_checker_names(name: str) -> None:
    """Over the model's schedules, every acknowledged write it loses has what the checker's
    narrow rule needs after its send, in the model's own step log (``model_cause``); and the
    checker, given the model's history and log, permits it, witnessed, by an election the
    model made or by a fault that destroyed data."""
    cfg = CONFIGS[name]
    losses = 0
    for schedule in schedules(cfg, depth=3, walks=600, length=18, seed=5):
        r = run(cfg, schedule)
        if not r.lost:
            continue
        res = judge(r)
        assert res.valid is True, (" ".join(map(str, schedule)), res.violations, res.unknown)
        found = lost_examples(res)
        made = list(elections(r).values())
        for v in r.lost:
            losses += 1
            assert model_cause(r, v) is not None, (" ".join(map(str, schedule)), v)
            excuse = found[v]["excused_by"]
            assert excuse in made or (excuse["kind"], excuse["fault"]) in {("fault", "wipe"),
                                                                           ("fault", "lose-unflushed")}
    assert losses > 0


#: A leader isolated from the controller and every replica acknowledges acks=1 writes as a
#: deposed leader after the controller elected 2; the heal truncates them.
DEPOSED = "produce fetch(2) fetch(3) isolate(1) tick produce-to(1)"


@pytest.mark.parametrize(("name", "cause", "how"), [
    ("acks1-failover-loss", "election", "isr"), ("unclean-election-loss", "unclean election", "unclean"),
    ("deposed-leader", "deposed leader", "isr")])
def test_the_checker_names_the_models_election_and_forbids_the_loss_without_it(
        name: str, cause: str, how: str) -> None:
    """One of the model's losses through the checker: permitted, ``excused_by`` naming the
    election the model made; the same history with every leader change taken out of the
    log (its first leader leads throughout) is a violation."""
    if name == "deposed-leader":
        cfg, steps = CONFIGS["acks=1"], tuple(ModelStep.parse(t) for t in DEPOSED.split())
    else:
        cfg, steps = SCENARIOS[name].config, SCENARIOS[name].steps
    r = run(cfg, steps)
    [v] = r.lost
    assert model_cause(r, v) == cause
    [election] = elections(r).values()
    assert election["how"] == how
    assert lost_examples(judge(r))[v]["excused_by"] == election
    states = timeline(r)
    still = [dataclasses.replace(s, leader=states[0].leader, epoch=states[0].epoch) for s in states]
    res = judge(r, states=still)
    assert res.violations == ["lost-write"] and lost_examples(res)[v]["permitted"] is False
