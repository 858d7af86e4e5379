"""The group workload with the Java client, on a real 3-node cluster, with each rebalance
protocol and sync commits: every member got an assignment, its commits were acknowledged
with leader epochs, and the run is judged valid, the group checker's own verdict included.
No fault: the members settle for 8 s, not :data:`~faultline.workloads.group.SETTLE_S`
(which lets a group settle after a heal): enough for KIP-848's default 5 s heartbeats to
move partitions to the member that joined second (two heartbeats: a revocation, then the
assignment)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, TestSpec, WorkloadSpec
from faultline.workloads import java_group
from tests.integration.test_group import assert_kafka_and_the_group_kept_their_promises
from tests.schemas import validate_run_dir

pytestmark = pytest.mark.integration


def spec(protocol: str) -> TestSpec:
    return TestSpec(
        name=f"it-java-group-{protocol}", time_limit_s=10.0, kafka=KafkaSpec(heap_mb=384),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol=protocol),  # type: ignore[arg-type]
        workload=WorkloadSpec(name="group", client="java", producers=1, consumers=2, rate=200))


@pytest.fixture(scope="module", params=["classic", "consumer"])
def outcome(request: pytest.FixtureRequest, local_backend: None,
            tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(java_group, "SETTLE_S", 8.0)
        return run_test(spec(request.param), results=tmp_path_factory.mktemp("results"),
                        console=Console(file=io.StringIO()))


def test_the_java_clients_members_were_assigned_and_committed(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    assert {"history.jsonl.zst", "group.json"} <= set(validate_run_dir(outcome.run_dir))
    ops = list(read_history(outcome.run_dir))
    members = {o.process for o in ops if o.f == "poll" and o.process not in (0, "nemesis")}
    assigned = {o.process for o in ops if o.f == "assign" and o.type == "ok" and o.value["partitions"]}
    assert members == {1, 2} and assigned == members, (members, assigned)
    commits = [o for o in ops if o.f == "commit" and o.type == "ok"]
    assert {c.process for c in commits} == members
    assert all(epoch is not None for c in commits for _, _, _, epoch in c.value["offsets"])
    assert_kafka_and_the_group_kept_their_promises(outcome)
