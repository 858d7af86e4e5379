"""Faults that target transactions, on a real 3-node cluster (issue 38), in one run.

The KAFKA-17754 shape: the txn workload's
producers (librdkafka, transaction protocol version 1) run transactions that each write
partition 0 while a ``delay`` holds every request to its leader in the leader's proxy
for longer than a send may take, so a produce request can land after the producer gave
up on it and its transaction ended. Whatever Kafka does, the txn checker must say so
honestly: an anomaly a late write makes is permitted only as version 1 under a delaying
fault (the toxics family), and the run is valid; and the delay must show in the
history: no transaction begun and ended under it commits, each waits until its send to
partition 0 times out.
(What Kafka did here: librdkafka bumps its epoch after a send timed out in a transaction,
KIP-360, which fences the late write; no anomaly but concurrent write cycles.)

A transactional producer crashed mid-transaction (SIGKILL, while its transaction waits on
the delayed send, so one is surely open) and restarted: the crash ends the transaction
``info``, the replacement keeps the ``transactional.id`` (the log shows the same producer
id, its epoch bumped) and fences the open transaction, which no reader reads unless the
log committed it; no aborted read."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from faultline.checkers.guarantees import CONCURRENT_WRITE_CYCLE, TXN_ANOMALIES
from faultline.checkers.txn_log import partition_logs
from faultline.history import Op, read_history
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
from faultline.workloads.outcomes import CRASH_ERROR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DELAY_MS = 3000
SPEC = TestSpec(
    name="it-txn-faults", time_limit_s=14.0,
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=4000, broker_session_timeout_ms=6000),
    producer=ProducerSpec(request_timeout_ms=1000, delivery_timeout_ms=2000),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    workload=WorkloadSpec(name="txn", producers=2, consumers=1),
    transactions=TransactionSpec(sends=3, abort_probability=0.2),
    nemesis=NemesisSpec(schedule=("wait for 2 s", f"delay leader of 0 by {DELAY_MS} ms", "wait for 6 s",
                                  "crash client 0", "undelay", "wait for 1 s", "restart client 0",
                                  "wait until caught up within 20 s")),
)


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_the_delay_held_partition_0_s_requests_until_it_was_lifted(outcome: RunOutcome) -> None:
    assert outcome.error is None
    ops = list(read_history(outcome.run_dir))
    [toxic] = [op for op in ops if op.f == "toxic" and "result" in op.value]
    undelay, _ = [op for op in ops if op.f == "clear-toxics"]
    assert toxic.value["nodes"] == toxic.value["targets"] == [toxic.value["leaders"][f"{SPEC.topic.name}/0"]]
    assert toxic.value["toxic"]["attributes"]["latency"] == DELAY_MS
    held = [(invoke, done) for invoke, done in transactions(ops)
            if invoke.time > toxic.time and done.time < undelay.time and done.error != CRASH_ERROR]
    print(f"transactions begun and ended under the delay: {[(d.type, d.error) for _, d in held]}")
    assert held and all(0 in {s["partition"] for s in done.value["sends"]} for _, done in held)
    assert not [done for _, done in held if done.type == "ok"], "nothing reaches partition 0 while delayed"
    # each waited for its send to partition 0 until the send timed out
    assert all(done.time - invoke.time >= SPEC.producer.delivery_timeout_ms * 1_000_000
               for invoke, done in held)


def test_the_txn_checker_permits_a_late_write_only_as_version_1_under_the_delay(outcome: RunOutcome) -> None:
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"verdict {results['valid']}: {results['anomaly_counts']}")
    assert results["transaction_protocol"] == 1
    assert "toxics" in results["faults_seen"]
    late = results["permitted_reasons"]["aborted-read"]
    assert "version 1 and toxics" in late and "KAFKA-17754" in late
    for name in TXN_ANOMALIES:
        for instance in results["anomalies"].get(name, []):
            assert instance["permitted"], instance
            assert instance["reason"] in (late, CONCURRENT_WRITE_CYCLE), instance
    assert results["valid"] is True, (results["violations"], results["unknown"])
    assert outcome.valid is True


def test_a_crashed_transaction_ends_info_and_its_replacement_fences_it_under_the_same_id(
        outcome: RunOutcome) -> None:
    ops = list(read_history(outcome.run_dir))
    [crash] = [op for op in ops if op.f == "crash-client" and "result" in op.value]
    [restart] = [op for op in ops if op.f == "restart-client" and "result" in op.value]
    assert crash.value["clients"] == [0] and crash.value["sends"] == 1, "its transaction was open"
    ended = transactions(ops)
    [(_, crashed)] = [(i, d) for i, d in ended if d.error == CRASH_ERROR]
    assert crashed.type == "info" and crashed.process in crash.value["processes"]
    assert crashed.value["abort"] or "committing" in crashed.value
    [new] = restart.value["processes"]
    assert any(d.process == new and d.type == "ok" for _, d in ended), "the replacement commits"

    replicas = [json.loads(x) for x in (outcome.run_dir / "replicas.jsonl").read_text().splitlines()]
    logs = partition_logs(replicas, SPEC.topic.name, SPEC.topic.replication_factor)
    values = {s["value"] for s in crashed.value["sends"]}
    read = [(r[1], r[2]) for op in ops if op.f == "poll" and op.type == "ok"
            for r in op.value["records"] if r[3] in values]
    read += [(op.value["partition"], r[0]) for op in ops if op.f == "drain" and op.type == "ok"
             for r in op.value["records"] if r[1] in values]
    print(f"the crashed transaction: abort={crashed.value['abort']}, its records read at {read}")
    assert all(logs[p].marker_at(offset) == "commit" for p, offset in read), "read only if committed"

    def producer(process: int | str) -> tuple[int, int]:
        """The producer id and epoch of the batch of ``process``'s first record written (its
        delivery report gave the offset: committed or aborted)."""
        send = next(s for _, d in ended if d.process == process for s in d.value["sends"] if "offset" in s)
        batches = next(r for r in replicas if r["partition"] == send["partition"]
                       and r["node"] == logs[send["partition"]].node)["batches"]
        batch = next(b for b in batches if b[0] <= send["offset"] <= b[1])
        return batch[4], batch[5]

    (before, epoch), (after, bumped) = producer(crash.value["processes"][0]), producer(new)
    assert before == after and bumped > epoch, "the same transactional.id: its producer id, a later epoch"


def test_no_aborted_read_and_the_run_is_valid(outcome: RunOutcome) -> None:
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["anomaly_counts"]["aborted-read"] == 0
    assert results["stats"]["txn"]["info"] >= 1
    assert results["valid"] is True, (results["violations"], results["unknown"])


def transactions(ops: list[Op]) -> list[tuple[Op, Op]]:
    """Each transaction's invoke and completion."""
    open_: dict[int | str, Op] = {}
    out = []
    for op in ops:
        if op.f == "txn":
            if op.type == "invoke":
                open_[op.process] = op
            else:
                out.append((open_.pop(op.process), op))
    return out
