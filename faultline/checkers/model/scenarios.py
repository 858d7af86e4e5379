"""The seeds' scenarios as replayable step lists, and their step tables.

Each scenario is a config and a list of steps; ``run_scenario`` replays it, then
heals the way the harness does (``outcome.settle``), and returns one row per step
(every replica's log, LEO, HW, role; the controller's leader, epoch, ISR and ELR;
what happened) plus the verdict. The KIP-101 cases are one schedule each, replayed
under both truncation modes; the KIP-966 case is replayed with and without ELR; the
follower-HW round with the modern response and with seed 000's.

A scenario names a mechanism; ``mechanism`` lists what the step notes must show, in
order, for it to have fired (``missing_mechanism``), so a replay that reaches the
expected anomalies some other way fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from faultline.checkers.model.outcome import ModelOutcome, invariant_violations, judge, settle
from faultline.checkers.model.state import ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named, replayable schedule with the outcome the seeds predict for it."""

    name: str
    title: str
    description: str
    config: ModelConfig
    steps: tuple[ModelStep, ...]
    expect: frozenset[str]  # anomaly names the replay must produce, exactly
    mechanism: tuple[str, ...]  # regular expressions the notes must match, in this order
    expect_invariants: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a step table: the state after ``step`` (``None`` for the start)."""

    index: int
    phase: str  # "start", "run" or "heal"
    step: ModelStep | None
    note: str
    snapshot: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    scenario: Scenario
    rows: tuple[Row, ...]
    verdict: ModelOutcome
    invariants_during: tuple[str, ...]  # invariant violations seen at any step of the run


def _s(text: str) -> tuple[ModelStep, ...]:
    return tuple(ModelStep.parse(t) for t in text.split())


_KIP101_1 = _s("produce fetch(2) fetch(2) fetch(2) produce fetch(2) fetch(2) tick "
               "crash(2) restart(2) crash(1) tick restart(1) fetch(1)")
_KIP101_2 = _s("produce fetch(2) fetch(2) fetch(2) tick crash(2) tick produce tick "
               "crash(1) restart(2) tick produce restart(1) fetch(1) fetch(1)")
_ELR_WIPE = _s("produce fetch(2) fetch(3) fetch(2) fetch(3) pause(2) pause(3) produce tick "
               "resume(2) resume(3) tick wipe(1)")
_C3 = ModelConfig(replication_factor=3, acks="all", min_insync=2, elr=True)
_C1 = ModelConfig(replication_factor=2, acks="all", min_insync=1, truncation="hw", fence_on_restart=False)
_C2 = ModelConfig(replication_factor=2, acks="all", min_insync=1, unclean=True, truncation="hw")
_HW2 = ModelConfig(replication_factor=2, acks="all", min_insync=2)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        "kip101-loss-hw", "KIP-101 case 1: an acknowledged message lost under HW truncation",
        "Follower 2 has m1,m2 but its HW (1) trails the leader's (2) by a fetch round; m2 is acked. "
        "2 restarts quickly (still in the ISR, as KIP-101 assumes) and truncates to its checkpointed "
        "HW, dropping m2. Leader 1 dies, 2 is elected; when 1 returns as follower it truncates to the "
        "new leader's LEO. m2 is gone.",
        _C1, _KIP101_1, frozenset({"lost-write", "phantom-read"}),
        (r"send 2 acked", r"2 restarts, HW 1 from checkpoint; 2 truncates to its HW 1",
         r"controller elects 2", r"1 LEO 2 > leader LEO, truncates to 1")),
    Scenario(
        "kip101-loss-epoch", "KIP-101 case 1 under leader-epoch truncation: nothing lost",
        "The same schedule with KIP-101 on: a restarted follower does not truncate to its HW; it asks "
        "the leader for the end offset of its latest epoch (OffsetsForLeaderEpoch) on its first fetch, "
        "so 2 keeps m2 and, once elected, keeps it for everyone.",
        replace(_C1, truncation="leader-epoch"), _KIP101_1, frozenset(),
        (r"send 2 acked", r"2 restarts, HW 1 from checkpoint$", r"controller elects 2",
         r"1 keeps offsets below 2 by leader epoch")),
    Scenario(
        "kip101-divergence-hw", "KIP-101 case 2: divergent logs after an unclean election, HW truncation",
        "2 dies; the ISR shrinks to {1}; 1 acks m2 alone (HW 2, checkpointed). 1 dies, 2 returns and is "
        "elected uncleanly, writes m3 at offset 1. 1 returns with HW 2 so it truncates nothing: offset 1 "
        "is m2 on 1 and m3 on 2, both below the HW.",
        _C2, _KIP101_2, frozenset({"lost-write", "phantom-read", "inconsistent-offsets"}),
        (r"send 2 acked", r"controller elects 2 UNCLEAN", r"2 appends 3 at offset 1",
         r"1 restarts, HW 2 from checkpoint$", r"^1 fetches at 2"),
        frozenset({"replicas-diverge"})),
    Scenario(
        "kip101-divergence-epoch", "KIP-101 case 2 under leader-epoch truncation: no divergence",
        "The same schedule with KIP-101 on: 1 asks for the end of epoch 0 on the new leader (offset 1), "
        "truncates m2 and copies m3, so the replicas agree. m2 itself stays lost: only 1 had it, and the "
        "unclean election gave up on it; leader epochs cannot bring it back.",
        replace(_C2, truncation="leader-epoch"), _KIP101_2,
        frozenset({"lost-write", "phantom-read", "inconsistent-offsets"}),
        (r"controller elects 2 UNCLEAN", r"1 truncates to 1 by leader epoch; 1 fetches at 1: 1 record")),
    Scenario(
        "follower-hw-round", "The extra fetch round before a follower's HW moves",
        "After m1 is produced: the first fetch copies m1 (follower LEO 1, both HWs 0); the second tells "
        "the leader the follower's LEO, so the leader's HW moves to 1 and m1 is acked, but its response "
        "carried the HW read before (Kafka's Partition.fetchRecords reads, then updates the follower's "
        "state); only the third fetch moves the follower's HW to 1.",
        _HW2, _s("produce fetch(2) fetch(2) fetch(2)"), frozenset(),
        (r"2 fetches at 0: 1 record\(s\), HW 0", r"2 fetches at 1: nothing, HW 0; send 1 acked",
         r"2 fetches at 1: nothing, HW 1")),
    Scenario(
        "follower-hw-round-seed", "Seed 000's figures: the follower's HW moves on the second fetch",
        "Seed 000 draws the round as: m1 written (leader LEO 1, HW 0); the follower fetches it (LEO 1, "
        "HWs 0, remote LEO 0); on the next fetch, at offset 1, the leader sets the remote LEO to 1, its "
        "HW to 1, and answers with that HW, so the follower's HW is 1 as well. One fetch fewer than "
        "follower-hw-round, where the response carries the HW read before the update.",
        replace(_HW2, follower_hw="seed"), _s("produce fetch(2) fetch(2)"), frozenset(),
        (r"2 fetches at 0: 1 record\(s\), HW 0", r"2 fetches at 1: nothing, HW 1; send 1 acked")),
    Scenario(
        "isr-shrink-expand", "ISR shrink of a lagging follower and its return",
        "3 loses its link to leader 1 but not to the controller, so it is not fenced: it just stops "
        "fetching. The acks=all write waits until the leader's expiration check drops 3 (not caught up "
        "for longer than the lag time, seed 002), then the HW moves and the write is acked. After the "
        "link heals, 3's first fetch copies the record (fetch offset 0, below the HW: not in sync yet); "
        "the second, at offset 1 (>= the HW and the epoch's start offset), puts it back in the ISR.",
        ModelConfig(replication_factor=3, acks="all", min_insync=2),
        _s("cut(1,3) produce fetch(2) fetch(2) tick tick tick heal fetch(3) fetch(3)"),
        frozenset(),
        (r"t=3; 1 shrinks ISR to \{1,2\} \(lag\); send 1 acked", r"3 fetches at 0: 1 record\(s\), HW 1$",
         r"3 fetches at 1: nothing, HW 1; ISR expands to \{1,2,3\}")),
    Scenario(
        "not-enough-replicas", "NOT_ENOUGH_REPLICAS when the ISR is below min.insync",
        "m1 is appended while the ISR is full, then 2 and 3 die and are fenced: the ISR drops to {1}, "
        "below min.insync.replicas, so the HW does not pass m1 (Partition.maybeIncrementLeaderHW's "
        "isUnderMinIsr check, Kafka 3.7 and later) and m1 waits until its request times out (written, "
        "outcome unknown to the client). m2 is refused before the append (NOT_ENOUGH_REPLICAS: "
        "certainly not written).",
        ModelConfig(replication_factor=3, acks="all", min_insync=2),
        _s("produce crash(2) crash(3) tick produce"), frozenset(),
        (r"controller fences 3$", r"send 2: NOT_ENOUGH_REPLICAS \(ISR \{1\} < 2\)")),
    Scenario(
        "acks1-failover-loss", "Loss of an acks=1 write on leader failover",
        "With acks=1 the leader acks m1 once it is in its own log. It dies before any follower fetched "
        "it; 2 is elected (a clean election: the ISR was full) and the old leader truncates m1 away when "
        "it returns as a follower.",
        ModelConfig(replication_factor=3, acks="1", min_insync=2),
        _s("produce crash(1) tick restart(1) fetch(1)"), frozenset({"lost-write"}),
        (r"acks=1 ok", r"controller elects 2 \(epoch 1\)", r"1 truncates to 0 by leader epoch")),
    Scenario(
        "unclean-election-loss", "Loss under unclean leader election",
        "Followers 2 and 3 are paused; the controller fences them, so the ISR is {1} and, with "
        "min.insync.replicas=1, 1 acks m1 alone (a fenced broker does not hold the HW back). 1 dies; 2 "
        "and 3 return; the only ISR member is down, so the controller elects 2 uncleanly and m1 is gone.",
        ModelConfig(replication_factor=3, acks="all", min_insync=1, unclean=True),
        _s("pause(2) pause(3) produce tick tick tick crash(1) resume(2) resume(3) tick restart(1) fetch(1)"),
        frozenset({"lost-write", "phantom-read"}),
        (r"controller fences 2; controller fences 3; send 1 acked", r"controller elects 2 UNCLEAN",
         r"1 truncates to 0 by leader epoch")),
    Scenario(
        "elr-wipe-leader", "KIP-966: the ELR keeps committed data when the last ISR member is wiped",
        "m1 is acked with the full ISR. 2 and 3 are paused and fenced: the ISR falls to {1}, below "
        "min.insync.replicas=2, and 3, which leaves it while it is below, joins the ELR (2 left while "
        "the ISR was still at 2). m2 is appended but the HW stays at 1: with the ISR under min ISR it "
        "does not move. 1 is wiped: fencing it empties the ISR, 3 is elected from the ELR (it has every "
        "committed record), and 1's unclean restart drops it from the ELR. Nothing readable or acked is "
        "lost; m2 ends unknown.",
        _C3, _ELR_WIPE, frozenset(),
        (r"send 1 acked", r"controller fences 2; controller fences 3$",
         r"1 wiped .*controller elects 3 from the ELR .*drops 1 from ISR and ELR")),
    Scenario(
        "no-elr-wipe-leader", "The same schedule without ELR: the wiped last ISR member leads again",
        "Without KIP-966 the ISR keeps its last member {1} once 2 and 3 are fenced; the HW stays at 1 "
        "as in elr-wipe-leader (under min ISR it does not move, Kafka 3.7 and later: KAFKA-15583), so "
        "m2 waits. But no replica is kept eligible: when 1 comes back wiped, it is the only electable "
        "replica. It leads with an empty log, and the acked (and read) m1 is gone from every replica; "
        "m2 ends unknown.",
        replace(_C3, elr=False), _ELR_WIPE, frozenset({"lost-write", "phantom-read"}),
        (r"send 1 acked", r"controller fences 2; controller fences 3$",
         r"1 wiped .*partition offline.*send 2: leader 1 gone, outcome unknown",
         r"controller elects 1 \(epoch 2\)")),
    Scenario(
        "elr-unclean-restart-loss",
        "KIP-966's limit: an unclean restart empties the ELR; one wipe loses data",
        "As in elr-wipe-leader until 3 is in the ELR. Then 3 is killed and restarted: its log is intact, "
        "but it shut down uncleanly, so the controller drops it from the ELR. 1 is wiped: ISR and ELR "
        "are empty, and once 1 is unfenced the controller elects the last known leader, 1, with an "
        "empty log (Kafka's balanced recovery, no unclean setting needed). The acked m1 is lost with "
        "data destroyed on one node only.",
        _C3, _s("produce fetch(2) fetch(3) fetch(2) fetch(3) pause(2) pause(3) produce tick "
                "resume(2) resume(3) tick crash(3) restart(3) wipe(1)"),
        frozenset({"lost-write", "phantom-read"}),
        (r"send 1 acked", r"controller drops 3 from ISR and ELR \(unclean shutdown\)",
         r"1 wiped .*drops 1 from ISR and ELR", r"controller elects 1 \(last known leader")),
)}


def snapshot(st: State) -> dict[str, Any]:
    """Plain-data picture of a state: per replica log, LEO, HW, role; the controller."""
    reps: dict[str, Any] = {}
    for rid, r in st.replicas.items():
        role = ("down" if not r.up else "paused" if r.paused
                else "leader" if r.leader == rid else "follower")
        reps[str(rid)] = {"role": role, "log": [[o, e, v] for o, (e, v) in enumerate(r.log)],
                          "leo": r.leo, "hw": r.hw, "epoch": r.epoch}
    return {"replicas": reps,
            "controller": {"leader": st.c_leader, "epoch": st.c_epoch, "isr": sorted(st.c_isr),
                           "elr": sorted(st.c_elr), "last_known_leader": st.c_last_leader,
                           "fenced": sorted(st.fenced)},
            "acked": sorted(st.acked), "time": st.now}


def missing_mechanism(res: ScenarioResult) -> list[str]:
    """The scenario's ``mechanism`` patterns the notes do not show in order ([] if all).

    The notes, one line per step (run and heal), are searched with each pattern in
    turn (``re.MULTILINE``: ``$`` ends a step's note), from where the previous match ended.
    """
    text = "\n".join(row.note for row in res.rows[1:])
    missing: list[str] = []
    at = 0
    for pattern in res.scenario.mechanism:
        m = re.compile(pattern, re.MULTILINE).search(text, at)
        if m is None:
            missing.append(pattern)
        else:
            at = m.end()
    return missing


def run_scenario(sc: Scenario) -> ScenarioResult:
    """Replay ``sc`` from the initial state, heal, and judge."""
    st = initial_state(sc.config)
    rows = [Row(0, "start", None, "initial state", snapshot(st))]
    seen: list[str] = []
    for step in sc.steps:
        note = apply(st, step)
        rows.append(Row(len(rows), "run", step, note, snapshot(st)))
        seen += [v for v in invariant_violations(st) if v not in seen]

    def healed(step: ModelStep, note: str, state: State) -> None:
        rows.append(Row(len(rows), "heal", step, note, snapshot(state)))

    settled = settle(st, healed)
    verdict = judge(st, settled)
    return ScenarioResult(sc, tuple(rows), verdict, tuple(seen))
