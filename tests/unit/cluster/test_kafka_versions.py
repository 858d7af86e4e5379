"""What differs between Kafka versions: where DumpLogSegments lives (decided by the jars,
not the version number), and what cluster.json says the cluster had."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from faultline.brokerstate.collect import cluster_facts
from faultline.cluster import kafka_dist
from faultline.cluster.kafka_dist import KafkaDist
from tests.schemas import validator


def dist(tmp_path: Path, version: str, classes: list[str]) -> KafkaDist:
    libs = tmp_path / f"kafka-{version}" / "libs"
    libs.mkdir(parents=True)
    with zipfile.ZipFile(libs / f"kafka_2.13-{version}.jar", "w") as z:
        for c in classes:
            z.writestr(c, b"")
    return KafkaDist(version, libs, Path("/usr/bin/java"))


@pytest.mark.parametrize("version", ["3.7.2", "3.9.1", "4.0.1", "4.2.0"])
def test_dump_log_segments_comes_from_the_server_jar_where_it_is_there(tmp_path: Path, version: str) -> None:
    """Kafka 3.x to 4.2 (the jars of 3.7.2, 3.8.1, 3.9.1 and 4.0.1 resolved from Maven
    Central have it there; KAFKA-14579 moved it out in 4.3)."""
    d = dist(tmp_path, version, ["kafka/Kafka.class", "kafka/tools/DumpLogSegments.class"])
    assert kafka_dist.dump_log_segments(d) == (d.classpath, "kafka.tools.DumpLogSegments")


def test_else_from_the_kafka_tools_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = dist(tmp_path, "4.3.1", ["kafka/Kafka.class", "kafka/tools/StorageTool.class"])
    monkeypatch.setattr(kafka_dist, "tools_classpath", lambda dist, report: f"{dist.classpath}:tools.jar")
    assert kafka_dist.dump_log_segments(d) == (f"{d.classpath}:tools.jar",
                                               "org.apache.kafka.tools.DumpLogSegments")


def test_an_unreadable_server_jar_is_a_setup_error(tmp_path: Path) -> None:
    d = dist(tmp_path, "3.8.1", [])
    (d.libs / "kafka_2.13-3.8.1.jar").write_bytes(b"not a zip")
    with pytest.raises(kafka_dist.SetupError, match="cannot read the Kafka server jar"):
        kafka_dist.dump_log_segments(d)


def feature(name: str, level: int) -> dict[str, object]:
    return {"offset": 1, "time": 0, "type": "feature-level", "raw": {"name": name, "featureLevel": level}}


@pytest.mark.parametrize(("lines", "features", "elr"), [
    ([feature("metadata.version", 21)], {"metadata.version": 21}, False),  # 3.9.1, as decoded
    ([feature("metadata.version", 27), feature("eligible.leader.replicas.version", 1)],
     {"metadata.version": 27, "eligible.leader.replicas.version": 1}, True),
    ([feature("eligible.leader.replicas.version", 1), feature("eligible.leader.replicas.version", 0)],
     {"eligible.leader.replicas.version": 0}, False),  # downgraded: the last record wins
    ([{"offset": 0, "time": 0, "type": "topic", "raw": {"name": "t"}}], {}, None),
    ([], {}, None),
])
def test_cluster_json_says_whether_the_cluster_had_eligible_leader_replicas(
        lines: list[dict[str, object]], features: dict[str, int], elr: bool | None) -> None:
    facts = cluster_facts("4.3.1", "org.apache.kafka.tools.DumpLogSegments", lines)
    validator("cluster.schema.json").validate(facts)
    assert (facts["features"], facts["eligible_leader_replicas"]) == (features, elr)


@pytest.mark.parametrize(("lines", "level"), [
    ([feature("metadata.version", 27), feature("transaction.version", 2)], 2),
    ([feature("metadata.version", 21)], 0),  # Kafka 3.9: no transaction.version finalized
    ([], None),
])
def test_cluster_json_says_the_transaction_version(lines: list[dict[str, object]], level: int | None) -> None:
    facts = cluster_facts("4.3.1", "org.apache.kafka.tools.DumpLogSegments", lines)
    validator("cluster.schema.json").validate(facts)
    assert facts["transaction_version"] == level
