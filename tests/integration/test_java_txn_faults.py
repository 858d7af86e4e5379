"""The Java client's transactional producers paused and crashed, on a real 3-node cluster
with transaction protocol version 2 (issues 37 and 38), in one run.

The KAFKA-17754 paused-client shape: producer 0's JVM is stopped (SIGSTOP) for longer
than its ``transaction.timeout.ms``, with its transaction open, so the coordinator aborts
that transaction (the brokers look for timed-out ones every second here) and bumps the
producer's epoch; once the JVM continues, what it still had in flight for that
transaction (a produce, a commit) must be fenced, and the txn checker must find the
transactions held. The pause must show in the history: producer 0 ends no transaction
while stopped. Then producer 1's JVM is killed (SIGKILL) and restarted: its open
transaction ends ``info`` with the crash's error and the replacement, under the same
``transactional.id``, commits. The schedule waits for both producers' commits after their
faults and then ends the main phase (``end``): a JVM's start takes what the machine's
load makes it, and the run waits for it rather than guessing."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import ConsumerSpec, KafkaSpec, NemesisSpec, TestSpec, TransactionSpec, WorkloadSpec
from faultline.workloads.outcomes import CRASH_ERROR
from faultline.workloads.txn import transaction_timeout_ms
from tests.integration.test_txn_faults import transactions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PAUSE_S = 13  # past the transaction timeout (10 s) and the coordinator's next look (1 s)
SPEC = TestSpec(
    # the schedule ends the main phase once both producers committed after their faults
    # (producer 1's replacement JVM starts in 2 s idle, up to 18 s loaded): the time limit
    # only bounds it
    name="it-java-txn-faults", time_limit_s=PAUSE_S + 60.0,
    kafka=KafkaSpec(heap_mb=384, transaction_version=2,
                    broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}),
    consumer=ConsumerSpec(isolation_level="read_committed"),
    # no rate limit: a producer is always inside a transaction, where the pause lands
    workload=WorkloadSpec(name="txn", client="java", producers=2, consumers=1, rate=0),
    transactions=TransactionSpec(sends=4, abort_probability=0.2),
    nemesis=NemesisSpec(schedule=("wait for 1 s", f"pause client 0 for {PAUSE_S} s", "crash client 1",
                                  "wait for 1 s", "restart client 1",
                                  "wait until client 1 has committed within 40 s",
                                  "wait until client 0 has committed within 20 s",
                                  "wait until caught up within 20 s", "end")),
)


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_the_transactions_held_through_the_pause_on_protocol_version_2(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    results = json.loads((outcome.run_dir / "results.json").read_text())
    print(f"{outcome.run_dir}: verdict {results['valid']}, {results['anomaly_counts']}, "
          f"{results['stats']['txn']}")
    assert results["transaction_protocol"] == 2
    assert results["anomaly_counts"]["aborted-read"] == 0
    assert results["valid"] is True, (results["violations"], results["unknown"])


def test_the_paused_producer_ended_no_transaction_while_stopped(outcome: RunOutcome) -> None:
    ops = list(read_history(outcome.run_dir))
    [pause] = [op for op in ops if op.f == "pause-client" and "result" in op.value]
    [resume] = [op for op in ops if op.f == "resume-client" and "result" in op.value]
    assert pause.value["clients"] == [0]
    assert resume.time - pause.time >= PAUSE_S * 1_000_000_000 > transaction_timeout_ms(SPEC) * 1_000_000
    mine = [(i, d) for i, d in transactions(ops) if d.process in pause.value["processes"]]
    assert not [d for _, d in mine if pause.time < d.time < resume.time], "a stopped JVM ends nothing"
    [(invoke, done)] = [(i, d) for i, d in mine if i.time < pause.time and d.time > resume.time]
    print(f"the transaction open across the pause: abort={invoke.value['abort']}, "
          f"ended {done.type} {done.error}, {len(mine)} transactions of producer 0")
    assert any(i.time > resume.time and d.type == "ok" for i, d in mine), "producer 0 commits after"


def test_a_crashed_transaction_ends_info_and_the_replacement_commits(outcome: RunOutcome) -> None:
    ops = list(read_history(outcome.run_dir))
    [crash] = [op for op in ops if op.f == "crash-client" and "result" in op.value]
    [restart] = [op for op in ops if op.f == "restart-client" and "result" in op.value]
    assert crash.value["clients"] == [1]
    ended = transactions(ops)
    crashed = [d for _, d in ended if d.error == CRASH_ERROR]
    assert [d.process in crash.value["processes"] and d.type for d in crashed] == ["info"]
    assert crashed[0].value["abort"] or "committing" in crashed[0].value
    [new] = restart.value["processes"]
    assert any(d.process == new and d.type == "ok" for _, d in ended), "the replacement commits"

