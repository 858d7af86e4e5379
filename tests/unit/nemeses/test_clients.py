"""The clients nemesis against fake clients: what it crashes, what it journals, what its
restart and teardown start again; and which workload a test with client crashes runs."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import FaultlineError, NemesisError, SpecError
from faultline.faults import FAMILIES
from faultline.history import HistoryWriter, Op, read_history
from faultline.nemeses.clients import AIMS, ClientsNemesis
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import ScheduledFault, build_schedule
from faultline.nemeses.scripted import ScriptedPackage
from faultline.spec import ConsumerSpec, NemesisSpec, TestSpec, WorkloadSpec
from faultline.workloads import workload_for
from faultline.workloads.crashable import CrashableQueueWorkload
from faultline.workloads.group import GroupWorkload
from faultline.workloads.group_crashable import CrashableGroupWorkload
from faultline.workloads.java_client import JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.java_group import CrashableJavaGroupWorkload
from faultline.workloads.queue import QueueWorkload
from faultline.workloads.txn import CrashableTxnWorkload
from tests.unit.nemeses.test_package import FakeCluster


class FakeClients:
    clients = 3

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.down: set[int] = set()
        self.next = 10

    def crash_client(self, index: int) -> dict[str, Any]:
        if index in self.down:
            raise FaultlineError(f"producer {index} is not running")
        self.down.add(index)
        self.calls.append(("crash", index))
        return {"processes": [index], "pid": 100 + index, "sends": 7}

    def restart_client(self, index: int) -> dict[str, Any]:
        self.calls.append(("restart", index))
        self.down.discard(index)
        self.next += 1
        return {"processes": [self.next]}


class FakeChild:
    def __init__(self, calls: list[tuple[str, str, int]], role: str, index: int,
                 held: list[int | None] | None = None, looks: list[int] | None = None) -> None:
        self.calls, self.role, self.index, self._held = calls, role, index, held
        self.looks = looks if looks is not None else [0]

    def _call(self, what: str) -> dict[str, Any]:
        self.calls.append((what, self.role, self.index))
        return {"processes": [20 + self.index], "pid": 200 + self.index}

    def crash(self) -> dict[str, Any]:
        return self._call("crash")

    def restart(self) -> dict[str, Any]:
        return self._call("restart")

    def pause(self) -> dict[str, Any]:
        return self._call("pause")

    def resume(self) -> dict[str, Any]:
        self._call("resume")
        return {"pid": 200 + self.index}

    def stop(self) -> dict[str, Any]:
        return self._call("stop")

    def held(self) -> int | None:
        """The next of its answers (the last one stays); FaultlineError for a producer."""
        if self.role == "clients" or self._held is None:
            raise FaultlineError(f"producer {self.index} is no group member")
        return self._held.pop(0) if len(self._held) > 1 else self._held[0]

    def committed(self) -> int:
        """Producer 1 commits one more transaction at each look; the others none."""
        if self.role != "clients":
            raise FaultlineError(f"consumer {self.index} is no transactional producer")
        self.looks[0] += self.index == 1
        return 40 + self.looks[0] if self.index == 1 else 7


class FakeChildren(FakeClients):
    """Clients in child processes: producers and group consumers."""

    def __init__(self) -> None:
        super().__init__()
        self.child_calls: list[tuple[str, str, int]] = []
        #: consumer index -> its answers to ``held``, one per look
        self.holding: dict[int, list[int | None]] = {0: [1], 1: [1]}
        self.looks = [0]  # how often producer 1's commits were read

    def child(self, role: str, index: int) -> FakeChild:
        held = self.holding.get(index) if role == "consumers" else None
        return FakeChild(self.child_calls, role, index, held, self.looks)

    def children(self, role: str) -> int:
        return self.clients if role == "clients" else 2


def op(f: str, value: dict[str, Any]) -> Op:
    return Op(0, 0, "nemesis", "info", f, value, None)


def test_a_crash_kills_the_client_its_pick_names_and_the_restart_replaces_it() -> None:
    clients, nemesis = FakeClients(), ClientsNemesis()
    nemesis.bind(clients)
    plan = nemesis.plan(ScheduledFault(1.0, "clients", "crash", 5.0, pick=4), busy=())
    assert plan == {"clients": [1], "kind": "crash"}  # 4 % 3
    done = nemesis.invoke(op("crash-client", plan)).value
    assert done["processes"] == [1] and done["pid"] == 101 and done["sends"] == 7
    assert "killed producer 1" in done["result"]
    healed = nemesis.invoke(op("restart-client", {"kind": "crash"})).value
    assert healed["clients"] == [1] and healed["processes"] == [11]
    nemesis.teardown()  # nothing left crashed: nothing restarted
    assert clients.calls == [("crash", 1), ("restart", 1)]


def test_teardown_restarts_what_is_still_crashed_and_errors_are_nemesis_errors() -> None:
    clients, nemesis = FakeClients(), ClientsNemesis()
    nemesis.bind(clients)
    nemesis.invoke(op("crash-client", {"clients": [2]}))
    with pytest.raises(NemesisError, match="producer 2 is not running"):
        nemesis.invoke(op("crash-client", {"clients": [2]}))
    nemesis.teardown()
    assert clients.calls == [("crash", 2), ("restart", 2)]
    with pytest.raises(NemesisError, match="cannot 'kill'"):
        nemesis.invoke(op("kill", {}))


def test_without_clients_bound_a_crash_is_a_nemesis_error() -> None:
    nemesis = ClientsNemesis()
    nemesis.teardown()  # nothing bound, nothing to heal
    with pytest.raises(NemesisError, match="no crashable clients"):
        nemesis.plan(ScheduledFault(1.0, "clients", "crash", 5.0, pick=0), busy=())


def test_the_package_hands_the_clients_to_its_clients_nemesis() -> None:
    spec = TestSpec(nemesis=NemesisSpec(faults=("clients", "kill")))
    schedule = build_schedule(spec.nemesis, 0, 60, 3)
    assert {s.family for s in schedule} == {"clients", "kill"}
    assert {s.kind for s in schedule if s.family == "clients"} == {"crash"}
    package = NemesisPackage(object(), schedule, {"clients": ClientsNemesis()})  # type: ignore[arg-type]
    clients = FakeClients()
    package.bind_clients(clients)
    nemesis = package.nemeses["clients"]
    assert isinstance(nemesis, ClientsNemesis) and nemesis.workload is clients


def test_a_test_with_client_crashes_runs_the_crashable_clients_of_its_workload_and_client() -> None:
    crashes = NemesisSpec(faults=("clients",))
    assert workload_for(TestSpec()) is QueueWorkload
    assert workload_for(TestSpec(nemesis=crashes)) is CrashableQueueWorkload
    java = WorkloadSpec(client="java")
    assert workload_for(TestSpec(workload=java)) is JavaQueueWorkload
    assert workload_for(TestSpec(nemesis=crashes, workload=java)) is CrashableJavaQueueWorkload
    targeted = NemesisSpec(schedule=("crash client 0",))
    assert workload_for(TestSpec(nemesis=targeted, workload=java)) is CrashableJavaQueueWorkload
    txn = dataclasses.replace(TestSpec(), nemesis=crashes, workload=WorkloadSpec(name="txn"))
    assert workload_for(txn) is CrashableTxnWorkload
    group = dataclasses.replace(TestSpec(), nemesis=crashes, workload=WorkloadSpec(name="group"),
                                consumer=ConsumerSpec(mode="subscribe"))
    assert workload_for(group) is CrashableGroupWorkload
    java_group = dataclasses.replace(group, workload=WorkloadSpec(name="group", client="java"))
    assert workload_for(java_group) is CrashableJavaGroupWorkload


def run_and_heal(spec: TestSpec, clients: FakeClients, tmp_path: Path,
                 in_effect: list[str]) -> ScriptedPackage:
    """Run ``spec``'s schedule on ``clients`` to its end, see ``in_effect`` then, and heal."""
    nemesis = ScriptedPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    nemesis.bind_clients(clients)
    nemesis.setup()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        nemesis.run(time.monotonic() + 5, history)
        assert nemesis.ended is None and nemesis.in_effect() == in_effect
        nemesis.heal_all(history)
    return nemesis


def test_targeted_client_crashes_are_journaled_per_producer_and_restarted_at_the_heal(
        tmp_path: Path) -> None:
    schedule = ("crash client 1", "restart client 1", "crash clients")
    spec = TestSpec(nemesis=NemesisSpec(schedule=schedule), workload=WorkloadSpec(producers=3))
    assert spec.nemesis.crashes_clients
    clients = FakeClients()
    nemesis = run_and_heal(spec, clients, tmp_path, ["crash-client: producer(s) 0,1,2"])
    done = [(op.f, op.value["clients"]) for op in read_history(tmp_path / "history.jsonl")
            if "result" in op.value]
    assert done == [("crash-client", [1]), ("restart-client", [1]), ("crash-client", [0]),
                    ("crash-client", [1]), ("crash-client", [2]), ("restart-client", [0, 1, 2])]
    assert clients.calls == [("crash", 1), ("restart", 1), ("crash", 0), ("crash", 1), ("crash", 2),
                             ("restart", 0), ("restart", 1), ("restart", 2)]
    assert nemesis.active == []


@pytest.mark.parametrize(("lines", "message"), [
    (["crash client x"], "expected a producer index"),
    (["restart client 1 2"], "restart takes 'client N'"),
    (["crash client 2"], "the producers are 0 to 1"),
])
def test_bad_client_steps_are_one_line(lines: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        TestSpec(nemesis=NemesisSpec(schedule=tuple(lines)))


def test_consumers_crash_and_restart_and_clients_pause_and_resume_by_their_role() -> None:
    clients, nemesis = FakeChildren(), ClientsNemesis()
    nemesis.bind(clients)
    crashed = nemesis.invoke(op("crash-client", {"kind": "crash", "consumers": [1]})).value
    assert crashed["processes"] == [21] and "killed consumer 1" in crashed["result"]
    assert nemesis.crashed == [] and nemesis.crashed_of("consumers") == [1]
    paused = nemesis.invoke(op("pause-client", {"kind": "pause", "clients": [0], "for_s": 3.0})).value
    assert paused["pid"] == 200 and nemesis.paused_of("clients") == [0]
    nemesis.invoke(op("resume-client", {"kind": "pause", "clients": [0]}))
    nemesis.invoke(op("pause-client", {"kind": "pause", "consumers": [2], "for_s": 3.0}))
    nemesis.teardown()  # resumes consumer 2, restarts consumer 1
    assert clients.child_calls == [("crash", "consumers", 1), ("pause", "clients", 0),
                                   ("resume", "clients", 0), ("pause", "consumers", 2),
                                   ("resume", "consumers", 2), ("restart", "consumers", 1)]
    assert clients.calls == [] and nemesis.crashed_of("consumers") == nemesis.paused_of("consumers") == []


def test_clients_not_in_child_processes_cannot_pause() -> None:
    nemesis = ClientsNemesis()
    nemesis.bind(FakeClients())
    with pytest.raises(NemesisError, match="share a process"):
        nemesis.invoke(op("pause-client", {"kind": "pause", "clients": [0], "for_s": 1.0}))


def test_a_group_test_that_crashes_or_pauses_consumers_runs_them_in_child_processes() -> None:
    group = dataclasses.replace(TestSpec(), consumer=ConsumerSpec(mode="subscribe"),
                                workload=WorkloadSpec(name="group", consumers=2))
    assert workload_for(group) is GroupWorkload
    for step in ("crash consumer 1", "pause consumer 0 for 7 s", "pause client 0 for 1 s"):
        assert workload_for(dataclasses.replace(group, nemesis=NemesisSpec(schedule=(step,)))) \
            is CrashableGroupWorkload


def test_targeted_consumer_faults_are_journaled_and_healed(tmp_path: Path) -> None:
    schedule = ("crash consumer 1", "pause consumer 0 for 0.1 s", "pause client 0 for 30 s")
    spec = TestSpec(nemesis=NemesisSpec(schedule=schedule), consumer=ConsumerSpec(mode="subscribe"),
                    workload=WorkloadSpec(name="group", consumers=2))
    nemesis = ScriptedPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    clients = FakeChildren()
    nemesis.bind_clients(clients)
    nemesis.setup()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        ran = threading.Thread(target=nemesis.run, args=(time.monotonic() + 60, history))
        ran.start()
        deadline = time.monotonic() + 10
        while nemesis.clients.paused_of("clients") != [0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert nemesis.in_effect() == ["crash-client: consumer(s) 1", "pause-client: producer(s) 0"]
        nemesis.heal_all(history)  # cuts the 30 s pause short
        ran.join(5)
        assert not ran.is_alive()
    done = [(op.f, op.value.get("clients"), op.value.get("consumers"))
            for op in read_history(tmp_path / "history.jsonl") if "result" in op.value]
    assert done == [("crash-client", None, [1]), ("pause-client", None, [0]), ("resume-client", None, [0]),
                    ("pause-client", [0], None), ("resume-client", [0], None),
                    ("restart-client", None, [1])]
    assert nemesis.active == []


def test_a_stopped_consumer_is_started_by_its_start_or_at_the_heal(tmp_path: Path) -> None:
    schedule = ("stop consumer 1", "start consumer 1", "stop consumer 0")
    spec = TestSpec(nemesis=NemesisSpec(schedule=schedule), consumer=ConsumerSpec(mode="subscribe"),
                    workload=WorkloadSpec(name="group", consumers=2))
    assert spec.nemesis.crashes_clients
    clients = FakeChildren()
    nemesis = run_and_heal(spec, clients, tmp_path, ["stop-client: consumer(s) 0"])
    done = [(op.f, op.value["kind"], op.value["consumers"], op.value["processes"])
            for op in read_history(tmp_path / "history.jsonl") if "result" in op.value]
    assert done == [("stop-client", "stop", [1], [21]), ("start-client", "stop", [1], [21]),
                    ("stop-client", "stop", [0], [20]), ("start-client", "stop", [0], [20])]
    assert clients.child_calls == [("stop", "consumers", 1), ("restart", "consumers", 1),
                                   ("stop", "consumers", 0), ("restart", "consumers", 0)]
    assert nemesis.clients.stopped_of("consumers") == [] and nemesis.active == []
    again = nemesis.clients.invoke(op("start-client", {"kind": "stop", "consumers": [1]})).value
    assert again["consumers"] == [] and again["result"] == "no client was stopped"


@pytest.mark.parametrize(("workload", "lines", "message"), [
    (WorkloadSpec(name="group", consumers=2), ["crash consumer 2"], "the consumers are 0 to 1"),
    (WorkloadSpec(), ["crash consumer 0"], "in the group workload only, not the queue workload"),
    (WorkloadSpec(), ["start consumer 0"], "in the group workload only, not the queue workload"),
    (WorkloadSpec(), ["wait until consumers hold partitions"], "in the group workload only"),
    (WorkloadSpec(name="group", consumers=2), ["wait until consumer 2 holds partitions"],
     "the consumers are 0 to 1"),
])
def test_bad_consumer_steps_are_one_line(workload: WorkloadSpec, lines: list[str], message: str) -> None:
    mode = "subscribe" if workload.name == "group" else "assign"
    with pytest.raises(SpecError, match=message):
        TestSpec(nemesis=NemesisSpec(schedule=tuple(lines)), workload=workload,
                 consumer=ConsumerSpec(mode=mode))


def test_the_java_clients_group_members_crash_pause_stop_and_start_and_its_producers_pause() -> None:
    lines = ("pause consumer 0 for 9 s", "crash consumer 1", "restart consumer 1", "stop consumer 0",
             "start consumer 0", "pause client 0 for 1 s")
    spec = TestSpec(nemesis=NemesisSpec(schedule=lines), consumer=ConsumerSpec(mode="subscribe"),
                    workload=WorkloadSpec(name="group", client="java", consumers=2))
    assert workload_for(spec) is CrashableJavaGroupWorkload


@pytest.mark.parametrize(("kind", "pick", "plan"), [
    ("crash", 4, {"clients": [1], "kind": "crash"}),  # 4 % 3 producers
    ("crash-consumer", 3, {"consumers": [1], "kind": "crash"}),  # 3 % 2 consumers
    ("pause-consumer", 4, {"consumers": [0], "kind": "pause"}),
    ("pause-producer", 5, {"clients": [2], "kind": "pause"}),  # 5 % 3 producers
])
def test_a_random_fault_aims_at_the_role_its_kind_names_and_the_client_its_pick_does(
        kind: str, pick: int, plan: dict[str, Any]) -> None:
    nemesis = ClientsNemesis()
    nemesis.bind(FakeChildren())
    assert nemesis.plan(ScheduledFault(1.0, "clients", kind, 5.0, pick), busy=()) == plan
    clients = FAMILIES["clients"]
    assert set(AIMS) == {*clients.kinds, *(k for ks in clients.workload_kinds.values() for k in ks)}


def test_a_consumer_fault_needs_consumers_in_child_processes() -> None:
    step = ScheduledFault(1.0, "clients", "crash-consumer", 5.0, 0)
    nemesis = ClientsNemesis()
    nemesis.bind(FakeClients())
    with pytest.raises(NemesisError, match="share a process: none is paused, stopped or crashed alone"):
        nemesis.plan(step, busy=())

    class NoConsumers(FakeChildren):
        def children(self, role: str) -> int:
            return self.clients if role == "clients" else 0

    nemesis.bind(NoConsumers())
    with pytest.raises(NemesisError, match="no consumer runs in a child process to crash"):
        nemesis.plan(step, busy=())


def journal(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The ``-client`` ops journaled at ``path``, without what only a targeted step
    (``step``, ``for_s``) or only a random one (``hold_s``) says."""
    return [(op.f, {k: v for k, v in op.value.items() if k not in ("step", "for_s", "hold_s")})
            for op in read_history(path) if op.f.endswith("-client")]


def targeted_and_random(tmp_path: Path, spec: TestSpec, steps: tuple[str, ...],
                        drawn: list[ScheduledFault]) -> tuple[list[tuple[str, dict[str, Any]]], FakeChildren]:
    """Run ``spec`` with the targeted ``steps``, then with the random schedule ``drawn``,
    each healed; the random run's client ops (:func:`journal`), once asserted equal to the
    targeted run's, and its clients."""
    targeted = dataclasses.replace(spec, nemesis=NemesisSpec(schedule=steps))
    scripted = ScriptedPackage.from_spec(targeted, FakeCluster(targeted, tmp_path))  # type: ignore[arg-type]
    scripted.bind_clients(FakeChildren())
    with HistoryWriter(tmp_path / "targeted.jsonl") as history:
        scripted.run(time.monotonic() + 5, history)
        scripted.heal_all(history)
    faults = dataclasses.replace(spec, nemesis=NemesisSpec(faults=("clients",)))
    random = NemesisPackage.from_spec(faults, FakeCluster(faults, tmp_path))  # type: ignore[arg-type]
    random.schedule = drawn
    clients = FakeChildren()
    random.bind_clients(clients)
    with HistoryWriter(tmp_path / "random.jsonl") as history:
        random.run(time.monotonic() + 0.3, history)
        random.heal_all(history)
    ops = journal(tmp_path / "random.jsonl")
    assert ops == journal(tmp_path / "targeted.jsonl")
    return ops, clients


def test_random_consumer_faults_are_journaled_as_the_targeted_ones_and_healed(tmp_path: Path) -> None:
    """A drawn consumer crash and pause: the same ops, with the same values, as ``crash
    consumer 1`` / ``restart consumer 1`` and ``pause consumer 0 for S s``; each healed."""
    group = TestSpec(consumer=ConsumerSpec(mode="subscribe"),
                     workload=WorkloadSpec(name="group", consumers=2))
    ops, clients = targeted_and_random(
        tmp_path, group, ("crash consumer 1", "restart consumer 1", "pause consumer 0 for 0.05 s"),
        [ScheduledFault(0.0, "clients", "crash-consumer", 0.05, pick=1),
         ScheduledFault(0.1, "clients", "pause-consumer", 0.05, pick=2)])
    assert [f for f, _ in ops] == [
        "crash-client", "crash-client", "restart-client", "restart-client",
        "pause-client", "pause-client", "resume-client", "resume-client"]
    assert clients.child_calls == [("crash", "consumers", 1), ("restart", "consumers", 1),
                                   ("pause", "consumers", 0), ("resume", "consumers", 0)]


def test_a_random_producer_pause_is_journaled_as_the_targeted_one_and_healed(tmp_path: Path) -> None:
    """A txn run's drawn ``pause-producer``: the same ops, with the same values, as ``pause
    client 2 for S s``, resumed when held long enough."""
    txn = TestSpec(workload=WorkloadSpec(name="txn", producers=3))
    ops, clients = targeted_and_random(tmp_path, txn, ("pause client 2 for 0.05 s",),
                                       [ScheduledFault(0.0, "clients", "pause-producer", 0.05, pick=5)])
    assert [f for f, _ in ops] == ["pause-client", "pause-client", "resume-client", "resume-client"]
    assert clients.child_calls == [("pause", "clients", 2), ("resume", "clients", 2)]


def _holds_wait(tmp_path: Path, wait: str, holding: dict[int, list[int | None]]) -> Op:
    """Run ``wait`` against consumers whose members hold what ``holding`` says, look by
    look (met after 0.1 s or not: within 2 s); the wait's completion."""
    spec = TestSpec(consumer=ConsumerSpec(mode="subscribe"), workload=WorkloadSpec(name="group", consumers=2),
                    nemesis=NemesisSpec(schedule=(wait,)))
    scripted = ScriptedPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    clients = FakeChildren()
    clients.holding = holding
    scripted.bind_clients(clients)
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        scripted.run(time.monotonic() + 5, history)
        scripted.heal_all(history)
    return [op for op in read_history(tmp_path / "history.jsonl") if op.f == "wait"][-1]


def test_a_holds_wait_is_met_once_each_consumer_it_names_holds_a_partition(tmp_path: Path) -> None:
    """``consumers hold partitions`` looks until every member holds one by its own journal
    (a crashed one, None, holds nothing); ``consumer N holds partitions`` reads N alone."""
    wait = _holds_wait(tmp_path, "wait until consumers hold partitions within 5 s",
                       {0: [None, 2, 2, 2], 1: [0, 0, 0, 1]})
    assert wait.value["result"].startswith("met after") and wait.error is None
    assert wait.value["seen"] == "consumer 0: 2 partition(s); consumer 1: 1 partition(s)"
    (tmp_path / "one").mkdir()
    wait = _holds_wait(tmp_path / "one", "wait until consumer 1 holds partitions within 5 s",
                       {0: [None], 1: [1]})
    assert wait.value["result"].startswith("met after") and wait.value["seen"] == "consumer 1: 1 partition(s)"


def test_a_holds_wait_not_met_ends_the_schedule_saying_what_each_held(tmp_path: Path) -> None:
    wait = _holds_wait(tmp_path, "wait until consumers hold partitions within 1 s", {0: [3], 1: [None]})
    assert wait.error == "not met within 1 s"
    assert wait.value["seen"] == "consumer 0: 3 partition(s); consumer 1: not running"


def test_a_committed_wait_counts_a_producers_commits_from_its_first_look_and_end_ends_the_main_phase(
        tmp_path: Path) -> None:
    """``client 1 has committed`` is met by a commit after its first look (the fake's
    producer 1 commits one per look), not by those before; ``end`` is journaled and says
    the main phase is over."""
    spec = TestSpec(workload=WorkloadSpec(name="txn", producers=2),
                    nemesis=NemesisSpec(schedule=("wait until client 1 has committed within 5 s", "end")))
    scripted = ScriptedPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    scripted.bind_clients(FakeChildren())
    assert not scripted.main_phase_over
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        scripted.run(time.monotonic() + 5, history)
        assert scripted.main_phase_over
        scripted.heal_all(history)
    ops = [op for op in read_history(tmp_path / "history.jsonl") if op.f in ("wait", "end")]
    assert ops[1].value["result"].startswith("met after") and ops[1].error is None
    assert ops[1].value["seen"] == "client 1: 1 transaction(s) committed since the wait began"
    assert [(op.f, op.value) for op in ops[2:]] == [("end", {"step": "end"}),
                                                   ("end", {"step": "end", "result": "main phase ended"})]
