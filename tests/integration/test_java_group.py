"""The group workload with the Java client on a real 3-node cluster, with each rebalance
protocol (sessions of 6 s either way, static membership: each member keeps its slot's
group.instance.id, sync commits; one JVM per member). Once the group has committed and
every member holds partitions, the broker that coordinates it (``coordinator of group G``)
is cut off from the other brokers until fenced, for 6 s more, and healed, and the group
commits again; once every member holds partitions again, that role's broker is killed
while members commit and restarted 5 s later; once every member holds partitions again,
consumer 2 is stopped (its consumer closes, its partitions revoked) and started again, and
once every member holds partitions, consumer 0 is killed (SIGKILL of its JVM), consumer 1
is paused (SIGSTOP) for 9 s, past its session, and continued, and consumer 0 restarted;
once every member holds partitions, the main phase ends. The group committed again once
the isolation healed, and went on committing after the coordinator's kill, with leader
epochs; the stopped member leaves holding nothing (its last op the revocation, unless a
commit timed out on the killed coordinator retired it first) and the member started in
its slot holds partitions once every member does (a later process of the slot where the
old member's instance id was still taken); the killed member's open op, if any, ends
``info`` and its replacement is given partitions; the paused member finds its assignment lost on
resuming and rejoins, or, where the pause caught it mid-commit, its commit ends ``info``
on resuming and it is retired for a new member (its overlap with the member given its
partition in the pause permitted by the pause); and the run is judged valid, the group
checker's own verdict included. The members settle for 12 s, not
:data:`~faultline.workloads.group.SETTLE_S`: the group checker judges the group settled
once its members polled :data:`~faultline.checkers.groups.QUIET_NS` (10 s) past the last
replacement's first op, which came before the last wait was met."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from rich.console import Console

from faultline.checkers.guarantees import OVERLAP_AFTER_PAUSE
from faultline.history import Op, read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, NemesisSpec, TestSpec, WorkloadSpec
from faultline.workloads import java_group
from tests.integration.test_group import (
    assert_coordinator_isolated_while_members_commit,
    assert_coordinator_killed_while_members_commit,
    assert_kafka_and_the_group_kept_their_promises,
    isolating,
)
from tests.integration.test_group_consumer_faults import (
    assert_expelled_and_rejoined,
    assert_killed_and_replaced,
    assert_stopped_and_started,
    done,
)
from tests.schemas import validate_run_dir

pytestmark = pytest.mark.integration


def spec(protocol: str) -> TestSpec:
    name = f"it-java-group-{protocol}"
    group = f"faultline-{name}"
    # each fault on a member waits until every member holds partitions: a member holding
    # none has nothing to revoke as it leaves, nor to lose in its pause (a KIP-848 group
    # hands them out a heartbeat at a time; a classic one may be mid-rebalance)
    holding = "wait until consumers hold partitions within 20 s"
    return TestSpec(
        name=name, time_limit_s=75.0, kafka=KafkaSpec(heap_mb=384),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol=protocol, static=True),  # type: ignore[arg-type]
        workload=WorkloadSpec(name="group", client="java", producers=1, consumers=3, rate=200),
        nemesis=NemesisSpec(schedule=(
            f"wait until group {group} has committed within 15 s", holding,
            *isolating(group), holding,
            f"crash coordinator of group {group} as coord", "wait for 5 s", "restart coord", holding,
            "stop consumer 2", "start consumer 2", holding, "crash consumer 0",
            "pause consumer 1 for 9 s", "restart consumer 0", holding, "end")))


@pytest.fixture(scope="module", params=["classic", "consumer"])
def outcome(request: pytest.FixtureRequest, local_backend: None,
            tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(java_group, "SETTLE_S", 12.0)
        return run_test(spec(request.param), results=tmp_path_factory.mktemp("results"),
                        console=Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def ops(outcome: RunOutcome) -> list[Op]:
    return list(read_history(outcome.run_dir))


def test_the_run_directory_holds_to_its_schemas(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    assert {"history.jsonl.zst", "group.json"} <= set(validate_run_dir(outcome.run_dir))


def retired_on_resume(ops: list[Op]) -> Op | None:
    """The end of the op the paused member had open when paused if it ended ``info`` on its
    resume (a commit whose request timed out while it slept, say), which retires the
    member (docs/history.md); None if it went on."""
    pause, resume = done(ops, "pause-client"), done(ops, "resume-client")
    paused = pause.value["processes"][-1]
    ended = [o for o in ops if o.process == paused and o.time >= resume.time and o.type == "info"]
    return ended[0] if ended else None


def test_the_coordinators_broker_killed_while_members_commit(outcome: RunOutcome, ops: list[Op]) -> None:
    group = f"faultline-{outcome.run_dir.parent.name}"
    assert_coordinator_killed_while_members_commit(ops, f"coordinator of group {group}")


def test_the_coordinator_isolated_while_members_commit(outcome: RunOutcome, ops: list[Op]) -> None:
    group = f"faultline-{outcome.run_dir.parent.name}"
    assert_coordinator_isolated_while_members_commit(ops, f"coordinator of group {group}")


def test_a_stopped_member_leaves_and_a_new_member_takes_its_slot(ops: list[Op]) -> None:
    assert_stopped_and_started(ops, 2)


def test_a_killed_member_ends_its_open_op_info_and_its_replacement_is_given_partitions(ops: list[Op]) -> None:
    assert_killed_and_replaced(ops, 0)


def test_a_member_paused_past_its_session_is_expelled(ops: list[Op]) -> None:
    """Paused 9 s, past its 6 s session: another member was given partitions meanwhile, and
    on resuming either its first heartbeat or commit told it its member id was gone (its
    assignment lost, and it rejoined), or the op it had open when paused ended ``info``
    and it was retired, a new member taking its slot. Which one is the pause's timing."""
    end = retired_on_resume(ops)
    if end is None:
        assert_expelled_and_rejoined(ops, 1)
        return
    pause, resume = done(ops, "pause-client"), done(ops, "resume-client")
    retired = end.process
    assert any(o.f == "assign" and o.type == "ok" and o.process != retired and o.value["partitions"]
               and pause.time < o.time < resume.time for o in ops), "nobody took partitions in the pause"
    assert all(o.time <= end.time for o in ops if o.process == retired), "the retired member went on"
    before = {o.process for o in ops if o.time < resume.time}
    restarted = set(done(ops, "restart-client").value["processes"])
    newcomers = {o.process for o in ops if o.f == "assign" and o.type == "ok" and o.value["partitions"]
                 and o.time > resume.time} - before - restarted
    assert newcomers, "no new member took the retired member's slot"


def test_the_checkers_find_no_fault_of_kafka_or_the_group(outcome: RunOutcome, ops: list[Op]) -> None:
    """Where the paused member was retired on resuming, an overlap of its ownership with
    that of the member given its partition in the pause is permitted by the pause
    (``OVERLAP_AFTER_PAUSE``), not left unknown."""
    assert_kafka_and_the_group_kept_their_promises(outcome)
    end = retired_on_resume(ops)
    if end is not None:
        group = json.loads((outcome.run_dir / "results.json").read_text())["group"]
        overlaps = [a for a in group["anomalies"].get("overlapping-owners", [])
                    if a["first"]["process"] == end.process]
        assert all(a["permitted"] == OVERLAP_AFTER_PAUSE for a in overlaps), overlaps
