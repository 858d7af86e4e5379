"""Group consumers killed and paused on a real 3-node cluster, with each rebalance protocol
(sessions of 6 s either way, static membership: each member keeps its slot's
group.instance.id): once the group has committed and every member holds partitions,
consumer 2 is stopped (it leaves) and started again, and once every member holds
partitions again, consumer 0 is killed (SIGKILL of its child process), consumer 1 is paused
(SIGSTOP) for 8 s, past the session timeout, and continued, and consumer 0 restarted. The
stopped member's partitions are revoked before its process ends (unless a timed-out op
retired it first), and the member started in its slot holds partitions once every member
does; the killed member's open op, if any, ends ``info``, its replacement is a new process; the group
rebalances the killed and the paused member's partitions to the others, the paused member
finds its assignment lost and rejoins; and the run is judged valid, the group checker's
own verdict included."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from faultline.history import Op, read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, NemesisSpec, TestSpec, WorkloadSpec
from faultline.workloads.group import held_after
from faultline.workloads.outcomes import CRASH_ERROR
from tests.integration.test_group import assert_kafka_and_the_group_kept_their_promises
from tests.schemas import validate_run_dir

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["classic", "consumer"])
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> RunOutcome:
    name = f"it-group-consumer-faults-{request.param}"
    # a fault on a member waits until every member holds partitions: one holding none has
    # nothing to revoke as it leaves, nor to lose in its pause (a KIP-848 group hands them
    # out a heartbeat at a time after its first member's commit)
    holding = "wait until consumers hold partitions within 15 s"
    spec = TestSpec(
        name=name, time_limit_s=18.0, kafka=KafkaSpec(heap_mb=384),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol=request.param, static=True),
        workload=WorkloadSpec(name="group", producers=1, consumers=3, rate=200),
        nemesis=NemesisSpec(schedule=(f"wait until group faultline-{name} has committed within 15 s",
                                      holding, "stop consumer 2", "start consumer 2", holding,
                                      "crash consumer 0", "pause consumer 1 for 8 s", "restart consumer 0")))
    return run_test(spec, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def ops(outcome: RunOutcome) -> list[Op]:
    return list(read_history(outcome.run_dir))


def done(ops: list[Op], f: str) -> Op:
    """The completion of the schedule's one ``f`` step: without error, and the step's own
    (``step`` in its value), not the final heal's."""
    (op,) = [o for o in ops if o.process == "nemesis" and o.f == f and "result" in o.value]
    assert op.error is None and "step" in op.value, op
    return op


def test_a_killed_consumer_ends_its_open_op_info_and_is_replaced_by_a_new_member(
        outcome: RunOutcome, ops: list[Op]) -> None:
    assert outcome.error is None and outcome.recovered
    assert "history.jsonl.zst" in validate_run_dir(outcome.run_dir)
    crash, restart = assert_killed_and_replaced(ops, 0)
    killed = crash.value["processes"]
    # the others took the killed member's partitions before it came back
    assert any(o.f == "assign" and o.type == "ok" and o.process not in killed and
               crash.time < o.time < restart.time and o.value["partitions"] for o in ops)


def test_a_consumer_paused_past_its_session_is_expelled_and_rejoins(ops: list[Op]) -> None:
    pause, resume = assert_expelled_and_rejoined(ops, 1)
    assert (resume.time - pause.time) / 1e9 >= 8


def assert_killed_and_replaced(ops: list[Op], consumer: int) -> tuple[Op, Op]:
    """Consumer ``consumer`` was killed and restarted: the op it had open, if any, ended
    ``info`` with the crash's error (a kill between two ops finds none open: a CI run's
    did), none of its processes took a later op, and its replacement, a new process, was
    given partitions. The crash's completion and the restart's."""
    crash, restart = done(ops, "crash-client"), done(ops, "restart-client")
    assert crash.value["consumers"] == [consumer] == restart.value["consumers"]
    killed, [replacement] = crash.value["processes"], restart.value["processes"]
    ended = [o for o in ops if o.process in killed and o.error == CRASH_ERROR]
    last = [o for o in ops if o.process in killed][-1]
    if ended:
        assert ended == [last] and last.type == "info" and last.f in ("poll", "commit")
    else:
        assert last.type != "invoke"
    assert all(o.time <= crash.time for o in ops if o.process in killed)  # no later op
    assert replacement not in killed
    assert any(o.process == replacement and o.f == "assign" and o.value["partitions"] for o in ops)
    return crash, restart


def assert_expelled_and_rejoined(ops: list[Op], consumer: int) -> tuple[Op, Op]:
    """Consumer ``consumer`` was paused past its session: another member was given
    partitions meanwhile, and once resumed it found its assignment lost and rejoined. The
    pause's completion and the resume's."""
    pause, resume = done(ops, "pause-client"), done(ops, "resume-client")
    assert pause.value["consumers"] == [consumer] == resume.value["consumers"]
    paused = pause.value["processes"][-1]
    others = [o for o in ops if o.f == "assign" and o.type == "ok" and o.process != paused
              and pause.time < o.time < resume.time and o.value["partitions"]]
    assert others, "no other member was given partitions while it was paused"
    # a stopped process journals nothing: its ops after the pause's completion came after
    # the SIGCONT, which may be journaled before the resume's completion is
    lost = [o for o in ops if o.process == paused and o.f == "lost" and o.time > pause.time]
    assert lost, "the paused member never found its assignment lost"
    assert any(o.process == paused and o.f == "assign" and o.time > lost[0].time and o.value["partitions"]
               for o in ops), "the paused member did not rejoin"
    return pause, resume


def test_a_stopped_consumer_leaves_and_a_new_member_takes_its_slot(ops: list[Op]) -> None:
    assert_stopped_and_started(ops, 2)


def assert_stopped_and_started(ops: list[Op], consumer: int) -> None:
    """Consumer ``consumer`` was stopped and started: it left holding nothing, its last op
    the revocation of its partitions, or, where an op of its member ended ``info`` after the
    stop began (a commit to a coordinator gone), retiring it, a successor that had none to
    revoke; and the slot's new member held partitions when the wait for every member to hold
    some was met (the wait counts each slot's current process): as its first process or,
    where the stopped member's leave never reached the coordinator (a KIP-848 static
    member's instance id stays taken, UNRELEASED_INSTANCE_ID, until its session expires),
    a later one of the slot."""
    stop, start = done(ops, "stop-client"), done(ops, "start-client")
    assert stop.value["consumers"] == [consumer] == start.value["consumers"]
    left, [new] = stop.value["processes"], start.value["processes"]
    mine = [o for o in ops if o.process in left]
    held: frozenset[tuple[str, int]] = frozenset()
    last = mine[-1]
    for o in mine:
        held = held_after(held if o.process == last.process else frozenset(), o.type, o.f, o.value)
    assert not held, f"it left holding {sorted(held)}"
    began = next(o.time for o in ops if o.f == "stop-client" and "result" not in o.value)
    retired = [o for o in mine if o.type == "info" and o.time > began]
    assert ((last.type, last.f) == ("ok", "revoke") and last.value["partitions"]) or retired, last
    assert new not in left
    held_by_all = next((o for o in ops if o.process == "nemesis" and o.time > start.time
                        and "hold partitions" in o.value.get("step", "") and "result" in o.value), None)
    assert held_by_all is not None, "no wait for every member to hold partitions ended after the start"
    assert held_by_all.value["result"].startswith("met"), held_by_all


def test_the_checkers_find_no_fault_of_kafka_or_the_group(outcome: RunOutcome) -> None:
    assert_kafka_and_the_group_kept_their_promises(outcome)
