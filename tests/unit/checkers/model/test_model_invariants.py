"""Hypothesis stateful tests: model invariants under random schedules."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from faultline.checkers.model.core import ModelConfig, State, Step, apply, initial_state
from faultline.checkers.model.explore import enabled_steps
from faultline.checkers.model.outcome import invariant_violations, outcome

_SETTINGS = settings(max_examples=40, stateful_step_count=25, deadline=None)
SAFE_FAULTS = frozenset({"kill", "pause", "partition", "leader-fault"})
ALL_FAULTS = frozenset({"kill", "pause", "stop", "partition", "toxics", "wipe", "lose-unflushed",
                        "leader-fault"})


class _Machine(RuleBasedStateMachine):
    faults: frozenset[str] = ALL_FAULTS

    def __init__(self) -> None:
        super().__init__()
        self.st: State = initial_state(ModelConfig())
        self.leader_hw: dict[tuple[int, int], int] = {}

    @initialize(acks=st.sampled_from(["0", "1", "all"]), mi=st.integers(1, 2), unclean=st.booleans(),
                truncation=st.sampled_from(["leader-epoch", "hw"]), rf=st.integers(2, 3))
    def setup(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int) -> None:
        self.st = initial_state(self.config(acks, mi, unclean, truncation, rf))

    def config(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int) -> ModelConfig:
        return ModelConfig(replication_factor=rf, acks=acks, min_insync=mi,  # type: ignore[arg-type]
                           unclean=unclean, truncation=truncation)  # type: ignore[arg-type]

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        choice: Step = data.draw(st.sampled_from(enabled_steps(self.st, self.faults)))
        apply(self.st, choice)

    @invariant()
    def hw_at_most_leo(self) -> None:
        assert all(r.hw <= r.leo for r in self.st.replicas.values())

    @invariant()
    def leader_hw_never_decreases(self) -> None:
        for r in self.st.replicas.values():
            if r.is_leader:
                tenure = (r.rid, r.epoch)
                assert r.hw >= self.leader_hw.get(tenure, 0)
                self.leader_hw[tenure] = r.hw


class ModelInvariants(_Machine):
    """Any config, any fault: HW <= LEO everywhere, and a leader's HW never moves back."""


class CleanSafety(_Machine):
    """acks=all, clean elections, leader epochs, only crash/pause/partition: nothing acked is lost,
    and replicas agree below the HW."""

    faults = SAFE_FAULTS

    def config(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int) -> ModelConfig:
        return ModelConfig(replication_factor=rf, acks="all", min_insync=mi, unclean=False)

    @invariant()
    def replicas_agree_below_hw(self) -> None:
        assert "replicas-diverge" not in invariant_violations(self.st)

    @invariant()
    def no_acknowledged_value_lost(self) -> None:
        if self.st.acked:
            verdict = outcome(self.st)
            assert "lost-write" not in verdict.names, verdict
            assert verdict.invariants == ()


TestModelInvariants = ModelInvariants.TestCase
TestModelInvariants.settings = _SETTINGS
TestCleanSafety = CleanSafety.TestCase
TestCleanSafety.settings = _SETTINGS
