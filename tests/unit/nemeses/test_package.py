"""The nemesis package against an in-memory fake cluster: journaling, targets, final heal.

The fake only records calls; whether the faults do what they should on Kafka is
tests/integration/nemeses' business.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.faults_seen import faults_of
from faultline.cluster.protocol import PartitionState
from faultline.errors import NemesisError
from faultline.faults import FAMILIES
from faultline.history import HistoryWriter, Op, read_history
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.partition import PartitionNemesis
from faultline.nemeses.schedule import ScheduledFault
from faultline.spec import ConsumerSpec, KafkaSpec, NemesisSpec, TestSpec, WorkloadSpec


class FakeNode:
    def __init__(self, node_id: int, root: Path) -> None:
        self.id = node_id
        self.address = f"10.0.0.{node_id}"
        self.data_dir = root / f"n{node_id}"
        self.log_dir = root / f"n{node_id}-logs"
        self.alive = True
        self.paused = False

    def is_alive(self) -> bool:
        return self.alive


class FakeCluster:
    """Every capability, in memory; ``fail`` names calls that raise; ``stop_kills``: a
    stop escalates to SIGKILL."""

    def __init__(self, spec: TestSpec, root: Path) -> None:
        self.spec = spec
        self.nodes: Sequence[FakeNode] = [FakeNode(i, root) for i in range(1, spec.kafka.nodes + 1)]
        self.calls: list[tuple[str, Any]] = []
        self.grudge: Mapping[int, Collection[int]] = {}
        self.replication: Mapping[int, Collection[int]] = {}
        self.toxics: list[str] = []
        self.toxicities: list[float] = []  # each toxic's, as added
        self.degraded: dict[int, dict[str, int]] = {}
        self.clocks: dict[int, int] = {}  # node -> its clock's offset, where not 0
        self.fail: set[str] = set()
        self.controller: int | None = 2
        self.stop_kills = False
        self._lock = threading.Lock()

    def _call(self, name: str, arg: Any) -> None:
        with self._lock:
            self.calls.append((name, arg))
        if name in self.fail:
            raise RuntimeError(f"{name} failed on purpose")

    def node(self, node_id: int) -> FakeNode:
        return self.nodes[node_id - 1]

    def leaders(self, topic: str) -> dict[int, PartitionState]:
        n = len(self.nodes)
        return {p: PartitionState(1 + p % n, (1, 2, 3)) for p in range(self.spec.topic.partitions)}

    def active_controller(self) -> int | None:
        return self.controller

    def kill(self, node: int) -> None:
        self._call("kill", node)
        self.node(node).alive = self.node(node).paused = False  # as the backends: a kill ends a pause

    def start_node(self, node: int) -> None:
        self._call("start_node", node)
        self.node(node).alive = True

    def stop_node(self, node: int, timeout: float = 30.0) -> bool:
        self._call("stop_node", node)
        self.node(node).alive = self.node(node).paused = False
        return self.stop_kills

    def pause(self, node: int) -> None:
        self._call("pause", node)
        self.node(node).paused = True

    def resume(self, node: int) -> None:
        self._call("resume", node)
        self.node(node).paused = False

    def partition(self, grudge: Mapping[int, Collection[int]],
                  replication: Mapping[int, Collection[int]] | None = None) -> None:
        self._call("partition", grudge)
        self.grudge, self.replication = grudge, replication or {}

    def heal_network(self) -> None:
        self._call("heal_network", None)
        self.grudge, self.replication = {}, {}

    def add_toxic(self, node: int, kind: str, attributes: Mapping[str, int | float],
                  stream: str = "downstream", toxicity: float = 1.0) -> str:
        self._call("add_toxic", (node, kind, stream))
        self.toxicities.append(toxicity)
        name = f"{kind}_{stream}_{len(self.toxics)}"
        self.toxics.append(name)
        return name

    def remove_toxic(self, node: int, name: str) -> None:
        self.toxics.remove(name)

    def clear_toxics(self) -> None:
        self._call("clear_toxics", None)
        self.toxics = []

    def hold_ends(self, nodes: Collection[int], window_s: float, hold_s: float) -> dict[int, dict[str, int]]:
        self._call("hold_ends", (tuple(nodes), window_s, hold_s))
        return {n: {"connections": 1, "dropped": 4} for n in nodes}

    def drop_on_links(self, node: int, peers: Collection[int], probability: float) -> None:
        self._call("drop_on_links", (node, tuple(peers), probability))
        self.degraded[node] = {"dropped": 7, "shaped_packets": 0, "overlimits": 0}

    def limit_links(self, node: int, peers: Collection[int], rate_kbit: int) -> None:
        self._call("limit_links", (node, tuple(peers), rate_kbit))
        self.degraded[node] = {"dropped": 0, "shaped_packets": 9, "overlimits": 4}

    def restore_links(self) -> dict[int, dict[str, int]]:
        self._call("restore_links", None)
        found, self.degraded = self.degraded, {}
        return found

    def set_clock(self, node: int, offset_s: int) -> None:
        self._call("set_clock", (node, offset_s))
        with self._lock:
            self.clocks[node] = offset_s
            if offset_s == 0:
                del self.clocks[node]

    def reset_clocks(self) -> None:
        self._call("reset_clocks", None)
        with self._lock:
            self.clocks.clear()

    def read_clocks(self, nodes: Collection[int], timeout: float) -> dict[int, float | None]:
        with self._lock:
            return {n: float(self.clocks.get(n, 0)) for n in nodes}

    def data_dir(self, node: int) -> Path:
        return self.node(node).data_dir

    def wipe(self, node: int) -> None:
        self._call("wipe", node)

    def clean(self) -> bool:
        return (all(n.alive and not n.paused for n in self.nodes) and not self.grudge
                and not self.replication and not self.toxics and not self.degraded and not self.clocks)


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``cond`` until it holds; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: did not happen within {timeout:.0f} s"
        time.sleep(0.01)


def _spec(faults: tuple[str, ...], **kw: Any) -> TestSpec:
    return TestSpec(seed=3, time_limit_s=2.0, nemesis=NemesisSpec(faults=faults, **kw))


def _package(cluster: FakeCluster, steps: Sequence[ScheduledFault]) -> NemesisPackage:
    pkg = NemesisPackage.from_spec(cluster.spec, cluster)  # type: ignore[arg-type]
    pkg.schedule = steps
    return pkg


def _ops(path: Path) -> list[Op]:
    return list(read_history(path))


def test_from_spec_builds_the_seeded_schedule(tmp_path: Path) -> None:
    spec = TestSpec(seed=11, time_limit_s=120, nemesis=NemesisSpec(faults=("kill", "partition")))
    a = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    b = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    assert a.schedule == b.schedule and a.schedule
    assert set(a.nemeses) == {"kill", "partition"}
    none = NemesisPackage.from_spec(TestSpec(), FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    assert none.schedule == () and not none.nemeses


def test_run_journals_both_ends_of_each_fault(tmp_path: Path) -> None:
    spec = _spec(("kill", "partition", "toxics"), max_concurrent=3)
    cluster = FakeCluster(spec, tmp_path)
    steps = [ScheduledFault(0.0, "kill", "kill", 0.1, 4),
             ScheduledFault(0.05, "partition", "isolate-leader", 0.1, 1),
             ScheduledFault(0.08, "toxics", "timeout", 0.1, 0)]
    pkg = _package(cluster, steps)
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 1.0, h)
        pkg.heal_all(h)
    ops = _ops(tmp_path / "h.jsonl")
    assert all(o.process == "nemesis" and o.type == "info" for o in ops)
    assert [o.f for o in ops] == ["kill", "kill", "partition", "partition", "toxic", "toxic",
                                  "start", "start", "heal", "heal", "clear-toxics", "clear-toxics"]
    kill_done = ops[1].value
    assert kill_done["nodes"] == [2] and "killed node 2" in kill_done["result"]
    assert kill_done["leaders"] == {"fl-queue/0": 1, "fl-queue/1": 2, "fl-queue/2": 3}
    part = ops[3].value
    assert part["target"] == 2 and part["partition"] == "fl-queue/1"
    assert part["grudge"] == {"1": [2], "2": [1, 3], "3": [2]}
    assert ops[5].value["toxic"]["kind"] == "timeout" and len(ops[5].value["names"]) == 6
    assert cluster.clean()


def test_node_faults_never_share_a_node(tmp_path: Path) -> None:
    spec = _spec(("kill", "pause", "stop"), max_concurrent=3)
    cluster = FakeCluster(spec, tmp_path)
    steps = [ScheduledFault(0.0, "kill", "kill", 0.5, 7), ScheduledFault(0.01, "pause", "pause", 0.5, 7),
             ScheduledFault(0.02, "stop", "stop", 0.5, 7)]
    pkg = _package(cluster, steps)
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 0.2, h)
        assert len(pkg.active) == 3
        pkg.heal_all(h)
    done = [o.value["nodes"][0] for o in _ops(tmp_path / "h.jsonl")[1:6:2]]
    assert sorted(done) == [1, 2, 3]
    assert cluster.clean()


def test_no_target_is_journaled_and_skipped(tmp_path: Path) -> None:
    spec = TestSpec(nemesis=NemesisSpec(faults=("kill", "pause", "stop", "wipe"), max_concurrent=4))
    cluster = FakeCluster(spec, tmp_path)
    steps = [ScheduledFault(0.0, "kill", "kill", 1, 0), ScheduledFault(0.0, "stop", "stop", 1, 1),
             ScheduledFault(0.0, "wipe", "wipe", 1, 2), ScheduledFault(0.01, "pause", "pause", 1, 0)]
    pkg = _package(cluster, steps)
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 0.1, h)
        pkg.heal_all(h)
    ops = _ops(tmp_path / "h.jsonl")
    skipped = [o for o in ops if o.error]
    assert len(skipped) == 1 and skipped[0].f == "pause" and "no node left" in skipped[0].error
    assert cluster.clean()


def test_a_failed_heal_is_forced_by_teardown(tmp_path: Path) -> None:
    spec = _spec(("pause",))
    cluster = FakeCluster(spec, tmp_path)
    pkg = _package(cluster, [ScheduledFault(0.0, "pause", "pause", 0.05, 0)])
    cluster.fail.add("resume")
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as h:
        t = threading.Thread(target=pkg.run, args=(time.monotonic() + 60, h))
        t.start()
        _wait_for(lambda: any(o.f == "resume" and o.error for o in _ops(path)), "the failed heal journaled")
        ops = _ops(path)
        assert ops[-1].f == "resume" and "failed on purpose" in (ops[-1].error or "")
        assert not cluster.clean()
        cluster.fail.clear()
        pkg.heal_all(h)
        t.join(30)
        assert not t.is_alive(), "run() went on after heal_all"
    assert cluster.clean()


def test_a_failed_fault_is_still_healed(tmp_path: Path) -> None:
    spec = _spec(("kill",))
    cluster = FakeCluster(spec, tmp_path)
    cluster.fail.add("kill")
    pkg = _package(cluster, [ScheduledFault(0.0, "kill", "kill", 5, 0)])
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 0.1, h)
        pkg.heal_all(h)
    assert [o.f for o in _ops(tmp_path / "h.jsonl")] == ["kill", "kill", "start", "start"]
    assert ("start_node", 1) in cluster.calls


def test_teardown_error_is_reported_after_every_nemesis_ran(tmp_path: Path) -> None:
    spec = _spec(("partition", "toxics"))
    cluster = FakeCluster(spec, tmp_path)
    pkg = _package(cluster, [])
    pkg.setup()
    cluster.fail.add("heal_network")
    with pytest.raises(NemesisError, match="partition"):
        pkg.heal_all()
    assert ("clear_toxics", None) in cluster.calls


def test_heal_all_from_another_thread_stops_run(tmp_path: Path) -> None:
    spec = _spec(("kill",))
    cluster = FakeCluster(spec, tmp_path)
    pkg = _package(cluster, [ScheduledFault(0.0, "kill", "kill", 30, 0),
                             ScheduledFault(40, "kill", "kill", 5, 1)])
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        t = threading.Thread(target=pkg.run, args=(time.monotonic() + 60, h))
        t.start()
        _wait_for(lambda: bool(pkg.active), "the first kill held")
        pkg.heal_all(h)
        t.join(30)  # the next step is due at 40 s: only heal_all's stop ends run() before it
        assert not t.is_alive(), "run() went on after heal_all"
    assert cluster.clean()
    assert [o.f for o in _ops(tmp_path / "h.jsonl")] == ["kill", "kill", "start", "start"]


@pytest.mark.parametrize("pick,target", [(0, 1), (1, 2), (2, 3), (5, 3)])  # sorted nodes[pick % 3]
def test_isolate_node_isolates_the_node_its_pick_chooses(tmp_path: Path, pick: int, target: int) -> None:
    from faultline.nemeses.partition import PartitionNemesis

    cluster = FakeCluster(_spec(("partition",)), tmp_path)
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    value = nemesis.plan(ScheduledFault(0, "partition", "isolate-node", 1, pick), busy=())
    assert value["target"] == target and value["nodes"] == [1, 2, 3]
    assert value["grudge"][str(target)] == [n for n in (1, 2, 3) if n != target]


@pytest.mark.parametrize("controller", [1, 2, 3])
def test_isolate_controller_isolates_the_active_controller_whatever_the_pick(
        tmp_path: Path, controller: int) -> None:
    from faultline.nemeses.partition import PartitionNemesis

    cluster = FakeCluster(_spec(("partition",)), tmp_path)
    cluster.controller = controller
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    for pick in range(4):  # the pick chooses nothing here: the controller is the target
        value = nemesis.plan(ScheduledFault(0, "partition", "isolate-controller", 1, pick), busy=())
        assert value["target"] == controller, (pick, value)
        assert value["grudge"][str(controller)] == [n for n in (1, 2, 3) if n != controller]


def _coordinator_plan(spec: TestSpec, tmp_path: Path,
                      family: str) -> Callable[[int, Collection[int]], dict[str, Any]]:
    """The plan of ``family``'s coordinator kind by ``spec``'s package, given a pick and the busy nodes."""
    pkg = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    nemesis = pkg.nemeses[family]
    nemesis.setup(pkg.cluster)
    kind = FAMILIES[family].coordinator_kind
    assert kind is not None
    return lambda pick, busy: nemesis.plan(ScheduledFault(0, family, kind, 1, pick), busy)


@pytest.mark.parametrize("family", ["kill", "pause", "stop", "partition"])
def test_a_coordinator_kind_aims_its_fault_at_the_groups_coordinator_whatever_the_pick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """The broker leading the group's offsets partition is the target, unless it has none or
    is faulted already (an error: the package journals the fault as skipped)."""
    from faultline.nemeses import base

    spec = dataclasses.replace(_spec((family,)), name="g")
    asked: list[str] = []
    leader: list[int | None] = [3]

    def coordinator(cluster: Any, topic: str, group: str, timeout: float) -> int | None:
        asked.append(group)
        return leader[0]

    monkeypatch.setattr(base, "coordinator", coordinator)
    plan = _coordinator_plan(spec, tmp_path, family)
    for pick in range(3):
        value = plan(pick, ())
        target = value["target"] if family == "partition" else value["nodes"]
        assert target == (3 if family == "partition" else [3]) and value["group"] == "faultline-g"
    assert asked and set(asked) == {"faultline-g"}
    if family == "partition":
        assert value["grudge"]["3"] == [1, 2]
    else:
        with pytest.raises(NemesisError, match="coordinator, node 3, is faulted already"):
            plan(0, {3})
    leader[0] = None
    with pytest.raises(NemesisError, match="faultline-g's partition of __consumer_offsets has no leader"):
        plan(0, ())


@pytest.mark.parametrize("family", ["kill", "pause", "stop", "partition"])
def test_a_txn_workloads_coordinator_kind_aims_at_the_coordinator_of_the_picked_producers_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """In a txn workload's run the target is the leader of the __transaction_state partition
    of producer ``pick % producers``'s transactional id, which the op records."""
    from faultline.nemeses import base

    spec = dataclasses.replace(_spec((family,)), name="x", workload=WorkloadSpec(name="txn", producers=2))
    asked: list[tuple[str, str]] = []

    def coordinator(cluster: Any, topic: str, key: str, timeout: float) -> int | None:
        asked.append((topic, key))
        return {"faultline-x-t0": 2, "faultline-x-t1": 3}[key]

    monkeypatch.setattr(base, "coordinator", coordinator)
    plan = _coordinator_plan(spec, tmp_path, family)
    for pick, node in [(0, 2), (1, 3), (4, 2)]:
        value = plan(pick, ())
        target = value["target"] if family == "partition" else value["nodes"]
        assert target == (node if family == "partition" else [node])
        assert value["transactional_id"] == f"faultline-x-t{pick % 2}" and "group" not in value
    assert {topic for topic, _ in asked} == {"__transaction_state"}


def test_a_txn_workloads_package_draws_coordinator_kinds(tmp_path: Path) -> None:
    spec = TestSpec(seed=3, time_limit_s=600.0, workload=WorkloadSpec(name="txn"),
                    nemesis=NemesisSpec(faults=("kill",), interval_s=5.0))
    pkg = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    assert {s.kind for s in pkg.schedule} == {"kill", "kill-coordinator"}


def test_a_group_workloads_package_draws_coordinator_kinds(tmp_path: Path) -> None:
    members = dataclasses.replace(ConsumerSpec(), mode="subscribe")
    spec = TestSpec(seed=3, time_limit_s=600.0, consumer=members, workload=WorkloadSpec(name="group"),
                    nemesis=NemesisSpec(faults=("kill",), interval_s=5.0))
    pkg = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    assert {s.kind for s in pkg.schedule} == {"kill", "kill-coordinator"}


def test_a_group_or_txn_workloads_package_aims_client_faults_at_its_own_clients(tmp_path: Path) -> None:
    members = dataclasses.replace(ConsumerSpec(), mode="subscribe")
    nemesis = NemesisSpec(faults=("clients",), interval_s=5.0)
    group = TestSpec(seed=3, time_limit_s=600.0, consumer=members, workload=WorkloadSpec(name="group"),
                     nemesis=nemesis)
    txn = TestSpec(seed=3, time_limit_s=600.0, workload=WorkloadSpec(name="txn"), nemesis=nemesis)
    queue = TestSpec(seed=3, time_limit_s=600.0, nemesis=nemesis)
    drawn = {spec.workload.name: {s.kind for s in NemesisPackage.from_spec(
        spec, FakeCluster(spec, tmp_path)).schedule} for spec in (group, txn, queue)}  # type: ignore[arg-type]
    assert drawn == {"group": {"crash", "crash-consumer", "pause-consumer"},
                     "txn": {"crash", "pause-producer"}, "queue": {"crash"}}


def test_isolate_controller_without_a_controller_is_an_error(tmp_path: Path) -> None:
    from faultline.nemeses.partition import PartitionNemesis

    cluster = FakeCluster(_spec(("partition",)), tmp_path)
    cluster.controller = None
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="no active controller"):
        nemesis.plan(ScheduledFault(0, "partition", "isolate-controller", 1, 0), busy=())


def test_halves_bridge_ring_plans(tmp_path: Path) -> None:
    from faultline.nemeses.partition import PartitionNemesis

    spec = TestSpec(kafka=KafkaSpec(nodes=5),
                    nemesis=NemesisSpec(faults=("partition",)))
    cluster = FakeCluster(spec, tmp_path)
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    for kind in ("halves", "bridge", "ring"):
        value = nemesis.plan(ScheduledFault(0, "partition", kind, 1, 4), busy=())
        assert value["kind"] == kind and value["grudge"] and "target" not in value
    with pytest.raises(NemesisError, match="unknown partition kind"):
        nemesis.plan(ScheduledFault(0, "partition", "moat", 1, 4), busy=())


def test_a_slow_start_does_not_shorten_the_hold(tmp_path: Path) -> None:
    spec = _spec(("kill",))
    cluster = FakeCluster(spec, tmp_path)
    real_kill = cluster.kill

    def slow_kill(node: int) -> None:
        time.sleep(0.4)
        real_kill(node)

    cluster.kill = slow_kill  # type: ignore[method-assign]
    pkg = _package(cluster, [ScheduledFault(0.0, "kill", "kill", 0.3, 0)])
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 1.5, h)
        pkg.heal_all(h)
    ops = _ops(tmp_path / "h.jsonl")
    assert [o.f for o in ops] == ["kill", "kill", "start", "start"]
    assert ops[2].time - ops[1].time >= 0.3e9


def test_limits_hold_at_run_time_when_a_heal_is_late(tmp_path: Path) -> None:
    spec = _spec(("pause", "kill"), max_concurrent=1)
    cluster = FakeCluster(spec, tmp_path)
    real_pause, real_resume = cluster.pause, cluster.resume

    def slow_pause(node: int) -> None:
        time.sleep(0.3)
        real_pause(node)

    def slow_resume(node: int) -> None:
        time.sleep(0.1)
        real_resume(node)

    cluster.pause = slow_pause  # type: ignore[method-assign]
    cluster.resume = slow_resume  # type: ignore[method-assign]
    # the kill is planned for after the pause heals, but the pause took effect late and its
    # heal took longer than the planned gap
    pkg = _package(cluster, [ScheduledFault(0.0, "pause", "pause", 0.2, 0),
                             ScheduledFault(0.25, "kill", "kill", 0.1, 1)])
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 2.0, h)
        pkg.heal_all(h)
    ops = _ops(tmp_path / "h.jsonl")
    assert [o.f for o in ops] == ["pause", "pause", "resume", "resume", "kill", "kill", "start", "start"]
    assert ops[4].time - ops[3].time >= 0.05e9  # the planned gap follows the heal's end


def test_heal_all_tears_down_even_when_the_history_is_gone(tmp_path: Path) -> None:
    spec = _spec(("pause",))
    cluster = FakeCluster(spec, tmp_path)
    pkg = _package(cluster, [ScheduledFault(0.0, "pause", "pause", 30, 0)])
    h = HistoryWriter(tmp_path / "h.jsonl")
    pkg.run(time.monotonic() + 0.2, h)
    h.close()
    with pytest.raises(NemesisError, match="heal"):
        pkg.heal_all(h)
    assert cluster.clean()


def test_yaml_spec_drives_the_package(tmp_path: Path) -> None:
    import yaml

    text = """
    seed: 9
    time_limit_s: 120
    nemesis:
      faults: [kill, partition, toxics]
      interval_s: 5
      max_concurrent: 2
    """
    spec = TestSpec.from_mapping(yaml.safe_load(text), source="spec.yaml")
    pkg = NemesisPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    assert pkg.max_concurrent == 2 and set(pkg.nemeses) == {"kill", "partition", "toxics"}
    assert {s.family for s in pkg.schedule} == {"kill", "partition", "toxics"}
    assert all(2.0 <= s.hold_s <= 7.5 for s in pkg.schedule[:-1])


@pytest.mark.parametrize("kills", [False, True])
def test_a_stop_that_had_to_sigkill_is_journaled_and_credited_as_a_kill(
        tmp_path: Path, kills: bool) -> None:
    """Found by review: a controlled shutdown past its timeout is SIGKILLed, an unclean
    shutdown, and was journaled and credited as a graceful stop (with ELR a kill makes
    one destroyed copy enough: a permitted loss read as a violation)."""
    cluster = FakeCluster(_spec(("stop",)), tmp_path)
    cluster.stop_kills = kills
    pkg = _package(cluster, [ScheduledFault(0.0, "stop", "stop", 0.1, 0)])
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 1.0, h)
        pkg.heal_all(h)
    ops = _ops(tmp_path / "h.jsonl")
    stop = ops[1].value
    assert ("killed" in stop, "did not stop within 30 s: killed" in stop["result"]) == (kills, kills)
    assert ("kill" in faults_of(ops).families) == kills and "stop" in faults_of(ops).families
    if kills:
        assert stop["killed"] == stop["nodes"]


def test_isolate_leader_journals_the_leaders_its_target_came_from(tmp_path: Path) -> None:
    """Found by the nemesis review: the ``leaders`` snapshot was a read of its own, before
    the one the target came from, so a leadership move between the two journaled the
    isolated partition led by a node the grudge did not cut off (no leader-fault there)."""
    class Moving(FakeCluster):
        """Partition 0's leader is node 1 at the first read, node 2 from then on."""

        reads = 0

        def leaders(self, topic: str) -> dict[int, PartitionState]:
            self.reads += 1
            lead = 1 if self.reads == 1 else 2
            return {p: PartitionState(lead, (1, 2, 3)) for p in range(self.spec.topic.partitions)}

    cluster = Moving(_spec(("partition",)), tmp_path)
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    value = nemesis.plan(ScheduledFault(0.0, "partition", "isolate-leader", 1.0, 0), set())
    assert value["leaders"][value["partition"]] == value["target"], value
