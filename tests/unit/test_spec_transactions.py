"""The spec's transaction settings: the cluster's transaction version and the txn workload's."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.errors import SpecError
from faultline.spec import TestSpec


def spec(**sections: Any) -> TestSpec:
    return TestSpec.from_mapping({"workload": {"name": "txn"}, **sections})


def test_a_txn_spec_reads_and_writes_its_transaction_settings() -> None:
    s = spec(kafka={"transaction_version": 2},
             transactions={"sends": 3, "abort_probability": 0.5, "gap_ms": 200})
    x = s.transactions
    assert (s.kafka.transaction_version, x.sends, x.abort_probability, x.gap_ms) == (2, 3, 0.5, 200)
    assert TestSpec.from_mapping(s.to_json()) == s


@pytest.mark.parametrize(("sections", "message"), [
    ({"kafka": {"transaction_version": 3}}, "kafka.transaction_version must be 1 or 2"),
    ({"kafka": {"transaction_version": 2, "version": "3.9.1"}},
     "kafka.transaction_version needs Kafka 4.0 or later"),
    ({"kafka": {"transaction_version": 1, "version": "3.9.1"}},
     "kafka.transaction_version needs Kafka 4.0 or later"),
    ({"transactions": {"sends": 0}}, "transactions.sends must be between 1"),
    ({"transactions": {"abort_probability": 1.5}}, "transactions.abort_probability must be between 0 and 1"),
    ({"transactions": {"gap_ms": -1}}, "transactions.gap_ms must be 0 or more"),
    ({"transactions": {"sends": 4, "gap_ms": 1_700}}, "its 3 gaps a transaction at most 5000 ms together"),
    ({"producer": {"acks": "1"}}, "the txn workload's transactional producers need idempotence"),
])
def test_a_transaction_setting_that_cannot_run_is_refused_in_one_line(
        sections: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        spec(**sections)
    assert "\n" not in str(info.value)


def test_the_transaction_version_may_be_left_to_the_kafka_version() -> None:
    assert spec(kafka={"version": "3.9.1"}).kafka.transaction_version is None


def test_the_txn_workload_runs_either_client() -> None:
    assert spec(workload={"name": "txn", "client": "java"}).workload.client == "java"


def test_read_process_write_is_off_unless_asked_and_runs_with_either_client() -> None:
    assert spec().transactions.reads == 0
    assert spec(transactions={"reads": 5}).transactions.reads == 5
    assert spec(workload={"name": "txn", "client": "java"}, transactions={"reads": 5}).transactions.reads == 5
    with pytest.raises(SpecError, match=r"transactions\.reads must be 0"):
        spec(transactions={"reads": -1})


def test_read_process_write_is_refused_with_client_crashes() -> None:
    """Found by review: a crashed transaction's completion is the run's, without the reads
    its child made, so a record it processed twice would pass unseen."""
    assert spec(workload={"name": "txn"}, nemesis={"faults": ["clients"]}).nemesis.crashes_clients
    with pytest.raises(SpecError, match="cannot run with client crashes"):
        spec(workload={"name": "txn"}, transactions={"reads": 5}, nemesis={"faults": ["clients"]})
    with pytest.raises(SpecError, match="cannot run with client crashes"):
        spec(workload={"name": "txn"}, transactions={"reads": 5},
             nemesis={"schedule": ["wait for 1 s", "crash client 0"]})


@pytest.mark.parametrize("step", ["crash client 0", "pause client 0 for 1 s"])
def test_read_process_write_with_the_java_client_is_refused_with_client_crashes_and_pauses(step: str) -> None:
    with pytest.raises(SpecError, match="cannot run with client crashes") as info:
        spec(workload={"name": "txn", "client": "java"}, transactions={"reads": 5},
             nemesis={"schedule": ["wait for 1 s", step]})
    assert "\n" not in str(info.value)
