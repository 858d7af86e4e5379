"""Read-process-write on a real 3-node cluster, with each client: two transactional
producers, each a processor that reads up to 5 records per transaction in one group
(read_committed) and sends the positions after them to the transaction, commit and abort
with no fault; the txn checker finds transactions that read others' writes (write-read
edges), no record processed by two committed transactions and no G1c cycle, the run
directory conforms to its schemas (the Java client's reads journaled as librdkafka's), and the
group's committed offsets, read after the drain, are the positions the last committed
transactions sent."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from faultline.checkers.guarantees import G1C, PROCESSED_TWICE
from faultline.cluster.kafka_client import committed_offsets, new_admin
from faultline.cluster.local.cluster import LocalCluster
from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, TestSpec, TransactionSpec, WorkloadSpec
from tests.schemas import validate_run_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPEC = TestSpec(
    name="it-rpw", time_limit_s=8.0,
    kafka=KafkaSpec(heap_mb=384),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", producers=2, consumers=1),
    transactions=TransactionSpec(sends=4, abort_probability=0.3, reads=5),
)


class _GroupReadingCluster(LocalCluster):
    """The run's cluster, which reads the processors' group's committed offsets, by
    partition, after the drain (before it collects the node logs)."""

    def __init__(self, spec: TestSpec) -> None:
        super().__init__(spec)
        self.group, self.topic = spec.rpw_group_id, spec.topic.name
        self.committed: dict[int, int] | None = None

    def collect(self, dest: Path) -> None:
        with new_admin(self.bootstrap_servers()) as admin:
            offsets = committed_offsets(admin, self.group, timeout=10.0)
        self.committed = {p: o for (topic, p), o in offsets.items() if topic == self.topic}
        super().collect(dest)


@pytest.fixture(scope="module", params=["librdkafka", "java"])
def run(request: pytest.FixtureRequest, local_backend: None,
        tmp_path_factory: pytest.TempPathFactory) -> tuple[RunOutcome, _GroupReadingCluster]:
    spec = dataclasses.replace(SPEC, workload=dataclasses.replace(SPEC.workload, client=request.param))
    clusters: list[_GroupReadingCluster] = []

    def cluster(s: TestSpec) -> _GroupReadingCluster:
        clusters.append(_GroupReadingCluster(s))
        return clusters[0]

    outcome = run_test(spec, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()),
                       cluster_factory=cluster)
    return outcome, clusters[0]


def test_transactions_read_what_others_wrote_and_process_each_record_once(
        run: tuple[RunOutcome, _GroupReadingCluster]) -> None:
    outcome, _ = run
    assert outcome.error is None
    ended = [op for op in read_history(outcome.run_dir) if op.f == "txn" and op.type != "invoke"]
    assert {"ok", "fail"} <= {op.type for op in ended}
    read = [op for op in ended if op.value["reads"]]
    assert read, "no transaction read a record"
    assert all(op.value["group_offsets"] for op in read if op.type == "ok")
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"verdict {results['valid']}: {results['stats']}, {len(read)} of {len(ended)} transactions read")
    assert results["stats"]["wr_edges"] > 0
    assert results["anomaly_counts"][PROCESSED_TWICE] == 0
    assert results["anomaly_counts"][G1C] == 0
    assert results["valid"] is True, (results["violations"], results["unknown"])
    assert "history.jsonl.zst" in validate_run_dir(outcome.run_dir)


def test_the_group_committed_the_positions_the_last_committed_transactions_sent(
        run: tuple[RunOutcome, _GroupReadingCluster]) -> None:
    """Each partition's committed offset is the highest position a committed transaction
    sent for it (each record is processed once, so a later commit sends a higher one);
    no transaction ended unknown to blur which committed."""
    outcome, cluster = run
    ended = [op for op in read_history(outcome.run_dir) if op.f == "txn" and op.type != "invoke"]
    assert all(op.type != "info" for op in ended), [op.error for op in ended if op.type == "info"]
    sent: dict[int, int] = {}
    for op in ended:
        if op.type == "ok":
            for partition, offset in op.value["group_offsets"]:
                sent[partition] = max(sent.get(partition, 0), offset)
    print(f"committed offsets {cluster.committed}, sent {sent}")
    assert sent and cluster.committed == sent
