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
    offsets_config,
    offsets_destroyed,
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
    #: the faults the schedule does to the read-process-write group's ``__consumer_offsets``
    #: partition (None: none)
    offsets_faults: PartitionFaults | None = None

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
        offsets = self.offsets_faults
        lost = None if offsets is None else committed_loss_reason(offsets_config(spec), offsets)
        rewound = (None if offsets is None or lost is None
                   else offsets_destroyed(sorted(offsets.families), lost))
        return transaction_rules(TransactionConfig.from_spec(spec), self.faults.families,
                                 committed_loss_reason(config, self.faults), rewound)


def _held_leader_schedule(start_s: int, fault: str, *then: str) -> tuple[str, ...]:
    """After ``start_s`` seconds of writes, hold partition 0's followers until the ISR is its
    leader alone (which then acknowledges and, with min.insync.replicas=1, moves the high
    watermark alone), then ``fault`` its leader. The ISR shrinks only while the leader is
    written to: an idle follower is in sync."""
    return (f"wait for {start_s} s", "hold followers of 0 as held",
            "wait until isr of 0 is {leader} within 20 s", *then, f"{fault} leader of 0 as old")


_GROUP = "group-truncation-under-commit"
_NEW_OWNER = "group-truncation-new-owner"
_TXN = "txn-lost-committed-write"
_TWICE = "txn-processed-twice"
_LATE = "txn-late-end"
#: The late-end recipe's schedule: six holds of producer 0's transaction ends at its
#: coordinator, each 2 s (twice its request timeout), a second apart.
_LATE_ENDS = (f"delay ends at coordinator of transaction faultline-{_LATE}-t0 by 2000 ms", "wait for 1 s")
#: What the group recipes' schedules do to partition 0, kept by hand beside them (the
#: producer's crash and the members' stops are no fault of the partition).
_TRUNCATED = PartitionFaults(frozenset({"partition", "kill"}), leader_fault=True, faulted=3, fenced=1)


def _group_spec(name: str, *schedule: str) -> TestSpec:
    """The group recipes' test: two members of a KIP-848 group committing in sync beside an
    acks=1 producer, on a topic with min.insync.replicas=1 and unclean election on. Their
    schedules ``end`` the main phase once the group committed after the truncation (the
    members then settle, committing on): 45 s only bounds it."""
    return TestSpec(
        name=name, time_limit_s=45.0, kafka=KafkaSpec(broker_config=dict(UNCLEAN_BROKER_CONFIG)),
        topic=TopicSpec(min_insync_replicas=1, unclean_leader_election_enable=True),
        producer=ProducerSpec(acks="1", enable_idempotence=False),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol="consumer", commit="sync"),
        workload=WorkloadSpec(name="group", producers=1, consumers=2, rate=300.0),
        nemesis=NemesisSpec(schedule=schedule))


RECIPES: tuple[TargetedRecipe, ...] = (
    TargetedRecipe(
        _group_spec(
            _GROUP,
            *_held_leader_schedule(
                2, "crash", "wait for 1 s",
                f"wait until group faultline-{_GROUP} has committed past 0 within 15 s",
                "crash client 0"),
            "wait until 0 has a new leader within 20 s", "release held", "restart old",
            "restart client 0",
            f"wait until group faultline-{_GROUP} has committed within 15 s", "end"),
        "group", ("reset-without-cause", "commit-backwards"), _TRUNCATED,
        "the members commit past the high watermark the leader had once alone in the ISR, so past "
        "what the held followers have; with the producer down, an unclean election makes one of "
        "them leader, truncating the log below the committed position: the owner's position "
        "moves back to where the logs diverge, and once the producer is back its next commit "
        "is lower"),
    TargetedRecipe(
        _group_spec(
            _NEW_OWNER,
            *_held_leader_schedule(
                2, "crash", "wait for 1 s",
                f"wait until group faultline-{_NEW_OWNER} has committed past 0 within 15 s",
                "stop consumer 0", "stop consumer 1"),
            "wait until 0 has a new leader within 20 s", "release held", "restart old",
            f"wait until 0 has passed group faultline-{_NEW_OWNER} within 20 s",
            "start consumer 0", "start consumer 1",
            f"wait until group faultline-{_NEW_OWNER} has committed within 15 s", "end"),
        "group", ("lost-to-group",), _TRUNCATED,
        "the members commit past what the held followers have and leave; an unclean election "
        "truncates the log below the committed position and the producer's backlog refills it "
        "past that position before new members start from it: librdkafka's new owner fetches "
        "from the committed offset without checking its leader epoch against the new leader "
        "(librdkafka 2.16.0; the Java client does, KIP-320, and rewinds: "
        "redelivery-below-commit), so the records the new leader took below it reach no member"),
    TargetedRecipe(
        TestSpec(
            name=_TXN, time_limit_s=40.0, topic=TopicSpec(min_insync_replicas=1),
            consumer=replace(ConsumerSpec(), isolation_level="read_committed"),
            workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1),
            transactions=TransactionSpec(sends=4, abort_probability=0.2, reads=4),
            nemesis=NemesisSpec(schedule=(*_held_leader_schedule(10, "lose-unflushed", "wait for 1 s"),
                                          "restart old", "release held"))),
        "transaction", ("lost-write", "torn-transaction", "G1c"),
        PartitionFaults(frozenset({"partition", "lose-unflushed"}), leader_fault=True, faulted=3,
                        fenced=1, data_loss=1),
        "the leader, alone in the ISR, acknowledges commits and loses what it had not flushed; "
        "it is re-elected as the ISR's last member with a shorter log. A transaction that read "
        "records of one whose records there were lost, and appended its own there after the loss "
        "at an offset strictly below one of the lost ones', precedes in the log's order the "
        "transaction it read from (G1c)"),
    TargetedRecipe(
        TestSpec(
            name=_TWICE, time_limit_s=30.0,
            kafka=KafkaSpec(broker_config={"offsets.topic.replication.factor": "1"}),
            consumer=replace(ConsumerSpec(), isolation_level="read_committed"),
            workload=WorkloadSpec(name="txn", producers=2, consumers=1),
            transactions=TransactionSpec(sends=4, abort_probability=0.1, reads=4),
            nemesis=NemesisSpec(schedule=(
                f"wait until group faultline-{_TWICE}-rpw has committed within 20 s", "wait for 3 s",
                f"lose-unflushed coordinator of group faultline-{_TWICE}-rpw as coord",
                "restart coord", f"wait until group faultline-{_TWICE}-rpw has committed within 30 s"))),
        "transaction", ("processed-twice",),
        # one node of three, whichever partition 0's replica it is: no committed loss there
        PartitionFaults(frozenset({"lose-unflushed"}), leader_fault=True, faulted=1, fenced=1, data_loss=1),
        "the group's offsets have one replica, on its coordinator, which loses what it had not "
        "flushed (all of that partition's log): the group's committed position is gone, and its "
        "next owner hands records an earlier committed transaction read to a later one",
        offsets_faults=PartitionFaults(frozenset({"lose-unflushed"}), leader_fault=True, faulted=1,
                                       fenced=1, data_loss=1)),
    TargetedRecipe(
        TestSpec(
            name=_LATE, time_limit_s=45.0, kafka=KafkaSpec(transaction_version=1),
            producer=ProducerSpec(request_timeout_ms=1000, delivery_timeout_ms=20000),
            consumer=replace(ConsumerSpec(), isolation_level="read_committed"),
            workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1),
            transactions=TransactionSpec(sends=3, abort_probability=0.5, gap_ms=300),
            nemesis=NemesisSpec(schedule=(
                "wait until client 0 has committed within 20 s", *_LATE_ENDS * 5, _LATE_ENDS[0], "undelay",
                "wait until caught up within 30 s"))),
        "transaction", ("aborted-read", "lost-write", "torn-transaction", "precommitted-read"),
        PartitionFaults(frozenset({"toxics"})),
        "producer 0's commit or abort is held at its coordinator past its request timeout while "
        "its retry, on a new connection, goes through; the producer begins its next transaction "
        "under the same epoch (transaction protocol version 1) and the held request lands in it "
        "when a partition or two are added: the coordinator ends it half-written, the rest opens "
        "a new transaction under the same epoch, and the producer ends that one the other way "
        "(KAFKA-17754). Version 2 bumps the epoch with each transaction and fences the held "
        "request"),
)
