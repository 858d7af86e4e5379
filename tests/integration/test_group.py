"""The group workload on a real 3-node cluster, with each rebalance protocol: once the group
has committed (``wait until group G has committed``), the broker that coordinates it
(``coordinator of group G``) is cut off from the other brokers until fenced, healed, then
killed while members commit, and restarted. The run directory holds to its schemas, the
group committed again once its coordinator's isolation healed, the kill hit the group's
coordinator after a commit and commits went on after it, and the run is judged valid,
the group checker's own verdict included (acks=all: nothing the guarantees forbid may
show). A random schedule
of the group workload isolates, then kills, the group's coordinator, and crashes and pauses
consumers, and is judged valid too."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from rich.console import Console

from faultline.history import Op, read_history
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import build_schedule
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import (
    GROUP_SESSION_TIMEOUT_MS,
    ConsumerSpec,
    KafkaSpec,
    NemesisSpec,
    TestSpec,
    WorkloadSpec,
)
from tests.schemas import validate_run_dir, validator

pytestmark = pytest.mark.integration


def spec(protocol: str) -> TestSpec:
    name = f"it-group-{protocol}"
    group = f"faultline-{name}"
    return TestSpec(
        name=name, time_limit_s=60.0, kafka=KafkaSpec(heap_mb=384),
        consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol=protocol),  # type: ignore[arg-type]
        # a modest rate: the test validates every history line against its schema
        workload=WorkloadSpec(name="group", producers=1, consumers=2, rate=200),
        nemesis=NemesisSpec(schedule=(
            f"wait until group {group} has committed within 15 s", *isolating(group),
            f"crash coordinator of group {group} as coord", "wait for 5 s", "restart coord",
            f"wait until group {group} has committed within 20 s", "end")))


def isolating(group: str) -> tuple[str, ...]:
    """The steps that cut group G's coordinator off from the other brokers (the clients
    still reach it) until it is fenced, and for 6 s more, then heal, wait for the old
    coordinator to register again and for the group to commit. Not ``wait until group G has
    committed`` while it is cut off: the admin client may ask the old coordinator, which
    answers from what it held when cut off (docs/design.md)."""
    return (f"isolate coordinator of group {group} as iso", "wait until iso fenced within 20 s",
            "wait for 6 s", "heal", "wait until iso registered within 20 s",
            f"wait until group {group} has committed within 20 s")


@pytest.fixture(scope="module", params=["classic", "consumer"])
def outcome(request: pytest.FixtureRequest, local_backend: None,
            tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(spec(request.param), results=tmp_path_factory.mktemp("results"),
                    console=Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def ops(outcome: RunOutcome) -> list[Op]:
    """The run's history, read once for the tests of that run."""
    return list(read_history(outcome.run_dir))


def test_the_coordinators_broker_killed_while_members_commit(outcome: RunOutcome, ops: list[Op]) -> None:
    assert outcome.error is None and outcome.recovered
    assert {"history.jsonl.zst", "group.json"} <= set(validate_run_dir(outcome.run_dir))
    assert_coordinator_killed_while_members_commit(ops, "coordinator of group faultline-it-group-")
    assert_coordinator_isolated_while_members_commit(ops, "coordinator of group faultline-it-group-")
    assert any(o.f == "assign" and o.value["partitions"] for o in ops)


def assert_coordinator_killed_while_members_commit(ops: list[Op], role: str) -> None:
    """The one kill, of the node the step's ``role`` (a prefix) named, came once the group
    had committed (the first wait on its commits), and the group found its new coordinator
    and went on committing after it, every acknowledged commit with its leader epochs."""
    (kill,) = [o for o in ops if o.process == "nemesis" and o.f == "kill" and "result" in o.value]
    assert kill.value["role"].startswith(role), kill.value
    assert kill.error is None and len(kill.value["targets"]) == 1
    waited = next(o for o in ops if o.process == "nemesis" and o.f == "wait" and "result" in o.value
                  and "has committed" in o.value["step"])
    assert waited.value["result"].startswith("met after"), waited.value
    commits = [o for o in ops if o.f == "commit" and o.type == "ok"]
    assert any(c.time < kill.time for c in commits) and any(c.time > kill.time for c in commits)
    assert all(epoch is not None for c in commits for _, _, _, epoch in c.value["offsets"])


def assert_coordinator_isolated_while_members_commit(ops: list[Op], role: str) -> None:
    """The isolation (:func:`isolating`) cut the node the step's ``role`` (a prefix) named
    off from the others, that node was fenced, and once healed the group committed again.
    Whether it committed while its coordinator was cut off is not asserted: the classic
    groups did, the KIP-848 groups did not (docs/design.md)."""
    (cut,) = [o for o in ops if o.process == "nemesis" and o.f == "partition" and "result" in o.value]
    assert cut.value["role"].startswith(role) and cut.error is None, cut.value
    (node,) = cut.value["targets"]
    assert sorted(cut.value["grudge"][str(node)]) == [n for n in cut.value["nodes"] if n != node], cut.value
    waits = [o for o in ops if o.process == "nemesis" and o.f == "wait" and "result" in o.value]
    (fenced,) = [o for o in waits if o.value["step"].endswith("fenced within 20 s")]
    (heal,) = [o for o in ops if o.process == "nemesis" and o.f == "heal" and "result" in o.value
               and o.value.get("step") == "heal"]
    committed = next(o for o in waits if "has committed" in o.value["step"] and o.time > heal.time)
    assert fenced.time < heal.time and fenced.value["result"].startswith("met after"), fenced.value
    assert committed.value["result"].startswith("met after"), committed.value
    assert any(o.f == "commit" and o.type == "ok" and heal.time < o.time <= committed.time for o in ops)


def assert_kafka_and_the_group_kept_their_promises(outcome: RunOutcome) -> None:
    """Kafka and the group kept their promises. librdkafka may not: a send that timed out
    makes it bump its idempotent epoch, and a batch another partition wrote with its
    response lost is then re-sent as new (librdkafka#4953); such a duplicate is the
    client's, shown by its copies' epochs, never an excuse and never the broker's."""
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert set(results["violations_by"]) <= {"client"}, results["violations_by"]
    assert results["group"]["valid"] is True and results["group"]["settled"] is True, results["group"]
    assert not [u for u in results["unknown"] if u["affects_verdict"]], results["unknown"]
    for d in results["anomalies"].get("duplicate", []):
        assert d["cause"] == "client-epoch-bump", d
        assert len({c["producer_epoch"] for c in d["copies"]}) > 1, d
    assert outcome.valid is (not results["violations"])


def test_the_checkers_find_no_fault_of_kafka_or_the_group(outcome: RunOutcome) -> None:
    assert_kafka_and_the_group_kept_their_promises(outcome)


def test_the_groups_end_state_is_collected_and_judged(outcome: RunOutcome, ops: list[Op]) -> None:
    """group.json holds the coordinator's committed offsets, with their leader epochs, at the
    last acknowledged commit of each partition (the kill lost none), and the replicas of the
    group's __consumer_offsets partition; the group checker judged commit-lost by it."""
    end = json.loads((outcome.run_dir / "group.json").read_text())
    validator("group.schema.json").validate(end)
    assert end["group"] == "faultline-" + outcome.run_dir.parent.name and end["errors"] == []
    last: dict[int, int] = {}
    for o in ops:
        if o.f == "commit" and o.type == "ok":
            last.update((p, off) for t, p, off, _ in o.value["offsets"] if t == "fl-queue")
    assert last and {o["partition"]: o["offset"] for o in end["offsets"]} == last
    assert all(o["leader_epoch"] is not None for o in end["offsets"])
    replicas = end["offsets_replicas"]
    assert {r["node"] for r in replicas} == {1, 2, 3}, "replication factor 3 on three nodes"
    assert all(r["partition"] == end["offsets_topic_partition"] and r["batches"] for r in replicas)
    committed = {o["partition"]: (o["offset"], o["leader_epoch"]) for o in end["offsets"]}
    for r in replicas:  # Kafka's own commit records, decoded: each replica's last is the answer
        assert r["commits"], r["node"]
        kept = {p: (off, epoch) for _, t, p, off, epoch in r["commits"] if t == "fl-queue"}
        assert kept == committed, r["node"]
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["anomaly_counts"]["commit-lost"] == 0
    assert not [u for u in results["unknown"] if u["kind"] == "group-end-unknown"]


#: The random schedule's nemesis: its clients family aims at the group's consumers too.
DRAWN = NemesisSpec(faults=("kill", "partition", "clients"), interval_s=5.0)


def drawn_spec() -> TestSpec:
    """A random schedule (seed 19567) that isolates the group's coordinator, crashes a
    consumer, kills the coordinator, then pauses a consumer for 6.2 s, a little longer than
    its session timeout (KIP-848's protocol)."""
    return replace(spec("consumer"), name="it-group-drawn", seed=19567, time_limit_s=24.0, nemesis=DRAWN)


def test_the_random_schedule_is_the_one_the_test_expects() -> None:
    """The schedule is pure: drawn before the run, from the spec alone."""
    run = drawn_spec()
    schedule = build_schedule(run.nemesis, run.seed, run.time_limit_s, run.kafka.nodes,
                              coordinated=True, workload="group")
    assert [s.kind for s in schedule] == ["isolate-coordinator", "crash-consumer", "kill-coordinator",
                                          "pause-consumer"]
    (pause,) = [s for s in schedule if s.kind == "pause-consumer"]
    assert pause.hold_s * 1000 > GROUP_SESSION_TIMEOUT_MS, "held longer than the member's session"
    assert NemesisPackage.from_spec(run, object()).schedule == schedule  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def drawn(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(drawn_spec(), results=tmp_path_factory.mktemp("results"),
                    console=Console(file=io.StringIO()))


def test_a_random_schedule_aims_its_faults_at_the_groups_coordinator(drawn: RunOutcome) -> None:
    assert drawn.error is None and drawn.recovered
    ops = list(read_history(drawn.run_dir))
    faults = [o for o in ops if o.process == "nemesis" and o.f in ("kill", "partition")
              and "result" in o.value]
    assert [o.value["kind"] for o in faults] == ["isolate-coordinator", "kill-coordinator"]
    for o in faults:
        assert o.error is None and o.value["group"] == "faultline-it-group-drawn", o.value
    isolated, killed = faults
    assert isolated.value["grudge"][str(isolated.value["target"])] and killed.value["nodes"]
    # the consumer faults, journaled as the targeted verbs are, each healed
    clients = [(o.f, o.value["kind"], o.value["consumers"]) for o in ops
               if o.process == "nemesis" and o.f.endswith("-client") and "result" in o.value]
    assert [(f, kind) for f, kind, _ in clients] == [("crash-client", "crash"), ("restart-client", "crash"),
                                                     ("pause-client", "pause"), ("resume-client", "pause")]
    crashed, restarted, paused, resumed = (who for _, _, who in clients)
    assert len(crashed) == 1 and restarted == crashed and len(paused) == 1 and resumed == paused
    assert not [o for o in ops if o.process == "nemesis" and o.error is not None]
    assert_kafka_and_the_group_kept_their_promises(drawn)
