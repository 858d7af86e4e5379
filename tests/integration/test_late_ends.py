"""KAFKA-17754's shape on a real 3-node cluster with transaction protocol version 2 (issue
38): producer 0's commits and aborts held at its coordinator past its request timeout
(``delay ends``), so each lands after the Java client retried it on a new connection and
began its next transaction. Version 2 bumps the producer's epoch with every transaction,
so the held request is fenced: no transaction is lost, torn or read aborted, and the run is
valid with nothing permitted by the fault (version 2 permits nothing for it).

Each hold must have held a connection (an EndTxn seen in its window): the schedule waits
for producer 0's first commit, and the window (0.8 of the request timeout of 2 s: 1.6 s)
spans two of its transactions (3 sends 300 ms apart, about 0.7 s each). examples/txn-late-end.yaml
is the same on version 1, where the held end tears transactions (docs/design.md)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import (
    ConsumerSpec,
    KafkaSpec,
    NemesisSpec,
    ProducerSpec,
    TestSpec,
    TransactionSpec,
    WorkloadSpec,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOLD = "delay ends at coordinator of transaction faultline-it-late-ends-t0 by 3000 ms"
SPEC = TestSpec(
    name="it-late-ends", time_limit_s=40.0,
    kafka=KafkaSpec(heap_mb=384, transaction_version=2),
    producer=ProducerSpec(request_timeout_ms=2000, delivery_timeout_ms=20000),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1),
    transactions=TransactionSpec(sends=3, abort_probability=0.5, gap_ms=300),
    nemesis=NemesisSpec(schedule=("wait until client 0 has committed within 30 s",
                                  HOLD, "wait for 1 s", HOLD, "wait for 1 s", HOLD,
                                  "undelay", "wait until caught up within 30 s", "end")),
)
TORN = ("aborted-read", "precommitted-read", "torn-transaction", "lost-write")


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_each_hold_held_a_transaction_end_past_the_request_timeout(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    ops = list(read_history(outcome.run_dir))
    holds = [op for op in ops if op.f == "toxic" and "result" in op.value]
    print([h.value["held"] for h in holds])
    assert len(holds) == 3
    for hold in holds:
        assert hold.value["kind"] == "late-end" and hold.value["hold_ms"] == 3000
        assert hold.value["window_ms"] == 1600  # 0.8 of the request timeout
        assert sum(c["connections"] for c in hold.value["held"].values()) >= 1
    [undelay] = [op for op in ops if op.f == "clear-toxics" and "result" in op.value]
    # the undelay waits until the last hold's requests have landed: twice its 3 s, and 2 s more
    [last] = [op for op in ops if op.f == "toxic" and "result" not in op.value][-1:]
    assert undelay.time - last.time >= 8_000_000_000


def test_version_2_fences_every_held_end(outcome: RunOutcome) -> None:
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"{outcome.run_dir}: verdict {results['valid']}, {results['anomaly_counts']}, "
          f"{results['stats']['txn']}")
    assert results["transaction_protocol"] == 2
    assert {a: results["anomaly_counts"][a] for a in TORN} == dict.fromkeys(TORN, 0)
    assert results["valid"] is True, (results["violations"], results["unknown"])
