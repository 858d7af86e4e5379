"""What cluster.json says of the broker-state collection (found by a review: a failed or
interrupted collection read as a run that never had broker state, and the check then
permitted on assumption what the state would have forbidden)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from faultline.brokerstate import collect
from faultline.errors import FaultlineError
from faultline.spec import TestSpec
from tests.schemas import validator

CLUSTER = validator("cluster.schema.json")


@dataclass
class Node:
    id: int
    data_dir: Path
    address: str = "127.0.0.1"
    log_dir: Path = Path("/nonexistent")

    def is_alive(self) -> bool:
        return True


@dataclass
class MetadataNode(Node):
    metadata_dir: Path = Path("/nonexistent")


@dataclass
class Cluster:
    nodes: list[Any] = field(default_factory=list)

    def active_controller(self) -> int | None:
        return None


def facts(run_dir: Path) -> dict[str, Any]:
    data = json.loads((run_dir / "cluster.json").read_text())
    CLUSTER.validate(data)
    return data


def test_a_failed_metadata_log_is_named_in_cluster_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(version: str, home: str | None) -> Any:
        raise FaultlineError("kafka-tools could not be fetched: offline")

    monkeypatch.setattr(collect.kafka_dist, "ensure_kafka", offline)
    nodes = [MetadataNode(n, tmp_path / f"n{n}", metadata_dir=tmp_path / f"m{n}") for n in (1, 2, 3)]
    errors = collect.collect_broker_state(Cluster(nodes), TestSpec(), tmp_path)  # type: ignore[arg-type]
    assert errors == ["metadata log: kafka-tools could not be fetched: offline"]
    assert facts(tmp_path)["broker_state_errors"] == errors


def test_a_backend_without_metadata_logs_is_no_error(tmp_path: Path) -> None:
    nodes = [Node(n, tmp_path / f"n{n}") for n in (1, 2, 3)]
    assert collect.collect_broker_state(Cluster(nodes), TestSpec(), tmp_path) == []  # type: ignore[arg-type]
    assert facts(tmp_path)["broker_state_errors"] == []
    assert not (tmp_path / "metadata.jsonl").exists()


def test_a_collection_that_dies_leaves_cluster_json_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(cluster: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(collect, "_metadata_node", interrupted)
    with pytest.raises(KeyboardInterrupt):
        collect.collect_broker_state(Cluster([]), TestSpec(), tmp_path)  # type: ignore[arg-type]
    assert facts(tmp_path)["broker_state_errors"] == ["the collection did not finish"]


def test_a_failed_first_write_of_cluster_json_is_no_broker_state_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: the first write only says the collection has begun; its failure
    made a run whose state was all collected unknown."""
    real, calls = collect._write_facts, []

    def flaky(run_dir: Path, data: dict[str, Any], errors: list[str]) -> None:
        calls.append(errors)
        if len(calls) == 1:
            raise OSError("ENOSPC, briefly")
        real(run_dir, data, errors)

    monkeypatch.setattr(collect, "_write_facts", flaky)
    nodes = [Node(n, tmp_path / f"n{n}") for n in (1, 2, 3)]
    assert collect.collect_broker_state(Cluster(nodes), TestSpec(), tmp_path) == []  # type: ignore[arg-type]
    assert facts(tmp_path)["broker_state_errors"] == []
