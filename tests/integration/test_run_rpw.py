"""Read-process-write on a real 3-node cluster: two transactional producers, each a
processor that reads up to 5 records per transaction in one group (read_committed) and
sends the positions after them to the transaction, commit and abort with no fault; the
txn checker finds transactions that read others' writes (write-read edges), no record
processed by two committed transactions and no G1c cycle."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from faultline.checkers.guarantees import G1C, PROCESSED_TWICE
from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, TestSpec, TransactionSpec, WorkloadSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPEC = TestSpec(
    name="it-rpw", time_limit_s=10.0,
    kafka=KafkaSpec(heap_mb=384),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", producers=2, consumers=1),
    transactions=TransactionSpec(sends=4, abort_probability=0.3, reads=5),
)


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_transactions_read_what_others_wrote_and_process_each_record_once(outcome: RunOutcome) -> None:
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

