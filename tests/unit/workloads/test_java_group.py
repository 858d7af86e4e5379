"""The settings the Java client's group members are started with: the librdkafka members'
group, protocol, session timeouts, commit interval and settling, and the commit errors
that mean the coordinator refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faultline.history import HistoryWriter
from faultline.spec import ConsumerSpec, TestSpec, WorkloadSpec
from faultline.workloads.group import REFUSED as RDKAFKA_REFUSED
from faultline.workloads.java_group import JavaGroupWorkload


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
