"""The model-to-targeted compiler: each rule on the recipes' own schedules, waits read
from the model's replay (so the same steps compile differently where the model's state
differs), and a clear error for what no rule covers."""

from __future__ import annotations

import pytest

from faultline.checkers.model.state import ModelConfig
from faultline.checkers.model.steps import ModelStep
from faultline.hunt.compile import CompileError, compile_schedule
from faultline.targeted import parse_schedule

UNCLEAN = ModelConfig(replication_factor=3, acks="all", min_insync=1, unclean=True, elr=True)
NO_ELR = ModelConfig(replication_factor=3, acks="all", min_insync=2, elr=False)
ELR = ModelConfig(replication_factor=3, acks="all", min_insync=2, elr=True)
HELD = "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick"


def _compile(model: str, config: ModelConfig) -> tuple[str, ...]:
    return compile_schedule([ModelStep.parse(s) for s in model.split()], config)


def test_an_unclean_election_after_the_followers_are_held() -> None:
    assert _compile("cut(1,2) cut(1,3) produce tick tick tick crash(1) tick heal produce restart(1) fetch(1)",
                    UNCLEAN) == (
        "wait for 2 s", "hold followers of 0 as held", "wait until isr of 0 is {leader} within 20 s",
        "wait for 1 s", "crash leader of 0 as old", "wait until 0 has a new leader within 30 s",
        "release held", "restart old")


def test_crashed_followers_are_fenced_then_restarted_as_new_registrations_one_at_a_time() -> None:
    schedule = _compile(f"{HELD} crash(2) tick restart(2) tick crash(3) tick restart(3) tick wipe(1) heal "
                        "tick fetch(2)", ELR)
    assert schedule == (
        "wait for 2 s", "hold followers of 0 as held", "wait until isr of 0 is {leader} within 20 s",
        "crash first of held", "wait until first of held fenced within 30 s", "restart first of held",
        "wait until first of held registered within 60 s",
        "crash second of held", "wait until second of held fenced within 30 s", "restart second of held",
        "wait until second of held registered within 60 s",
        "wait for 1 s", "wipe leader of 0 as old", "restart old", "release held")
    assert parse_schedule(schedule, partitions=3, nodes=3), "valid as a spec's nemesis.schedule"


def test_the_last_isr_member_loses_what_it_had_not_flushed_and_restarts_at_once() -> None:
    """The model's lose-unflushed restarts the replica in the same step, as its wipe does."""
    schedule = _compile(f"{HELD} lose-unflushed(1) heal tick fetch(2) fetch(3) produce",
                        ModelConfig(replication_factor=3, acks="all", min_insync=1, elr=True))
    assert schedule == (
        "wait for 2 s", "hold followers of 0 as held", "wait until isr of 0 is {leader} within 20 s",
        "wait for 1 s", "lose-unflushed leader of 0 as old", "restart old", "release held")
    assert parse_schedule(schedule, partitions=3, nodes=3), "valid as a spec's nemesis.schedule"


def test_no_controller_action_while_both_followers_are_out() -> None:
    # two of three combined KRaft nodes down: no quorum, so no fencing, no election
    with pytest.raises(CompileError, match=r"step 14 tick: replicas 2, 3 are down or paused"):
        _compile(f"{HELD} crash(2) crash(3) tick restart(2) restart(3)", ELR)
    assert _compile("pause(2) pause(3) produce crash(1) resume(2) resume(3) tick restart(1)", ELR)[-2] == \
        "wait until 0 has a new leader within 30 s", "no tick while they are paused: allowed"


def test_no_wait_for_the_leader_alone_when_nothing_was_produced_while_held() -> None:
    assert "wait for 1 s" not in _compile("pause(2) pause(3) crash(1) resume(2) resume(3) tick",
                                          ModelConfig(replication_factor=3, acks="1", min_insync=2))
    assert "wait for 1 s" in _compile("pause(2) pause(3) produce crash(1) resume(2) resume(3) tick",
                                      ModelConfig(replication_factor=3, acks="1", min_insync=2))


def test_the_waits_come_from_the_replay_on_the_config() -> None:
    # without unclean election the ticks after the crash elect nobody: no wait observes them
    with pytest.raises(CompileError, match=r"step 8 tick: the ticks change nothing a wait can observe"):
        _compile("cut(1,2) cut(1,3) produce tick tick tick crash(1) tick heal", NO_ELR)


@pytest.mark.parametrize(("model", "message"), [
    ("crash(2) tick", "step 1 crash(2): no targeted step realises it"),
    ("cut(2,3) cut(1,2)", "step 1 cut(2,3)"),
    ("isolate(1)", "step 1 isolate(1)"),
    ("pause(2) pause(3) heal", "step 3 heal"),
    ("restart(1)", "step 1 restart(1): replica 1 is up"),
    ("produce tick", None),  # nothing after the last fault: only the opening wait
])
def test_what_no_rule_covers_is_named(model: str, message: str | None) -> None:
    if message is None:
        assert _compile(model, ELR) == ("wait for 2 s",)
        return
    with pytest.raises(CompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _compile(model, ELR)


def test_a_tick_without_a_quorum_is_refused_whichever_two_replicas_are_out() -> None:
    # replica 1 and one follower down: two of the three KRaft voters, no controller to fence or elect
    with pytest.raises(CompileError, match=r"step 8 tick: replicas 1, 2 are down or paused"):
        _compile("pause(2) pause(3) resume(2) resume(3) crash(1) tick crash(2) tick restart(1)", ELR)


def test_the_followers_are_faulted_as_a_group_only_while_replica_1_leads() -> None:
    # after the failover 'followers of 0' names replica 1 and 3: the model cuts 1 from 2 and 3
    with pytest.raises(CompileError, match=r"step 4 cut\(1,2\): replica 1 no longer leads"):
        _compile("crash(1) tick restart(1) cut(1,2) cut(1,3) produce tick tick tick crash(1)", ELR)


def test_a_new_leader_after_another_replica_led_is_not_compared_with_replica_1() -> None:
    # 'has a new leader' compares with the leader the schedule last resolved (replica 1's
    # node): after 2 took over, that wait is met at once, before 2 is even fenced
    schedule = _compile("pause(2) pause(3) resume(2) resume(3) crash(1) tick restart(1) crash(2) tick "
                        "restart(2)", ELR)
    assert schedule[-3:] == ("crash first of held", "wait until first of held fenced within 30 s",
                             "restart first of held")


@pytest.mark.parametrize(("model", "message"), [
    ("wipe(1) restart(1)", r"step 2 restart\(1\): replica 1 is up: the model's restart does nothing"),
    ("crash(1) wipe(1)", r"step 2 wipe\(1\): replica 1 is down: the model's wipe does nothing"),
    ("crash(1) lose-unflushed(1)",
     r"step 2 lose-unflushed\(1\): replica 1 is down: the model's lose-unflushed does nothing"),
    ("pause(2) pause(3) resume(2) resume(3) crash(2) tick restart(2) restart(3)",
     r"step 8 restart\(3\): replica 3 is up: the model's restart does nothing"),  # 'restart held' did
])
def test_a_fault_the_model_ignores_is_refused(model: str, message: str) -> None:
    # a targeted restart stops and starts a running node; a targeted wipe deletes a down one's data
    with pytest.raises(CompileError, match=message):
        _compile(model, ELR)
