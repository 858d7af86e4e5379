"""Replays of the seeds' scenarios: each must come out as the seeds say."""

from __future__ import annotations

import pytest

from faultline.checkers.model.replica import end_offset_for
from faultline.checkers.model.scenarios import SCENARIOS, missing_mechanism, run_scenario
from faultline.checkers.model.state import ModelConfig
from faultline.checkers.model.steps import ModelStep, apply, initial_state


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_outcome_is_as_declared(name: str) -> None:
    sc = SCENARIOS[name]
    res = run_scenario(sc)
    assert res.verdict.names == sc.expect
    assert frozenset(res.verdict.invariants) == sc.expect_invariants


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_fires_the_mechanism_it_names(name: str) -> None:
    res = run_scenario(SCENARIOS[name])
    assert SCENARIOS[name].mechanism
    assert missing_mechanism(res) == []


def test_kip101_case1_loses_acked_write_under_hw_truncation_only() -> None:
    hw = run_scenario(SCENARIOS["kip101-loss-hw"])
    epoch = run_scenario(SCENARIOS["kip101-loss-epoch"])
    assert "lost-write" in hw.verdict.names
    assert hw.verdict.drain == ((0, 1),)
    assert epoch.verdict.names == frozenset()
    assert epoch.verdict.drain == ((0, 1), (1, 2))


def test_kip101_case2_diverges_under_hw_truncation_not_under_epochs() -> None:
    hw = run_scenario(SCENARIOS["kip101-divergence-hw"])
    epoch = run_scenario(SCENARIOS["kip101-divergence-epoch"])
    assert "replicas-diverge" in hw.verdict.invariants
    assert epoch.verdict.invariants == ()
    assert epoch.invariants_during == ()
    final = {r: s["log"] for r, s in epoch.rows[-1].snapshot["replicas"].items()}
    assert final["1"] == final["2"] == [[0, 0, 1], [1, 1, 3]]  # m3 written in epoch 1


def test_follower_hw_moves_one_fetch_round_after_the_leader() -> None:
    rows = run_scenario(SCENARIOS["follower-hw-round"]).rows
    hws = [(r.snapshot["replicas"]["1"]["hw"], r.snapshot["replicas"]["2"]["hw"]) for r in rows[:5]]
    assert hws == [(0, 0), (0, 0), (0, 0), (1, 0), (1, 1)]
    assert rows[3].snapshot["acked"] == [1]


def test_follower_hw_replays_seed_000s_figures() -> None:
    # seed 000, figures fetch1..fetch4: (leader LEO, leader HW, remote LEO, follower LEO, follower HW)
    figures = [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (1, 0, 0, 1, 0), (1, 1, 1, 1, 1)]
    sc = SCENARIOS["follower-hw-round-seed"]
    st = initial_state(sc.config)
    seen = []
    for step in (None, *sc.steps):
        if step is not None:
            apply(st, step)
        leader, follower = st.replicas[1], st.replicas[2]
        seen.append((leader.leo, leader.hw, max(leader.remote[2].leo, 0), follower.leo, follower.hw))
    assert seen == figures
    assert st.acked == {1: 0}


def test_isr_shrinks_by_lag_and_expands_by_catching_up_unfenced() -> None:
    res = run_scenario(SCENARIOS["isr-shrink-expand"])
    isrs = [r.snapshot["controller"]["isr"] for r in res.rows]
    assert [1, 2] in isrs
    shrink = isrs.index([1, 2])
    assert "(lag)" in res.rows[shrink].note
    assert [1, 2, 3] in isrs[shrink:]
    expand = shrink + isrs[shrink:].index([1, 2, 3])
    assert res.rows[expand].phase == "run" and str(res.rows[expand].step) == "fetch(3)"
    assert all(3 not in r.snapshot["controller"]["fenced"] for r in res.rows)


def test_not_enough_replicas_before_append_and_a_frozen_hw_after() -> None:
    # m1 was appended with the full ISR; under min ISR the HW does not pass it (KAFKA-15583),
    # so it waits (a timeout for the client); m2 is refused before the append.
    st = initial_state(ModelConfig(acks="all", min_insync=2))
    notes = [apply(st, ModelStep.parse(s)) for s in ["produce", "crash(2)", "crash(3)", "tick", "produce"]]
    assert "NOT_ENOUGH_REPLICAS_AFTER_APPEND" not in notes[3] and st.replicas[1].hw == 0
    assert "NOT_ENOUGH_REPLICAS (" in notes[4]
    assert st.failed == frozenset({2}) and [p.value for p in st.pending] == [1] and not st.acked


def test_leader_epoch_lookup_matches_kafka_cache_semantics() -> None:
    epochs = ((0, 0), (2, 5))
    assert end_offset_for(epochs, 9, 2) == (2, 9)
    assert end_offset_for(epochs, 9, 0) == (0, 5)
    assert end_offset_for(epochs, 9, 1) == (0, 5)
    assert end_offset_for(epochs, 9, 3) == (-1, -1)
    assert end_offset_for(((3, 4),), 9, 1) == (1, 4)


def test_step_parse_round_trips_and_rejects_garbage() -> None:
    for text in ("produce", "crash(1)", "cut(1,3)"):
        assert str(ModelStep.parse(text)) == text
    with pytest.raises(ValueError):
        ModelStep.parse("explode(1)")
    with pytest.raises(ValueError):
        apply(initial_state(ModelConfig()), ModelStep("crash", 9))


def test_elr_elects_a_former_isr_member_where_no_elr_loses_the_acked_write() -> None:
    elr = run_scenario(SCENARIOS["elr-wipe-leader"])
    old = run_scenario(SCENARIOS["no-elr-wipe-leader"])
    assert elr.scenario.steps == old.scenario.steps
    # after the tick that fences 2 and 3: ISR {1}; only 3 left it below min ISR
    ctrl = elr.rows[9].snapshot["controller"]
    assert (ctrl["isr"], ctrl["elr"]) == ([1], [3])
    assert old.rows[9].snapshot["controller"]["elr"] == []
    # the HW stays under min ISR, with ELR and without (Kafka 3.7 and later: KAFKA-15583)
    assert elr.rows[9].snapshot["replicas"]["1"]["hw"] == 1
    assert old.rows[9].snapshot["replicas"]["1"]["hw"] == 1
    # wipe(1): 3 is elected from the ELR and becomes the ISR; 1 leaves the ELR (unclean restart)
    wiped = elr.rows[13].snapshot["controller"]
    assert (wiped["leader"], wiped["isr"], wiped["elr"]) == (3, [3], [])
    assert elr.verdict.drain == ((0, 1),)
    assert old.verdict.drain == ()
    assert "lost-write" in old.verdict.names


def test_elr_unclean_restart_leaves_the_last_known_leader() -> None:
    res = run_scenario(SCENARIOS["elr-unclean-restart-loss"])
    restarted = res.rows[14].snapshot["controller"]  # restart(3): out of the ELR, log intact
    assert restarted["elr"] == [] and res.rows[14].snapshot["replicas"]["3"]["log"] == [[0, 0, 1]]
    wiped = res.rows[15].snapshot["controller"]
    assert (wiped["leader"], wiped["isr"], wiped["elr"], wiped["last_known_leader"]) == (None, [], [], 1)
    elected = next(r for r in res.rows[16:] if r.snapshot["controller"]["leader"] is not None)
    assert elected.snapshot["controller"]["leader"] == 1 and "last known leader" in elected.note
    assert res.verdict.names == frozenset({"lost-write", "phantom-read"})


def test_a_graceful_stop_keeps_the_replica_in_the_elr() -> None:
    st = initial_state(ModelConfig(acks="all", min_insync=2, elr=True))
    for s in ["pause(2)", "pause(3)", "tick", "resume(2)", "resume(3)", "tick", "stop(3)", "restart(3)"]:
        apply(st, ModelStep.parse(s))
    assert st.c_isr == frozenset({1}) and st.c_elr == frozenset({3})
    apply(st, ModelStep.parse("crash(3)"))
    apply(st, ModelStep.parse("restart(3)"))
    assert st.c_elr == frozenset()
