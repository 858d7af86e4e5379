"""Replays of the seeds' scenarios: each must come out as the seeds say."""

from __future__ import annotations

import pytest

from faultline.checkers.model.core import ModelConfig, Step, apply, end_offset_for, initial_state
from faultline.checkers.model.scenarios import SCENARIOS, run_scenario


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_outcome_is_as_declared(name: str) -> None:
    sc = SCENARIOS[name]
    res = run_scenario(sc)
    assert res.verdict.names == sc.expect
    assert frozenset(res.verdict.invariants) == sc.expect_invariants


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


def test_isr_shrinks_then_expands() -> None:
    isrs = [r.snapshot["controller"]["isr"] for r in run_scenario(SCENARIOS["isr-shrink-expand"]).rows]
    assert [1, 2] in isrs
    shrink = isrs.index([1, 2])
    assert [1, 2, 3] in isrs[shrink:]


def test_not_enough_replicas_before_and_after_append() -> None:
    st = initial_state(ModelConfig(acks="all", min_insync=2))
    notes = [apply(st, Step.parse(s)) for s in ["produce", "crash(2)", "crash(3)", "tick", "produce"]]
    assert "NOT_ENOUGH_REPLICAS_AFTER_APPEND" in notes[3]
    assert "NOT_ENOUGH_REPLICAS (" in notes[4]
    assert st.failed == frozenset({2}) and st.indeterminate == frozenset({1}) and not st.acked


def test_leader_epoch_lookup_matches_kafka_cache_semantics() -> None:
    epochs = ((0, 0), (2, 5))
    assert end_offset_for(epochs, 9, 2) == (2, 9)
    assert end_offset_for(epochs, 9, 0) == (0, 5)
    assert end_offset_for(epochs, 9, 1) == (0, 5)
    assert end_offset_for(epochs, 9, 3) == (-1, -1)
    assert end_offset_for(((3, 4),), 9, 1) == (1, 4)


def test_step_parse_round_trips_and_rejects_garbage() -> None:
    for text in ("produce", "crash(1)", "cut(1,3)"):
        assert str(Step.parse(text)) == text
    with pytest.raises(ValueError):
        Step.parse("explode(1)")
    with pytest.raises(ValueError):
        apply(initial_state(ModelConfig()), Step("crash", 9))
