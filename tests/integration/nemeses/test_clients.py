"""A client crash on a real cluster: a producer killed mid-send (its child process
SIGKILLed, or with the Java client its JVM) leaves its open sends ``info``, its
replacement sends under a new process number, idempotence writes no acknowledged value
twice and loses none, the consumer of the run reads no value before its invoke is
journaled, and no child process (no JVM) is left once the workload stops.

The crash touches no broker: the session's shared cluster serves, on a topic of its own.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from faultline.cluster.admin_child import CHILD_NAME
from faultline.cluster.local.cluster import LocalCluster
from faultline.history import HistoryWriter, read_history
from faultline.nemeses.clients import ClientsNemesis
from faultline.spec import NemesisSpec, TestSpec, TopicSpec, WorkloadSpec
from faultline.workloads import workload_for
from faultline.workloads.crashable import CrashableQueueWorkload
from faultline.workloads.java_client import MAIN_CLASS as JAVA_MAIN_CLASS
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.outcomes import CRASH_ERROR
from tests.integration.conftest import INTEGRATION_SPEC
from tests.integration.nemeses.nemesis_helpers import nemesis_op, report, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SPEC = replace(INTEGRATION_SPEC, name="nemesis-clients",
               topic=TopicSpec(name="it-client-crash", partitions=2, replication_factor=3,
                               min_insync_replicas=2),
               workload=WorkloadSpec(producers=2, consumers=1),
               nemesis=NemesisSpec(faults=("clients",)))


def _records(cluster: LocalCluster, topic: str = SPEC.topic.name) -> list[int]:
    """Every value in ``topic``, read from the start to each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "it-crash",
                         "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(SPEC.topic.partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, 10)[1] for tp in tps}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        values: list[int] = []
        seen = dict.fromkeys(ends, 0)

        def done() -> bool:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                values.append(int(m.value()))
                seen[m.partition()] = m.offset() + 1
            return all(seen[p] >= end for p, end in ends.items())

        wait_until(done, 30, "the topic read to its high watermarks")
        return values
    finally:
        consumer.close()


def _crash_journaled_as_promised(cluster: LocalCluster, path: Path, spec: TestSpec,
                                 crash: dict[str, Any], restart: dict[str, Any]) -> None:
    """Producer 0, killed mid-send, left its open sends ``info``, its replacement sent
    under a new process number, every send ended, no value was read before its invoke,
    and every acknowledged value is in the topic once."""
    report(f"crash: {crash['result']}; restart: {restart['result']}")
    assert crash["processes"] == [0] and crash["sends"] > 0, crash  # killed mid-send
    [new] = restart["processes"]
    w = spec.workload
    assert new >= w.producers + w.consumers  # the first numbers are the first clients'

    ops = list(read_history(path))  # validated: pairing, retired processes
    sends = [op for op in ops if op.f == "send"]
    crashed = [op for op in sends if op.error == CRASH_ERROR]
    assert len(crashed) == crash["sends"]
    assert {op.process for op in crashed} == {0} and {op.type for op in crashed} == {"info"}
    last_of_0 = max(op.index for op in sends if op.process == 0)
    assert all(op.process != 0 or op.index <= last_of_0 for op in sends)
    assert any(op.process == new and op.type == "ok" for op in sends)
    invoked = Counter(op.process for op in sends if op.type == "invoke")
    ended = Counter(op.process for op in sends if op.type != "invoke")
    assert invoked == ended, "every send invoked ended, the crashed client's included"

    invoked_at = {op.value["value"]: op.index for op in sends if op.type == "invoke"}
    reads = [(r[3], op.index) for op in ops if op.f == "poll" and op.type == "ok"
             for r in op.value["records"]]
    assert reads and all(invoked_at[v] < at for v, at in reads), "a value read before its invoke"

    acked = {op.value["value"] for op in sends if op.type == "ok"}
    read = Counter(_records(cluster, spec.topic.name))
    assert not [v for v in acked if read[v] != 1], "an acknowledged value lost or written twice"
    report(f"{len(acked)} acknowledged, {len(crashed)} left open by the crash, "
           f"{sum(1 for op in crashed if read[op.value['value']])} of those written")


def _crash_and_restart(cluster: LocalCluster, path: Path, spec: TestSpec, first: int,
                       acked: Callable[[Any], int]) -> tuple[Any, dict[str, Any]]:
    """Run ``spec``'s workload until ``first`` sends are acknowledged, crash producer 0,
    restart it, run until ``acked(workload)`` (what counts the replacement's) grew by
    1000, stop, and hold the history to :func:`_crash_journaled_as_promised`; the
    workload and the crash's fields."""
    cluster.create_topic(spec.topic)
    history = HistoryWriter(path)
    workload: Any = workload_for(spec)(spec, cluster.bootstrap_servers(), history)
    nemesis = ClientsNemesis()
    nemesis.bind(workload)
    try:
        workload.start()
        started = wait_until(lambda: workload.stats().ok > first, 60, f"{first} sends acknowledged")
        crash = nemesis.invoke(nemesis_op("crash-client", {"clients": [0]})).value
        restart = nemesis.invoke(nemesis_op("restart-client", {})).value
        ok_before = acked(workload)
        again = wait_until(lambda: acked(workload) > ok_before + 1000, 60,
                           "the replacement's sends acknowledged")
    finally:
        stopping = time.monotonic()
        workload.stop()
        history.close()
    report(f"{first} acknowledged {started:.1f} s after the start, 1000 more {again:.1f} s after "
           f"the restart; stopped in {time.monotonic() - stopping:.1f} s")
    _crash_journaled_as_promised(cluster, path, spec, crash, restart)
    return workload, crash


def test_a_crashed_producer_ends_its_sends_info_and_its_replacement_is_a_new_process(
        cluster: LocalCluster, tmp_path: Path) -> None:
    workload, crash = _crash_and_restart(cluster, tmp_path / "history.jsonl", SPEC, 2000,
                                         lambda w: w.producers[0].counts.ok)
    assert isinstance(workload, CrashableQueueWorkload)
    left = [c for c in multiprocessing.active_children() if c.name != CHILD_NAME]  # but the cluster's admin
    assert left == [], "a producer child left running"
    with pytest.raises(ProcessLookupError):
        os.kill(crash["pid"], 0)


JAVA_SPEC = replace(SPEC, name="nemesis-clients-java",
                    topic=replace(SPEC.topic, name="it-java-client-crash"),
                    workload=WorkloadSpec(client="java", producers=1, consumers=1))


def _jvms_of_this_process() -> list[int]:
    """The Java clients this test process started that still run."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
            if int(fields["PPid"]) == os.getpid() and JAVA_MAIN_CLASS.encode() in cmdline:
                found.append(int(status.parent.name))
    return found


def test_a_crashed_java_producer_is_its_jvm_killed_and_replaced_by_a_new_process(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """The same as the librdkafka producer's crash, with the Java client: each producer in
    a JVM of its own, the consumer in another, and none left once the workload stops."""
    workload, crash = _crash_and_restart(cluster, tmp_path / "history.jsonl", JAVA_SPEC, 1000,
                                         lambda w: w.stats().ok)  # one producer: the replacement
    assert isinstance(workload, CrashableJavaQueueWorkload)
    assert _jvms_of_this_process() == [], "a JVM left running"
    with pytest.raises(ProcessLookupError):
        os.kill(crash["pid"], 0)
