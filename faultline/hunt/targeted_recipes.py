"""Targeted recipes for the group and transaction anomalies the guarantees permit: schedules
written by hand from the rules (:mod:`faultline.checkers.guarantees`), since the reference
model, whose recipes :mod:`.recipes` compiles, has neither groups nor transactions.

Each :class:`TargetedRecipe` is a whole test (its config and its targeted schedule, a
:class:`~faultline.spec.TestSpec`), the anomalies it shows, the faults its schedule does to
partition 0, and the rule that permits them there (:meth:`TargetedRecipe.permitted`). Each
is kept as ``examples/<name>.yaml`` (``faultline run -f``); docs/design.md, "Targeted
recipes", tabulates them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from faultline.checkers.guarantees import (
    GuaranteeConfig,
    TransactionConfig,
    committed_loss_reason,
    group_permitted,
    transaction_rules,
)
from faultline.checkers.partition_faults import PartitionFaults
from faultline.hunt.recipes import UNCLEAN_BROKER_CONFIG
from faultline.spec import (
    ConsumerSpec,
    KafkaSpec,
    NemesisSpec,
    ProducerSpec,
    TestSpec,
    TopicSpec,
    TransactionSpec,
    WorkloadSpec,
)


@dataclass(frozen=True, slots=True)
class TargetedRecipe:
    """A test whose schedule shows ``anomalies`` on partition 0, which the guarantees permit
    there (``kind``: the group rules or the transaction rules) by the faults its schedule does
    to that partition (``faults``); ``why`` says how the schedule makes them."""

    spec: TestSpec
    kind: Literal["group", "transaction"]
    anomalies: tuple[str, ...]
    faults: PartitionFaults
    why: str

    @property
    def name(self) -> str:
        return self.spec.name

    def permitted(self, spec: TestSpec | None = None) -> dict[str, str]:
        """Anomaly -> reason, for each anomaly of :attr:`kind` the guarantees permit on ``spec``'s
        config (the recipe's own by default) with :attr:`faults`."""
        spec = spec or self.spec
        config = GuaranteeConfig.from_spec(spec)
        if self.kind == "group":
            return group_permitted(config, self.faults)
        return transaction_rules(TransactionConfig.from_spec(spec), self.faults.families,
                                 committed_loss_reason(config, self.faults))


def _held_leader_schedule(start_s: int, fault: str, *then: str) -> tuple[str, ...]:
    """After ``start_s`` seconds of writes, hold partition 0's followers until the ISR is its
    leader alone (which then acknowledges and, with min.insync.replicas=1, moves the high
    watermark alone), then ``fault`` its leader. The ISR shrinks only while the leader is
    written to: an idle follower is in sync."""
    return (f"wait for {start_s} s", "hold followers of 0 as held",
            "wait until isr of 0 is {leader} within 20 s", *then, f"{fault} leader of 0 as old")


_GROUP = "group-truncation-under-commit"
_TXN = "txn-lost-committed-write"

RECIPES: tuple[TargetedRecipe, ...] = (
    TargetedRecipe(
        TestSpec(
            name=_GROUP, time_limit_s=45.0, kafka=KafkaSpec(broker_config=dict(UNCLEAN_BROKER_CONFIG)),
            topic=TopicSpec(min_insync_replicas=1, unclean_leader_election_enable=True),
            producer=ProducerSpec(acks="1", enable_idempotence=False),
            consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol="consumer", commit="sync"),
            workload=WorkloadSpec(name="group", producers=1, consumers=2, rate=300.0),
            nemesis=NemesisSpec(schedule=(
                *_held_leader_schedule(
                    2, "crash", "wait for 1 s",
                    f"wait until group faultline-{_GROUP} has committed past 0 within 15 s",
                    "crash client 0"),
                "wait until 0 has a new leader within 20 s", "release held", "restart old",
                "restart client 0",
                f"wait until group faultline-{_GROUP} has committed within 15 s"))),
        "group", ("reset-without-cause", "commit-backwards"),
        PartitionFaults(frozenset({"partition", "kill"}), leader_fault=True, faulted=3, fenced=1),
        "the members commit past the high watermark the leader had once alone in the ISR, so past "
        "what the held followers have; with the producer down, an unclean election makes one of "
        "them leader, truncating the log below the committed position: the owner's position "
        "moves back to where the logs diverge, and once the producer is back its next commit "
        "is lower"),
    TargetedRecipe(
        TestSpec(
            name=_TXN, time_limit_s=40.0, topic=TopicSpec(min_insync_replicas=1),
            consumer=replace(ConsumerSpec(), isolation_level="read_committed"),
            workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1),
            transactions=TransactionSpec(sends=4, abort_probability=0.2),
            nemesis=NemesisSpec(schedule=(*_held_leader_schedule(10, "lose-unflushed", "wait for 1 s"),
                                          "restart old", "release held"))),
        "transaction", ("lost-write", "torn-transaction"),
        PartitionFaults(frozenset({"partition", "lose-unflushed"}), leader_fault=True, faulted=3,
                        fenced=1, data_loss=1),
        "the leader, alone in the ISR, acknowledges commits and loses what it had not flushed; "
        "it is re-elected as the ISR's last member with a shorter log"),
)
