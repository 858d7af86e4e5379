"""The targeted schedule language: parsing, validation, role resolution, conditions."""

from __future__ import annotations

import pytest

from faultline.cluster.protocol import PartitionState
from faultline.errors import SpecError
from faultline.spec import ConsumerSpec, NemesisSpec, TestSpec, WorkloadSpec
from faultline.targeted import (
    Action,
    ClockChange,
    Target,
    View,
    Wait,
    condition_met,
    coordinator_partition,
    parse_schedule,
    parse_step,
    resolve,
)

#: partition 0 led by 1 with ISR {1,3}; partition 1 leaderless; partition 2 led by 2 alone
VIEW = View({0: PartitionState(1, (1, 3), (1, 2, 3)),
             1: PartitionState(None, (3,), (1, 2, 3)),
             2: PartitionState(2, (2,), (2, 3, 1))}, controller=3)


@pytest.mark.parametrize(("text", "step"), [
    ("crash leader of 0 as old", Action("crash", Target("leader", partition=0), "crash leader of 0 as old",
                                        bind="old")),
    ("Pause the followers of 2",
     Action("pause", Target("followers", partition=2), "Pause the followers of 2")),
    ("isolate a follower of 1",
     Action("isolate", Target("follower", partition=1), "isolate a follower of 1")),
    ("wipe controller", Action("wipe", Target("controller"), "wipe controller")),
    ("restart node 3 unclean", Action("restart", Target("node", node=3), "restart node 3 unclean",
                                      unclean=True)),
    ("restart old", Action("restart", Target("name", name="old"), "restart old")),
    ("resume 2", Action("resume", Target("node", node=2), "resume 2")),
    ("heal", Action("heal", None, "heal")),
    ("wait for 2 s", Wait("for", 2.0, "wait for 2 s")),
    ("wait for 1.5s", Wait("for", 1.5, "wait for 1.5s")),
    ("wait until isr of 0 is {leader} within 20 s",
     Wait("isr", 20.0, "wait until isr of 0 is {leader} within 20 s", 0, ("leader",))),
    ("wait until isr of 1 is {leader, 3}", Wait("isr", 30.0, "wait until isr of 1 is {leader, 3}", 1,
                                                ("leader", 3))),
    ("wait until 0 has a new leader", Wait("new-leader", 30.0, "wait until 0 has a new leader", 0)),
    ("wait until caught up within 5 s", Wait("caught-up", 5.0, "wait until caught up within 5 s")),
    ("wait until 2 caught up", Wait("caught-up", 30.0, "wait until 2 caught up", 2)),
    ("hold followers of 0 as held",
     Action("hold", Target("followers", partition=0), "hold followers of 0 as held", bind="held")),
    ("release held", Action("release", Target("name", name="held"), "release held")),
    ("wait until held registered within 60 s",
     Wait("registered", 60.0, "wait until held registered within 60 s", target=Target("name", name="held"))),
    ("crash second of held", Action("crash", Target("second", name="held"), "crash second of held")),
    ("lose-unflushed leader of 0 as old", Action("lose-unflushed", Target("leader", partition=0),
                                                 "lose-unflushed leader of 0 as old", bind="old")),
    ("wait until node 2 registered",
     Wait("registered", 30.0, "wait until node 2 registered", target=Target("node", node=2))),
    ("degrade leader of 0 loss 30%",
     Action("degrade", Target("leader", partition=0), "degrade leader of 0 loss 30%", loss=0.3)),
    ("degrade node 2 rate 256 kbit",
     Action("degrade", Target("node", node=2), "degrade node 2 rate 256 kbit", rate_kbit=256)),
    ("restore", Action("restore", None, "restore")),
    ("bump node 2 clock +300s",
     Action("bump", Target("node", node=2), "bump node 2 clock +300s", clock=ClockChange(300))),
    ("bump leader of 0 clock -60",
     Action("bump", Target("leader", partition=0), "bump leader of 0 clock -60", clock=ClockChange(-60))),
    ("strobe node 2 clock 5s for 10s",
     Action("strobe", Target("node", node=2), "strobe node 2 clock 5s for 10s", clock=ClockChange(5, 10.0))),
    ("strobe node 2 clock 5 s for 10 s",  # as the module's docstring writes it
     Action("strobe", Target("node", node=2), "strobe node 2 clock 5 s for 10 s",
            clock=ClockChange(5, 10.0))),
    ("bump node 2 clock -30 s", Action("bump", Target("node", node=2), "bump node 2 clock -30 s",
                                       clock=ClockChange(-30))),
    ("reset clocks", Action("reset", None, "reset clocks")),
    ("delay leader of 0 by 3000 ms",
     Action("delay", Target("leader", partition=0), "delay leader of 0 by 3000 ms", delay_ms=3000)),
    ("delay coordinator of transaction t-0 by 50ms",
     Action("delay", Target("coordinator", transaction="t-0"), "delay coordinator of transaction t-0 by 50ms",
            delay_ms=50)),
    ("delay coordinator of transaction t-0 by 5000 ms on 50% of connections",
     Action("delay", Target("coordinator", transaction="t-0"),
            "delay coordinator of transaction t-0 by 5000 ms on 50% of connections", delay_ms=5000,
            share=0.5)),
    ("delay ends at coordinator of transaction t-0 by 2000 ms",
     Action("delay", Target("coordinator", transaction="t-0"),
            "delay ends at coordinator of transaction t-0 by 2000 ms", delay_ms=2000, ends=True)),
    ("delay ends at node 2 by 1500ms",
     Action("delay", Target("node", node=2), "delay ends at node 2 by 1500ms", delay_ms=1500, ends=True)),
    ("undelay", Action("undelay", None, "undelay")),
    ("crash consumer 1", Action("crash", None, "crash consumer 1", consumers=(1,))),
    ("restart consumer 0", Action("restart", None, "restart consumer 0", consumers=(0,))),
    ("pause consumer 1 for 8 s",
     Action("pause", None, "pause consumer 1 for 8 s", consumers=(1,), for_s=8.0)),
    ("pause client 0 for 2.5s", Action("pause", None, "pause client 0 for 2.5s", clients=(0,), for_s=2.5)),
    ("stop the consumer 2", Action("stop", None, "stop the consumer 2", consumers=(2,))),
    ("Start consumer 0", Action("start", None, "Start consumer 0", consumers=(0,))),
])
def test_steps_parse(text: str, step: Action | Wait) -> None:
    assert parse_step(text) == step


@pytest.mark.parametrize(("lines", "message"), [
    (["crsh leader of 0"], "unknown step 'crsh'"),
    (["crash leader 0"], "no target 'leader 0'"),
    (["crash leader of 7"], "partitions 0 to 2, not 7"),
    (["pause node 9"], "nodes are 1 to 3, not 9"),
    (["restart old"], "'old' is not bound"),
    (["resume held as x"], "resume cannot bind a name"),
    (["crash leader of 0 as leader"], "'leader' cannot be a name"),
    (["wait for ever"], "wait for needs a number of seconds"),
    (["wait for 0 s"], "above 0 and at most 600"),
    (["wait until 0 is happy"], "unknown condition '0 is happy'"),
    (["wait until isr of 0 is"], "needs a set"),
    (["wait until isr of 0 is {}"], "name at least one member"),
    (["wait until isr of 0 is {held}"], "'held' is not bound"),
    (["wait"], "wait needs 'for SECONDS s'"),
    (["heal 2"], "heal takes nothing"),
    (["release held as x"], "release cannot bind a name"),
    (["wait until held registered"], "'held' is not bound"),
    (["wait until registered"], "unknown condition 'registered'"),
    (["crash first of old"], "'old' is not bound"),
    (["wait until node 7 registered"], "nodes are 1 to 3, not 7"),
    (["pause followers of 0 as held", "", "resume held"], "nemesis.schedule[1] '': empty step"),
    (["degrade leader of 0 loss 0%"], "degrade needs 'TARGET loss P%'"),
    (["degrade leader of 0 rate fast kbit"], "degrade needs 'TARGET loss P%'"),
    (["degrade node 9 loss 10%"], "nodes are 1 to 3, not 9"),
    (["restore links"], "restore takes nothing"),
    (["bump node 2 clock +0s"], "bump needs 'TARGET clock +S s'"),
    (["bump node 2 s clock 5"], "no target 'node 2 s'"),
    (["bump node 2 clock +3601s"], "at most 3600"),
    (["strobe node 2 clock 5s"], "strobe 'TARGET clock S s for D s'"),
    (["bump node 9 clock +5s"], "nodes are 1 to 3, not 9"),
    (["reset"], "reset takes 'clocks'"),
    (["delay leader of 0 by 0 ms"], "delay needs 'TARGET by MS ms'"),
    (["delay leader of 0 by 2 s"], "delay needs 'TARGET by MS ms'"),
    (["delay leader of 0"], "delay needs 'TARGET by MS ms'"),
    (["delay leader of 0 by 100 ms on 101% of connections"], "P above 0, at most 100"),
    (["delay leader of 0 by 100 ms on 0% of connections"], "P above 0, at most 100"),
    (["delay leader of 0 by 100 ms on 50%"], "delay needs 'TARGET by MS ms'"),
    (["delay node 9 by 10 ms"], "nodes are 1 to 3, not 9"),
    (["undelay node 2"], "undelay takes nothing"),
    (["delay ends at node 2"], "delay ends needs 'at TARGET by MS ms'"),
    (["delay ends at node 2 by 0 ms"], "delay ends needs 'at TARGET by MS ms'"),
    (["delay ends at node 2 by 2 s"], "delay ends needs 'at TARGET by MS ms'"),
    (["delay ends at node 9 by 10 ms"], "nodes are 1 to 3, not 9"),
    (["crash consumers"], "crash takes 'client N'"),
    (["restart consumer x"], "expected a consumer index"),
    (["pause consumer 1"], "pause takes 'client N for S s'"),
    (["pause client 1 for 0 s"], "pause takes 'client N for S s'"),
    (["pause consumer 1 for 601 s"], "at most 600"),
    (["stop client 0"], "stop takes 'consumer N'"),
    (["start consumer"], "start takes 'consumer N'"),
    (["stop consumer x"], "expected a consumer index"),
    (["crash leader of 0 as stop"], "'stop' cannot be a name"),
])
def test_bad_schedules_are_one_line_naming_the_step(lines: list[str], message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_schedule(lines, partitions=3, nodes=3)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert text.startswith("nemesis.schedule[")


def test_names_bound_earlier_are_accepted() -> None:
    steps = parse_schedule(["pause followers of 0 as held", "wait until isr of 0 is {leader}",
                            "crash leader of 0 as old", "resume held", "restart old unclean"], 3, 3)
    assert [type(s).__name__ for s in steps] == ["Action", "Wait", "Action", "Action", "Action"]


def test_the_spec_validates_its_schedule() -> None:
    with pytest.raises(SpecError, match=r"nemesis.schedule\[0\] 'crash leader of 5': the topic has"):
        TestSpec(nemesis=NemesisSpec(schedule=("crash leader of 5",)))
    with pytest.raises(SpecError, match="exclude each other"):
        TestSpec(nemesis=NemesisSpec(faults=("kill",), schedule=("crash leader of 0",)))
    spec = TestSpec.from_mapping({"nemesis": {"schedule": ["pause followers of 0 as held", "resume held"]}})
    assert spec.nemesis.schedule == ("pause followers of 0 as held", "resume held")


@pytest.mark.parametrize(("target", "nodes"), [
    (Target("leader", partition=0), (1,)),
    (Target("followers", partition=0), (2, 3)),
    (Target("follower", partition=0), (3,)),  # the follower in the ISR, not 2
    (Target("followers", partition=2), (1, 3)),
    (Target("controller"), (3,)),
    (Target("node", node=2), (2,)),
    (Target("name", name="held"), (2, 3)),
    (Target("first", name="held"), (2,)),
    (Target("second", name="held"), (3,)),
])
def test_roles_resolve_from_live_state(target: Target, nodes: tuple[int, ...]) -> None:
    assert resolve(target, VIEW, {"held": (2, 3)}) == nodes


@pytest.mark.parametrize(("target", "message"), [
    (Target("leader", partition=1), "partition 1 has no leader"),
    (Target("follower", partition=2), "no follower in its ISR [2]"),
    (Target("leader", partition=5), "partition 5 is not in the metadata"),
    (Target("name", name="gone"), "'gone' is not bound"),
    (Target("second", name="one"), "'one' names 1 node(s): it has no second"),
])
def test_a_role_with_no_node_is_an_error(target: Target, message: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve(target, VIEW, {"one": (3,)})
    assert message in str(info.value)


def test_no_active_controller_is_an_error() -> None:
    with pytest.raises(ValueError, match="no active controller"):
        resolve(Target("controller"), View(VIEW.partitions), {})


def _cond(text: str, view: View = VIEW, previous: int | None = None) -> bool:
    step = parse_step(text)
    assert isinstance(step, Wait)
    return condition_met(step, view, {"held": (2, 3), "one": (3,)}, previous)[0]


def test_conditions() -> None:
    assert _cond("wait until isr of 2 is {leader}")
    assert not _cond("wait until isr of 0 is {leader}")
    assert _cond("wait until isr of 0 is {leader, one}")
    assert _cond("wait until isr of 0 is {1,3}")
    assert not _cond("wait until isr of 1 is {3}"), "a leaderless partition meets no ISR condition"
    assert _cond("wait until 0 has a new leader", previous=2)
    assert not _cond("wait until 0 has a new leader", previous=1)
    assert not _cond("wait until 1 has a new leader", previous=1), "no leader is not a new leader"
    assert not _cond("wait until 0 caught up")
    full = View({0: PartitionState(2, (1, 2, 3), (1, 2, 3))})
    assert _cond("wait until 0 caught up", full)
    assert _cond("wait until caught up", full)
    assert not _cond("wait until caught up"), "every partition must be caught up"


def test_registered_needs_every_node_of_the_target_listed() -> None:
    seen = View(VIEW.partitions, registered=frozenset({1, 3}))
    assert _cond("wait until node 3 registered", seen)
    assert not _cond("wait until held registered", seen), "2 of held (2, 3) is not registered"
    assert _cond("wait until held registered", View(VIEW.partitions, registered=frozenset({1, 2, 3})))
    assert not _cond("wait until node 3 registered"), "brokers not read: not met"
    assert _cond("wait until node 2 fenced", seen) and not _cond("wait until node 3 fenced", seen)
    assert not _cond("wait until held fenced", seen), "3 of held (2, 3) is still listed"
    step = parse_step("wait until leader of 1 registered")
    assert isinstance(step, Wait)
    assert condition_met(step, seen, {}, None) == (False, "registered [1, 3]; leader of 1: partition 1 has "
                                                          "no leader")


def test_what_a_condition_saw_is_said() -> None:
    step = parse_step("wait until isr of 0 is {leader}")
    assert isinstance(step, Wait)
    assert condition_met(step, VIEW, {}, None) == (False, "0: leader 1 isr {1,3}")


def test_the_example_schedule_is_a_valid_spec() -> None:
    from pathlib import Path

    from faultline.spec import build_spec

    spec = build_spec(Path(__file__).parents[2] / "examples" / "acks1-lost-write.yaml", {})
    assert spec.nemesis.schedule[3] == "crash leader of 0 as old" and spec.producer.acks == "1"


def test_a_groups_coordinator_is_a_role() -> None:
    """``coordinator of group G`` parses (as any word, in lower case), resolves to the
    leader of G's offsets partition, and without one is an error naming the group."""
    step = parse_step("Crash the coordinator of group faultline-It as coord")
    assert step == Action("crash", Target("coordinator", group="faultline-it"),
                          "Crash the coordinator of group faultline-It as coord", bind="coord")
    assert str(Target("coordinator", group="g")) == "coordinator of group g"
    view = View(VIEW.partitions, coordinators={"g": 2, "h": None})
    assert resolve(Target("coordinator", group="g"), view, {}) == (2,)
    with pytest.raises(ValueError, match="group 'h''s partition of __consumer_offsets has no leader"):
        resolve(Target("coordinator", group="h"), view, {})
    parse_schedule(["pause coordinator of group g as c", "wait for 5 s", "resume c"], 3, 3)


def test_a_transactions_coordinator_is_a_role() -> None:
    """``coordinator of transaction T`` parses with every verb that takes a node, resolves
    to the leader of T's transaction state partition (not to a group's of the same name),
    and without one is an error naming the transactional id."""
    step = parse_step("Crash the coordinator of transaction faultline-It-t0 as coord")
    assert step == Action("crash", Target("coordinator", transaction="faultline-it-t0"),
                          "Crash the coordinator of transaction faultline-It-t0 as coord", bind="coord")
    assert str(Target("coordinator", transaction="t")) == "coordinator of transaction t"
    view = View(VIEW.partitions, coordinators={"t": 1}, transaction_coordinators={"t": 3, "u": None})
    assert resolve(Target("coordinator", transaction="t"), view, {}) == (3,)
    assert resolve(Target("coordinator", group="t"), view, {}) == (1,)
    with pytest.raises(ValueError, match="transaction 'u''s partition of __transaction_state has no leader"):
        resolve(Target("coordinator", transaction="u"), view, {})
    with pytest.raises(ValueError, match="transaction 'v''s partition of __transaction_state has no leader"):
        resolve(Target("coordinator", transaction="v"), View(VIEW.partitions, coordinators={"v": 2}), {})
    steps = parse_schedule(["pause coordinator of transaction t as c", "resume c",
                            "isolate coordinator of transaction t", "heal",
                            "restart coordinator of transaction t unclean",
                            "wait until coordinator of transaction t registered"], 3, 3)
    assert {s.target for s in steps if s.target is not None} == {
        Target("coordinator", transaction="t"), Target("name", name="c")}
    with pytest.raises(SpecError, match="coordinator of transaction T"):
        parse_schedule(["crash coordinator of transaction"], 3, 3)


@pytest.mark.parametrize(("transactional_id", "partitions", "partition"), [
    ("faultline-queue-t0", 50, 1), ("faultline-queue-t1", 50, 2), ("faultline-txn-coordinator-t1", 50, 48),
    ("faultline-txn-coordinator-t1", 3, 2),
])
def test_a_transactional_ids_partition_is_kafkas(transactional_id: str, partitions: int,
                                                 partition: int) -> None:
    """As Java's ``Utils.abs(id.hashCode()) % partitions`` computed them
    (TransactionStateManager.partitionFor)."""
    assert coordinator_partition(transactional_id, partitions) == partition


def test_a_group_has_committed_once_an_offset_appeared_or_moved_since_the_wait_began() -> None:
    """``group G has committed`` parses; it is met by an offset of G's that is new or moved
    since the offsets read when the wait began, not by the same offsets, nor unread ones."""
    step = parse_step("wait until group faultline-it has committed within 20 s")
    assert step == Wait("committed", 20.0, "wait until group faultline-it has committed within 20 s",
                        group="faultline-it")
    before = {("t", 0): 10, ("t", 1): 4}

    def met(offsets: dict[tuple[str, int], int] | None, since: dict[tuple[str, int], int] | None) -> bool:
        view = View(VIEW.partitions, committed={} if offsets is None else {"faultline-it": offsets})
        return condition_met(step, view, {}, None, since)[0]

    assert not met(before, before)
    assert met({**before, ("t", 1): 5}, before)
    assert met({**before, ("t", 2): 0}, before)
    assert not met({}, None) and met({("t", 0): 0}, None)
    assert not met(None, before), "offsets not read: not met"
    assert condition_met(step, View(VIEW.partitions, committed={"faultline-it": {**before, ("t", 1): 5}}),
                         {}, None, before) == (True, "group faultline-it: 2 partition(s) committed, 1 since "
                                                     "the wait began")


def test_a_group_has_committed_past_a_partition_once_its_offset_there_is_above_the_floor() -> None:
    """``group G has committed past P`` parses; it is met by G's offset of P above the high
    watermark P had when the wait began (the floor), not at it, nor by another partition's."""
    text = "wait until group faultline-it has committed past 2 within 20 s"
    step = parse_step(text)
    assert step == Wait("committed", 20.0, text, 2, group="faultline-it")
    floor = {("t", 2): 40}

    def met(offsets: dict[tuple[str, int], int], since: dict[tuple[str, int], int] | None) -> bool:
        return condition_met(step, View(VIEW.partitions, committed={"faultline-it": offsets}), {}, None,
                             since)[0]

    assert met({("t", 2): 41}, floor)
    assert not met({("t", 2): 40}, floor), "at the high watermark: not past it"
    assert not met({("t", 1): 90, ("t", 2): 12}, floor), "another partition's offset counts for nothing"
    assert not met({("t", 2): 41}, None), "no floor read yet"
    assert condition_met(step, View(VIEW.partitions, committed={"faultline-it": {("t", 2): 39}}), {}, None,
                         floor) == (False, "group faultline-it: committed 39 on 2, past 40 awaited")
    with pytest.raises(SpecError, match="partitions 0 to 1, not 2"):
        parse_schedule([text], partitions=2)


def test_a_partition_has_passed_a_group_once_its_high_watermark_is_above_the_groups_offset() -> None:
    """``P has passed group G`` parses; it is met by P's high watermark above G's offset of
    P, not at it, nor by another partition's, nor before both are read."""
    text = "wait until 2 has passed group faultline-it within 20 s"
    step = parse_step(text)
    assert step == Wait("passed", 20.0, text, 2, group="faultline-it")

    def met(hws: dict[int, int], offsets: dict[tuple[str, int], int] | None) -> tuple[bool, str]:
        committed = {} if offsets is None else {"faultline-it": offsets}
        return condition_met(step, View(VIEW.partitions, committed=committed, high_watermarks=hws), {}, None)

    assert met({2: 41}, {("t", 2): 40}) == (True, "2: high watermark 41, group faultline-it committed 40")
    assert not met({2: 40}, {("t", 2): 40})[0], "at the committed offset: no record there yet"
    assert not met({2: 41, 1: 90}, {("t", 1): 12})[0], "another partition's offset counts for nothing"
    assert not met({}, {("t", 2): 40})[0], "no high watermark read"
    assert met({2: 41}, None) == (False, "group faultline-it's committed offsets not read")
    with pytest.raises(SpecError, match="partitions 0 to 1, not 2"):
        parse_schedule([text], partitions=2)


@pytest.mark.parametrize(("group", "partitions", "partition"), [
    ("hello", 2**31 - 1, 99162322),  # Java: "hello".hashCode() == 99162322
    ("polygenelubricants", 50, 0),  # hashCode() == Integer.MIN_VALUE: Utils.abs gives 0
    ("", 5, 0),
])
def test_a_groups_offsets_partition_is_kafkas(group: str, partitions: int, partition: int) -> None:
    assert coordinator_partition(group, partitions) == partition


def test_a_spec_skews_clocks_with_the_clock_family_or_a_clock_step() -> None:
    from faultline.spec import NemesisSpec

    assert NemesisSpec(faults=("kill", "clock")).skews_clocks
    assert NemesisSpec(schedule=("crash node 1", "reset clocks")).skews_clocks
    assert not NemesisSpec(faults=("kill",), schedule=()).skews_clocks
    assert not NemesisSpec(schedule=("crash node 1", "restart node 1")).skews_clocks


@pytest.mark.parametrize(("schedule", "steps"), [
    (("crash leader of 0 as old", "restart old"), [("kill", 1)]),  # a down node's restart is its start
    (("crash leader of 0 as old", "restart old", "restart old"), [("kill", 1), ("stop", 1)]),
    (("wipe followers of 0 as old", "restart first of old", "wipe old"), [("wipe", 2), ("wipe", 2)]),
    (("wipe node 1 as x", "pause node 2 as x", "restart x unclean"),
     [("wipe", 1), ("pause", 1), ("kill", 1)]),
    (("restart node 1",), [("stop", 1)]),
    (("crash node 1", "restart node 1"), [("kill", 1), ("stop", 1)]),  # no name: not known down
    (("restart node 1 unclean",), [("kill", 1)]),
    (("pause node 1", "resume node 1", "wipe node 2", "lose-unflushed controller"),
     [("pause", 1), ("wipe", 1), ("lose-unflushed", 1)]),
    (("isolate node 1", "hold followers of 0", "release node 1", "heal"),
     [("partition", 1), ("partition", 2)]),
    (("degrade node 1 loss 5%", "delay node 2 by 100 ms", "restore", "undelay"),
     [("links", 1), ("toxics", 1)]),
    (("bump node 1 clock +5s", "strobe node 2 clock 3 s for 10 s", "reset clocks"),
     [("clock", 1), ("clock", 1)]),
    (("crash client 0", "restart client 0"), [("clients", 0)]),
    (("restart client 0", "start consumer 1", "wait for 1 s"), []),
    (("stop consumer 1",), [("clients", 0)]),
])
def test_a_schedules_fault_steps_are_its_steps_that_may_apply_a_fault(
        schedule: tuple[str, ...], steps: list[tuple[str, int]]) -> None:
    from faultline.faults import FAMILIES
    from faultline.targeted import fault_steps

    found = fault_steps(parse_schedule(schedule), 3)
    assert [(f.family, f.nodes) for f in found] == steps
    assert {f.family for f in found} <= set(FAMILIES)


def test_consumers_hold_partitions_once_each_named_members_own_journal_says_so() -> None:
    """``consumer N holds partitions`` and ``consumers hold partitions`` parse; each is met
    by the consumers' holdings, not by a member with none or none running, nor unread."""
    one, every = parse_step("wait until consumer 1 holds partitions within 9 s"), \
        parse_step("wait until consumers hold partitions")
    assert one == Wait("holds", 9.0, "wait until consumer 1 holds partitions within 9 s", consumers=(1,))
    assert every == Wait("holds", 30.0, "wait until consumers hold partitions", consumers=())
    assert one.on_clients and every.on_clients and not parse_step("wait until caught up").on_clients

    def met(step: Wait, holdings: dict[int, int | None] | None) -> tuple[bool, str]:
        return condition_met(step, View({}, holdings=holdings), {}, None)

    assert met(one, {0: 0, 1: 2}) == (True, "consumer 1: 2 partition(s)")
    assert met(one, {0: 2, 1: 0}) == (False, "consumer 1: 0 partition(s)")
    assert met(every, {0: 1, 1: 2}) == (True, "consumer 0: 1 partition(s); consumer 1: 2 partition(s)")
    assert met(every, {0: 1, 1: None}) == (False, "consumer 0: 1 partition(s); consumer 1: not running")
    assert not met(every, {})[0], "no consumer at all"
    assert met(one, None) == (False, "the consumers' partitions not read")
    group = TestSpec(nemesis=NemesisSpec(schedule=("wait until consumers hold partitions",)),
                     workload=WorkloadSpec(name="group"), consumer=ConsumerSpec(mode="subscribe"))
    assert group.nemesis.crashes_clients, "its members must run in child processes"
    with pytest.raises(ValueError, match="expected a consumer index"):
        parse_step("wait until consumer x holds partitions")


def test_a_producer_has_committed_once_it_or_its_replacement_committed_since_the_wait_began() -> None:
    """``client N has committed`` parses and is met by N's commits since the wait began
    (the view's counts), not by another producer's, nor unread; the txn workload's only."""
    text = "wait until client 1 has committed within 20 s"
    step = parse_step(text)
    assert step == Wait("client-committed", 20.0, text, clients=(1,))
    assert step.on_clients

    def met(commits: dict[int, int] | None) -> tuple[bool, str]:
        return condition_met(step, View({}, commits=commits), {}, None)

    assert met({0: 0, 1: 2}) == (True, "client 1: 2 transaction(s) committed since the wait began")
    assert met({0: 5, 1: 0}) == (False, "client 1: 0 transaction(s) committed since the wait began")
    assert met(None) == (False, "the producers' commits not read")
    txn = WorkloadSpec(name="txn", producers=2)
    TestSpec(nemesis=NemesisSpec(schedule=("wait until client 1 has committed",)), workload=txn)
    with pytest.raises(SpecError, match="the producers are 0 to 1"):
        TestSpec(nemesis=NemesisSpec(schedule=("wait until client 2 has committed",)), workload=txn)
    with pytest.raises(SpecError, match="in the txn workload only, not the queue workload"):
        TestSpec(nemesis=NemesisSpec(schedule=("wait until client 0 has committed",)))


def test_end_is_the_last_step_and_takes_nothing() -> None:
    assert parse_step("end") == Action("end", None, "end")
    assert parse_schedule(["crash leader of 0", "end"])[-1] == Action("end", None, "end")
    with pytest.raises(SpecError, match=r"schedule\[1\] 'crash leader of 0': end must be the last step"):
        parse_schedule(["end", "crash leader of 0"])
    with pytest.raises(SpecError, match="end takes nothing after it"):
        parse_schedule(["end now"])
