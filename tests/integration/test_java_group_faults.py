"""Java group members paused and killed on a real 1-node cluster (classic protocol, 6 s
sessions, static membership: each member keeps its slot's group.instance.id, sync
commits): once the group has committed, member 0's JVM is paused (SIGSTOP) for 9 s, past
its session, then member 1's JVM is killed (SIGKILL) and restarted. The paused member is
expelled: on resuming it finds its assignment lost and rejoins; the killed member's open op
ends ``info`` with the crash's error, and its replacement, a new process in its slot, is
given partitions; the run is judged valid, the group checker's own verdict included. The
members settle for 12 s, not :data:`~faultline.workloads.group.SETTLE_S`: the group checker
judges the group settled once its members polled :data:`~faultline.checkers.groups.QUIET_NS`
(10 s) past the replacement's first op, which comes a JVM's start (1 to 5 s) after the
restart, 2 s before the time limit."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from faultline.history import Op, read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, NemesisSpec, TestSpec, TopicSpec, WorkloadSpec
from faultline.workloads import java_group
from tests.integration.test_group import assert_kafka_and_the_group_kept_their_promises
from tests.integration.test_group_consumer_faults import (
    assert_expelled_and_rejoined,
    assert_killed_and_replaced,
)

pytestmark = pytest.mark.integration

NAME = "it-java-group-faults"


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    spec = TestSpec(
        name=NAME, time_limit_s=14.0, kafka=KafkaSpec(nodes=1, heap_mb=384),
        topic=TopicSpec(replication_factor=1, min_insync_replicas=1),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol="classic", static=True),
        workload=WorkloadSpec(name="group", client="java", producers=1, consumers=2, rate=200),
        nemesis=NemesisSpec(schedule=(f"wait until group faultline-{NAME} has committed within 15 s",
                                      "pause consumer 0 for 9 s", "crash consumer 1", "restart consumer 1")))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(java_group, "SETTLE_S", 12.0)
        return run_test(spec, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def ops(outcome: RunOutcome) -> list[Op]:
    return list(read_history(outcome.run_dir))


def test_the_run_is_judged_valid_the_group_checkers_verdict_included(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    assert {"history.jsonl.zst", "group.json"} <= {p.name for p in outcome.run_dir.iterdir()}
    assert_kafka_and_the_group_kept_their_promises(outcome)


def test_a_member_paused_past_its_session_is_expelled_and_rejoins(ops: list[Op]) -> None:
    """Paused 9 s, past its 6 s session: the coordinator gave its partitions to member 1,
    and its first heartbeat or commit after told it its member id was gone."""
    assert_expelled_and_rejoined(ops, 0)


def test_a_killed_member_ends_its_open_op_info_and_its_replacement_is_given_partitions(ops: list[Op]) -> None:
    assert_killed_and_replaced(ops, 1)
