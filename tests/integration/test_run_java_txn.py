"""The txn workload with the Java client on a real 3-node cluster, once per transaction
version: kafka-clients speaks transaction protocol version 2 (KIP-890) on a cluster
formatted with ``transaction.version`` 2 and version 1 on one with 1, and results.json and
the report say which; either way its producers commit and abort, a read_committed consumer
reads the committed transactions and none of the aborted, and the txn checker finds the
transactions held. The brokers' logs show the version: with version 2 each transaction's
marker carries an epoch of its own (the coordinator bumps the producer's epoch as it ends
each one), with version 1 every marker of a producer id one epoch."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from faultline.history import read_history
from faultline.report.page import config_line
from faultline.run.runner import RunOutcome
from faultline.rundir import GROUP_FILE, PLAIN_HISTORY_FILE
from faultline.spec import ConsumerSpec, KafkaSpec, TestSpec, TransactionSpec, WorkloadSpec
from tests.integration.test_run_txn import run_at_version
from tests.schemas import RUN_FILES, validate_run_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SPEC = TestSpec(
    name="it-java-txn", time_limit_s=8.0, kafka=KafkaSpec(heap_mb=384),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1, rate=200),
    # seed 0 draws an abort as the third transaction of producer 0 and the second of producer
    # 1, each after a commit: a run that ends a few has both
    transactions=TransactionSpec(sends=4, abort_probability=0.3),
)


@pytest.fixture(scope="module", params=[1, 2], ids=["transaction.version=1", "transaction.version=2"])
def outcome(request: pytest.FixtureRequest, local_backend: None,
            tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_at_version(SPEC, request.param, tmp_path_factory)


def test_the_java_clients_transactions_held(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    assert all(d.complete for d in outcome.drains), outcome.drains
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"verdict {results['valid']}: {results['stats']['txn']}")
    assert results["valid"] is True, (results["violations"], results["unknown"])
    assert results["anomaly_counts"]["aborted-read"] == 0
    ops = list(read_history(outcome.run_dir))
    ended = [op for op in ops if op.f == "txn" and op.type != "invoke"]
    assert {"ok", "fail"} <= {op.type for op in ended}
    assert all("offset" in s for op in ended if op.type == "ok" for s in op.value["sends"])
    assert all(op.value["committing"] < op.time for op in ended if op.type == "ok")
    polled = {r[3] for op in ops if op.f == "poll" and op.type == "ok" for r in op.value["records"]}
    committed = {s["value"] for op in ended if op.type == "ok" for s in op.value["sends"]}
    aborted = {s["value"] for op in ended if op.type == "fail" for s in op.value["sends"]}
    assert polled & committed, "the read_committed consumer read committed transactions"
    assert not polled & aborted, "nor any aborted one's"
    expected = [n for n in RUN_FILES if n not in (PLAIN_HISTORY_FILE, GROUP_FILE)]
    assert validate_run_dir(outcome.run_dir) == expected


def test_the_transactions_used_the_clusters_transaction_version(outcome: RunOutcome) -> None:
    spec = TestSpec.from_mapping(json.loads((outcome.run_dir / "test.json").read_text()))
    version = spec.kafka.transaction_version
    assert json.loads((outcome.run_dir / "cluster.json").read_text())["transaction_version"] == version
    assert json.loads((outcome.run_dir / "results.json").read_text())["transaction_protocol"] == version
    assert f"java client, transaction protocol {version}" in config_line(spec)
    epochs: dict[int, set[int]] = defaultdict(set)  # producer id -> epochs of its markers
    for line in (outcome.run_dir / "replicas.jsonl").read_text().splitlines():
        for _, _, _, _, producer, epoch, _, _, kind in json.loads(line)["batches"]:
            if kind in ("commit", "abort"):
                epochs[producer].add(epoch)
    per_producer = sorted(len(e) for e in epochs.values())
    ended = sum(op.f == "txn" and op.type in ("ok", "fail") for op in read_history(outcome.run_dir))
    print(f"epochs of the transaction markers, per producer id: {per_producer}, of {ended} transactions")
    assert len(per_producer) == SPEC.workload.producers
    if version == 2:
        assert sum(per_producer) == ended, "each transaction ended under an epoch of its own (KIP-890)"
    else:
        assert per_producer == [1, 1], "every transaction of a producer under its one epoch"
