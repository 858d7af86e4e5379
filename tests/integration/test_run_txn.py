"""The txn workload on a real 3-node cluster, once per transaction version: transactional
producers commit and abort while the leader of partition 0 is killed and restarted, a
read_committed consumer reads, the drain reads everything back, and the txn checker
judges it. The cluster is formatted with the transaction version asked, and cluster.json
says so; librdkafka speaks transaction protocol version 1 on either, and a kill (which
drops, not delays, what the broker had not read) permits no transaction anomaly there."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console

from faultline.checkers.txn_log import final_stable_offsets, partition_logs
from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.rundir import GROUP_FILE, PLAIN_HISTORY_FILE
from faultline.spec import (
    ConsumerSpec,
    KafkaSpec,
    NemesisSpec,
    TestSpec,
    TransactionSpec,
    WorkloadSpec,
)
from tests.schemas import RUN_FILES, validate_run_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPEC = TestSpec(
    name="it-txn", time_limit_s=16.0,
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=4000, broker_session_timeout_ms=6000),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", producers=2, consumers=1),
    transactions=TransactionSpec(sends=4, abort_probability=0.3),
    nemesis=NemesisSpec(schedule=("wait for 3 s", "crash leader of 0 as old",
                                  "wait until 0 has a new leader within 20 s", "wait for 2 s",
                                  "restart old", "wait until caught up within 30 s")),
)


@pytest.fixture(scope="module", params=[1, 2], ids=["transaction.version=1", "transaction.version=2"])
def outcome(request: pytest.FixtureRequest, local_backend: None,
            tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_at_version(SPEC, request.param, tmp_path_factory)


def run_at_version(spec: TestSpec, version: int, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    """``spec`` run on a cluster formatted with ``transaction.version`` ``version``."""
    spec = dataclasses.replace(spec, kafka=dataclasses.replace(spec.kafka, transaction_version=version))
    return run_test(spec, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_the_cluster_ran_the_transaction_version_asked(outcome: RunOutcome) -> None:
    assert outcome.error is None
    asked = json.loads((outcome.run_dir / "test.json").read_text())["kafka"]["transaction_version"]
    cluster = json.loads((outcome.run_dir / "cluster.json").read_text())
    assert cluster["transaction_version"] == asked
    assert cluster["broker_state_errors"] == []


def test_transactions_commit_and_abort_through_a_leader_kill(outcome: RunOutcome) -> None:
    ops = list(read_history(outcome.run_dir))
    assert any(op.f == "kill" and "result" in op.value for op in ops), "the leader was killed"
    ended = [op for op in ops if op.f == "txn" and op.type != "invoke"]
    counts = {t: sum(op.type == t for op in ended) for t in ("ok", "fail", "info")}
    print(f"transactions: {counts['ok']} committed, {counts['fail']} aborted, {counts['info']} unknown")
    assert {"ok", "fail"} <= {op.type for op in ended}
    assert all("offset" in s for op in ended if op.type == "ok" for s in op.value["sends"])
    assert all(op.value["committing"] < op.time for op in ended if op.type == "ok"), \
        "a commit acknowledged says when it was asked for"
    assert outcome.recovered
    assert all(d.complete for d in outcome.drains), outcome.drains


def test_the_run_directory_validates(outcome: RunOutcome) -> None:
    expected = [n for n in RUN_FILES if n not in (PLAIN_HISTORY_FILE, GROUP_FILE)]
    assert validate_run_dir(outcome.run_dir) == expected


def test_the_transactions_held(outcome: RunOutcome) -> None:
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"verdict {results['valid']}: {results['anomaly_counts']}")
    assert results["transaction_protocol"] == 1  # librdkafka: no KIP-890 part 2
    assert results["stats"]["records_polled"] > 0
    assert results["valid"] is True, (results["violations"], results["unknown"])
    assert outcome.valid is True


def test_the_replicas_logs_end_each_transaction_as_its_outcome_says(outcome: RunOutcome) -> None:
    """replicas.jsonl's batch kinds: each committed transaction's records lie in transaction
    batches its producer's commit marker ends, each aborted one's in batches an abort marker
    ends (read from the longest replica of each partition), and no transaction is left open
    after the heal: every partition's last stable offset is its log end."""
    replicas = [json.loads(x) for x in (outcome.run_dir / "replicas.jsonl").read_text().splitlines()]
    logs = partition_logs(replicas, SPEC.topic.name, SPEC.topic.replication_factor)
    assert sorted(logs) == list(range(SPEC.topic.partitions))
    kinds = {b[8] for r in replicas for b in r["batches"]}
    assert {"txn", "commit", "abort"} <= kinds, kinds
    ended = {"ok": "commit", "fail": "abort"}
    seen = {"ok": 0, "fail": 0}
    for op in read_history(outcome.run_dir):
        if op.f == "txn" and op.type in ended:
            for s in op.value["sends"]:
                if s.get("offset") is not None:
                    assert logs[s["partition"]].marker_at(s["offset"]) == ended[op.type], (op, s)
                    seen[op.type] += 1
    print(f"records checked against the log's markers: {seen}")
    assert seen["ok"] > 0
    assert all(log.last_stable_offset == log.end and not log.open for log in logs.values()), logs
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert "open-transaction" not in {u["kind"] for u in results["unknown"]}


def test_the_brokers_last_stable_offset_ends_at_the_high_watermark(outcome: RunOutcome) -> None:
    """observations.jsonl holds the LSO the brokers answered (ListOffsets, read_committed)
    beside the HW; at the end, with no transaction left open, the two meet on every
    partition, and the txn checker found the log agreeing."""
    lines = [json.loads(x) for x in (outcome.run_dir / "observations.jsonl").read_text().splitlines()]
    assert lines and all("lso" in line for line in lines)
    stable = final_stable_offsets(lines, SPEC.topic.name)
    assert sorted(stable) == list(range(SPEC.topic.partitions)), "the last round answered"
    assert all(lso == hw for lso, hw in stable.values()), stable
    answered = [line for line in lines if line["lso"] is not None and line["hw"] is not None]
    print(f"rounds with a transaction open (LSO below HW): "
          f"{sum(line['lso'] < line['hw'] for line in answered)} of {len(answered)} lines")
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert "lso-disagrees" not in {u["kind"] for u in results["unknown"]}
