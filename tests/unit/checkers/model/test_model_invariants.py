"""Hypothesis stateful tests: model invariants under random schedules."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from faultline.checkers.model.controller import effective_min_isr
from faultline.checkers.model.explore import enabled_steps
from faultline.checkers.model.outcome import invariant_violations, outcome
from faultline.checkers.model.state import ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state

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
        # leader tenure -> (HW, ISR size) after the previous step
        self.under_min: dict[tuple[int, int], tuple[int, int]] = {}

    @initialize(acks=st.sampled_from(["0", "1", "all"]), mi=st.integers(1, 2), unclean=st.booleans(),
                truncation=st.sampled_from(["leader-epoch", "hw"]), rf=st.integers(2, 3), elr=st.booleans())
    def setup(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int, elr: bool) -> None:
        self.st = initial_state(self.config(acks, mi, unclean, truncation, rf, elr))

    def config(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int, elr: bool) -> ModelConfig:
        return ModelConfig(replication_factor=rf, acks=acks, min_insync=mi,  # type: ignore[arg-type]
                           unclean=unclean, truncation=truncation, elr=elr)  # type: ignore[arg-type]

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        choice: ModelStep = data.draw(st.sampled_from(enabled_steps(self.st, self.faults)))
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

    @invariant()
    def elr_and_isr_are_disjoint(self) -> None:
        assert not self.st.c_elr & self.st.c_isr
        if not self.st.config.elr:
            assert not self.st.c_elr and self.st.c_isr

    @invariant()
    def with_elr_hw_stays_while_isr_under_min(self) -> None:
        """A step that starts and ends with the leader's ISR under min ISR leaves its HW alone.

        No step grows the ISR and shrinks it again, so an advance in such a step would
        have happened under min ISR.
        """
        cfg = self.st.config
        for r in self.st.replicas.values():
            if not r.is_leader:
                continue
            tenure = (r.rid, r.epoch)
            before = self.under_min.get(tenure)
            under = len(r.isr) < effective_min_isr(cfg)
            if cfg.elr and under and before is not None and before[1] < effective_min_isr(cfg):
                assert r.hw == before[0], (tenure, before, r.hw, sorted(r.isr))
            self.under_min[tenure] = (r.hw, len(r.isr))


class ModelInvariants(_Machine):
    """Any config, any fault: HW <= LEO everywhere, a leader's HW never moves back, ELR and ISR
    never share a member, and with ELR the HW waits while the ISR is under min ISR."""


class CleanSafety(_Machine):
    """acks=all, clean elections, leader epochs, no ELR, only crash/pause/partition: nothing acked is
    lost, and replicas agree below the HW."""

    faults = SAFE_FAULTS
    elr = False

    def config(self, acks: str, mi: int, unclean: bool, truncation: str, rf: int, elr: bool) -> ModelConfig:
        return ModelConfig(replication_factor=rf, acks="all", min_insync=mi, unclean=False, elr=self.elr)

    @invariant()
    def replicas_agree_below_hw(self) -> None:
        assert "replicas-diverge" not in invariant_violations(self.st)

    @invariant()
    def no_acknowledged_value_lost(self) -> None:
        if self.st.acked:
            verdict = outcome(self.st)
            assert "lost-write" not in verdict.names, verdict
            assert verdict.invariants == ()


class CleanSafetyWithElr(CleanSafety):
    """The same with ELR on: a crash's restart is unclean and leaves the ELR, yet its log is intact,
    so nothing acked is lost either."""

    elr = True


TestModelInvariants = ModelInvariants.TestCase
TestModelInvariants.settings = _SETTINGS
TestCleanSafety = CleanSafety.TestCase
TestCleanSafety.settings = _SETTINGS
TestCleanSafetyWithElr = CleanSafetyWithElr.TestCase
TestCleanSafetyWithElr.settings = _SETTINGS
