"""The settings the Java client's group members are started with: the librdkafka members'
group, protocol, session timeouts, static ids, commit interval and settling, the commit
errors that mean the coordinator refused, and the poll errors that mean fenced for good."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from faultline.checkers.group_history import FATAL
from faultline.history import HistoryWriter
from faultline.spec import ConsumerSpec, TestSpec, WorkloadSpec
from faultline.workloads.group import REFUSED as RDKAFKA_REFUSED
from faultline.workloads.java_group import REFUSED, JavaGroupWorkload


def settings(tmp_path: Path, protocol: str, commit: str) -> dict[str, str]:
    spec = TestSpec(name="g", workload=WorkloadSpec(name="group", client="java"),
                    consumer=replace(ConsumerSpec(), mode="subscribe", group_protocol=protocol,  # type: ignore[arg-type]
                                     commit=commit))  # type: ignore[arg-type]
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        args = JavaGroupWorkload(spec, "localhost:9092", history)._args()
    return dict(a.split("=", 1) for a in args)


@pytest.mark.parametrize("commit", ["sync", "async"])
def test_classic_members_get_the_librdkafka_members_session_and_commit_settings(
        tmp_path: Path, commit: str) -> None:
    s = settings(tmp_path, "classic", commit)
    assert s["workload"] == "group" and s["commit"] == commit and s["topic"] == "fl-queue"
    assert s["consumer.group.id"] == "faultline-g" and s["consumer.group.protocol"] == "classic"
    assert s["consumer.session.timeout.ms"] == "6000" and s["consumer.heartbeat.interval.ms"] == "1000"
    assert s["commit_interval_ms"] == "1000" and s["settle_ms"] == "15000"
    assert set(s["refused"].split(",")) == RDKAFKA_REFUSED | {"_CommitFailedException"}


def test_kip_848_members_leave_the_session_to_the_broker(tmp_path: Path) -> None:
    s = settings(tmp_path, "consumer", "sync")
    assert s["consumer.group.protocol"] == "consumer"
    assert {k for k in s if k.startswith("consumer.")} == {"consumer.group.id", "consumer.group.protocol"}


def test_static_members_get_their_slots_instance_ids_and_a_fenced_ones_poll_reads_fenced_for_good(
        tmp_path: Path) -> None:
    """The group checker reads a member fenced for good by librdkafka's fatal error name
    (:data:`~faultline.checkers.group_history.FATAL`); a commit refused so stays refused."""
    spec = TestSpec(name="g", workload=WorkloadSpec(name="group", client="java", consumers=3),
                    consumer=replace(ConsumerSpec(), mode="subscribe", static=True))
    assert "instance_ids" not in settings(tmp_path, "classic", "sync")
    with HistoryWriter(tmp_path / "static.jsonl") as history:
        w = JavaGroupWorkload(spec, "localhost:9092", history)
        s = dict(a.split("=", 1) for a in w._args())
        ns, program = time.monotonic_ns(), w._programs[0]
        poll = w._op({"process": 3, "type": "info", "f": "poll", "value": None,
                      "error": "FENCED_INSTANCE_ID", "ns": ns}, ns, program)
        commit = w._op({"process": 4, "type": "fail", "f": "commit", "value": {"offsets": []},
                        "error": "FENCED_INSTANCE_ID", "ns": ns}, ns, program)
    assert s["instance_ids"].split(",") == [spec.instance_id(slot) for slot in range(3)]
    assert poll is not None and poll[1][4] == FATAL
    assert commit is not None and commit[1][4] == "FENCED_INSTANCE_ID" in REFUSED
