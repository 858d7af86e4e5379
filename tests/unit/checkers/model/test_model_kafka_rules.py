"""The reference model against Kafka's own source, rule by rule.

Each test replays a schedule whose outcome Kafka's code decides, with the source it
follows named in the test. A test here failed on the model before its rule was fixed.
"""

from __future__ import annotations

from faultline.checkers.model.explore import Bound, legal_replay, replay
from faultline.checkers.model.outcome import outcome
from faultline.checkers.model.state import ModelConfig
from faultline.checkers.model.steps import ModelStep
from faultline.checkers.model.table import Cell


def _steps(text: str) -> list[ModelStep]:
    return [ModelStep.parse(t) for t in text.split()]


def test_without_elr_the_hw_does_not_advance_while_the_isr_is_below_min_insync() -> None:
    # Partition.maybeIncrementLeaderHW returns early on isUnderMinIsr since Kafka 3.7
    # (KAFKA-15583), unconditionally: 3.9 (no ELR) as well as 4.x. 2 and 3 lag out
    # before fetching m1; the leader alone must not commit it, so nobody can read it
    # and the wipe of the leader that follows loses nothing readable.
    cfg = ModelConfig(replication_factor=3, acks="all", min_insync=2, elr=False)
    st = replay(cfg, _steps("produce tick tick tick"))
    assert st.c_isr == frozenset({1})
    assert st.replicas[1].hw == 0
    assert st.exposed == frozenset()
    cell = Cell("all", 2, False, frozenset({"wipe", "leader-fault"}), 1)
    st = legal_replay(cell.model_config(), cell.faults, Bound(max_data_loss=1),
                      _steps("produce tick tick tick wipe(1)"))
    assert st is not None
    assert "phantom-read" not in outcome(st).names


def test_min_insync_above_the_replication_factor_counts_as_the_replication_factor() -> None:
    # Partition.effectiveMinIsr is min(min.insync.replicas, replicas): appendRecordsToLeader
    # and checkEnoughReplicasReachOffset compare the ISR with it, so with RF 2 and
    # min.insync.replicas=3 a full ISR takes and acks acks=all writes.
    cfg = ModelConfig(replication_factor=2, acks="all", min_insync=3)
    st = replay(cfg, _steps("produce fetch(2) fetch(2)"))
    assert st.failed == frozenset()
    assert st.acked == {1: 0}
