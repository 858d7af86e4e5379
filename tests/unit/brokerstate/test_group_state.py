"""group.json as the collector writes it (faultline/brokerstate/group_state.py): the group's
committed offsets with their leader epochs, its __consumer_offsets partition's replicas, and
a part that could not be read null with its reason, never an exception."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from faultline.brokerstate import group_state
from faultline.cluster.kafka_client import Committed
from faultline.spec import TestSpec
from faultline.targeted import coordinator_partition
from tests.schemas import validator
from tests.unit.brokerstate.fakes import batch, segment

SPEC = TestSpec(name="g")


@dataclass
class Node:
    id: int
    data_dir: Path


@dataclass
class Cluster:
    nodes: list[Node] = field(default_factory=list)

    def bootstrap_servers(self) -> str:
        return "127.0.0.1:1"


def cluster(tmp: Path, partitions: int = 5) -> Cluster:
    nodes = [Node(n, tmp / f"n{n}") for n in (1, 2)]
    for n in nodes:
        for p in range(partitions):
            (n.data_dir / f"__consumer_offsets-{p}").mkdir(parents=True)
        (n.data_dir / "fl-queue-0").mkdir(parents=True)
    return Cluster(nodes)


class InProcessAdmin(contextlib.nullcontext["InProcessAdmin"]):
    """An AdminChild that asks in this process, with no client: the monkeypatched
    functions answer."""

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        super().__init__(self)

    def call(self, fn: Any, *args: Any) -> Any:
        return fn(None, *args)


def collected(tmp: Path, c: Cluster, answer: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    def positions(admin: Any, group: str, timeout: float) -> dict[tuple[str, int], Committed]:
        assert group == "faultline-g"
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    monkeypatch.setattr(group_state, "AdminChild", InProcessAdmin)
    monkeypatch.setattr(group_state.kafka_client, "committed_positions", positions)
    group_state.collect_group_state(c, SPEC, tmp)  # type: ignore[arg-type]
    data: dict[str, Any] = json.loads((tmp / "group.json").read_text())
    validator("group.schema.json").validate(data)
    return data


def test_the_offsets_and_the_offsets_partitions_replicas_are_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = {("fl-queue", 1): Committed(7, None), ("fl-queue", 0): Committed(9, 2)}
    c = cluster(tmp_path / "c")
    p = coordinator_partition("faultline-g", 5)
    segment(c.nodes[0].data_dir / f"__consumer_offsets-{p}", 0, batch(0, 2))  # a replica with a batch
    data = collected(tmp_path, c, answer, monkeypatch)
    assert data["offsets"] == [{"topic": "fl-queue", "partition": 0, "offset": 9, "leader_epoch": 2},
                               {"topic": "fl-queue", "partition": 1, "offset": 7, "leader_epoch": None}]
    assert data["offsets_topic_partition"] == p and data["errors"] == []
    assert [(r["node"], r["partition"], r["log_end_offset"]) for r in data["offsets_replicas"]] == [
        (1, p, 2), (2, p, None)]
    assert data["offsets_replicas"][0]["batches"][0][8] == "data"


def test_no_coordinator_and_no_offsets_topic_are_named_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))
    data = collected(tmp_path, cluster(tmp_path / "c", partitions=0), down, monkeypatch)
    assert data["offsets"] is None and data["offsets_replicas"] is None
    first, second = data["errors"]
    assert first.startswith("committed offsets: no answer from the coordinator of faultline-g")
    assert second == "offsets replicas: no node holds a __consumer_offsets partition"
