"""Every history line, observation, metadata and replica line, results.json and test.json
the project writes matches its schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from faultline.brokerstate.metadata_log import parse_dump, timeline
from faultline.brokerstate.observe import Observer
from faultline.brokerstate.replica_logs import replica_summary
from faultline.checkers.queue import check_rows
from faultline.checkers.results_file import check_run
from faultline.checkers.synthetic import Shape, generate
from faultline.cluster.kafka_client import HighWatermark
from faultline.cluster.protocol import PartitionState
from faultline.history import HistoryWriter, iter_rows
from faultline.spec import TestSpec
from tests.schemas import valid_lines, validator
from tests.unit.brokerstate.fakes import TOPIC, FakeSource, batch, log_dirs, segment

HISTORY = validator("history.schema.json")
RESULTS = validator("results.schema.json")
TEST = validator("test.schema.json")
OBSERVATIONS = validator("observations.schema.json")
METADATA = validator("metadata.schema.json")
REPLICAS = validator("replicas.schema.json")


def test_generated_history_lines_match() -> None:
    for row in generate(Shape(values=200, consumers=2, fail=0.1, info=0.1, faults=2)):
        HISTORY.validate(row)


@pytest.mark.parametrize("name", ["history.jsonl", "history.jsonl.zst"])
def test_the_writers_lines_match(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    tp = {"topic": "fl-queue", "partition": 1}
    with HistoryWriter(path) as w:
        w.append(0, "invoke", "send", {**tp, "value": 17})
        w.append(0, "ok", "send", {**tp, "value": 17, "offset": 5})
        w.append(0, "invoke", "send", {**tp, "value": 18})
        w.append(0, "fail", "send", {**tp, "value": 18}, error="NOT_ENOUGH_REPLICAS")
        w.append(4, "invoke", "poll")
        w.append(4, "ok", "poll", {"records": [["fl-queue", 1, 5, 17]]})
        w.append("nemesis", "info", "kill", {"nodes": [2]})
        w.append("nemesis", "info", "kill", {"nodes": [2], "result": "killed pid 4242"})
        w.append("nemesis", "info", "partition", {"grudge": {"1": [2, 3], "2": [1], "3": [1]}})
        w.append(9, "invoke", "drain", tp)
        w.append(9, "ok", "drain", {**tp, "records": [[0, 3], [5, 17]], "log_start_offset": 0,
                                    "high_watermark": 6, "last": True})
    assert len(valid_lines(path, "history.schema.json")) == 11


@pytest.mark.parametrize("bad", [
    {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "send", "value": {"value": 1}},
    {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "send",
     "value": {"topic": "t", "partition": 0, "value": 1}},
    {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "poll", "value": {"records": [[1]]}},
    {"index": 0, "time": 0, "process": "nemesis", "type": "ok", "f": "kill", "value": {}},
    {"index": 0, "time": 0, "process": 0, "type": "done", "f": "poll", "value": None},
])
def test_the_history_schema_rejects_broken_lines(bad: dict[str, Any]) -> None:
    assert not HISTORY.is_valid(bad)


def test_the_observers_lines_match(tmp_path: Path) -> None:
    source = FakeSource({0: PartitionState(1, (1, 2), (1, 2, 3)), 1: PartitionState(None, (), (2, 3, 1))},
                        {0: HighWatermark(6, 2), 1: "LEADER_NOT_AVAILABLE"})
    obs = Observer(tmp_path / "observations.jsonl", lambda: 5, TOPIC, 2, source, log_dirs(tmp_path))
    obs.sample()
    source.fail = TimeoutError("timed out")
    obs.sample()
    lines = [orjson.loads(line) for line in obs.path.read_bytes().splitlines()]
    assert len(lines) == 4 and sum("error" in line for line in lines) == 3
    for line in lines:
        OBSERVATIONS.validate(line)


@pytest.mark.parametrize("bad", [
    {"time": 0, "topic": "t", "partition": 0, "leader": 1, "isr": [1], "replicas": [1], "hw": 0,
     "leo": {"n1": 3}, "hw_checkpoint": {}},
    {"time": 0, "topic": "t", "partition": 0, "leader": 1, "isr": [1], "replicas": [1], "hw": -1,
     "leo": {}, "hw_checkpoint": {}},
    {"time": 0, "topic": "t", "partition": 0, "leader": 1, "isr": [1], "hw": 0, "leo": {},
     "hw_checkpoint": {}},  # no replicas
    {"time": 0, "topic": "t", "partition": 0, "leader": 1, "isr": [1], "replicas": [1], "hw": 0,
     "hw_epoch": "5", "leo": {}, "hw_checkpoint": {}},
    {"time": 0, "topic": "t", "partition": 0, "leader": 1, "isr": [1], "replicas": [1], "hw": 0,
     "hw_epoch": -1, "leo": {}, "hw_checkpoint": {}},
])
def test_the_observations_schema_rejects_broken_lines(bad: dict[str, Any]) -> None:
    assert not OBSERVATIONS.is_valid(bad)


def test_the_default_spec_matches() -> None:
    TEST.validate(TestSpec().to_json())


def test_results_of_a_clean_run_match() -> None:
    rows = list(generate(Shape(values=300, consumers=2, fail=0.1, info=0.1, faults=2)))
    RESULTS.validate(orjson.loads(orjson.dumps(check_rows(TestSpec(), rows).to_json())))


def test_results_with_every_anomaly_match() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "checkers"))
    from queue_hist import H, make_spec

    h = H()
    h.invoke(0, 10)
    h.invoke(0, 11)
    h.done(0, 11, offset=0)
    h.done(0, 10, offset=1)
    h.send(0, 12, "fail")
    h.send(0, 13, offset=2)
    h.poll(5, [(0, 11), (1, 10), (3, 14), (3, 14), (5, 12)])
    h.fault("kill")
    h.drain([(0, 11), (1, 10), (2, 99), (3, 98), (4, 10), (5, 12)])  # no gap: a skip is no loss
    h.drain([], part=1, last=False)
    r = check_rows(make_spec(partitions=2), (o.to_dict() for o in h.ops)).to_json()
    assert {k for k, n in r["anomaly_counts"].items() if n} == {
        "lost-write", "phantom-read", "inconsistent-offsets", "duplicate", "aborted-read",
        "unexpected-value", "nonmonotonic-send", "nonmonotonic-poll", "poll-skip"}
    RESULTS.validate(orjson.loads(orjson.dumps(r)))


def test_results_json_written_by_check_run_matches(tmp_path: Path) -> None:
    (tmp_path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    (tmp_path / "history.jsonl").write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in generate(Shape(values=50))) + b'{"ind')
    check_run(tmp_path)
    data = orjson.loads((tmp_path / "results.json").read_bytes())
    RESULTS.validate(data)
    assert data["valid"] == "unknown"
    assert len(list(iter_rows(tmp_path / "history.jsonl"))) > 0
    history = data["history"]
    assert (history["file"], history["bytes"]) == ("history.jsonl",
                                                   (tmp_path / "history.jsonl").stat().st_size)
    assert not RESULTS.is_valid({**data, "history": {**history, "tail_sha256": "x"}})


def test_metadata_lines_of_real_dumplogsegments_output_match() -> None:
    dump = (Path(__file__).parent / "brokerstate" / "data" / "dumplogsegments-metadata.txt").read_text()
    lines = [orjson.loads(orjson.dumps(x)) for x in timeline(parse_dump(dump), 1795317075177)]
    assert {x["type"] for x in lines} >= {"topic", "partition", "partition-change",
                                          "broker-registration-change"}
    for line in lines:
        METADATA.validate(line)
    assert not METADATA.is_valid({**lines[0], "type": "PartitionChangeRecord"})
    assert not METADATA.is_valid({k: v for k, v in lines[0].items() if k != "raw"})


def test_replica_summary_lines_match(tmp_path: Path) -> None:
    segment(tmp_path / "t-0", 0, batch(0, 3, b"abc") + batch(3, 2, b"de", epoch=1, producer=(9, 1, 5)))
    summary = replica_summary(tmp_path, "t", 0)
    assert summary is not None
    line = {**summary, "node": 2}
    REPLICAS.validate(line)
    REPLICAS.validate({**line, "batches": [b[:4] for b in line["batches"]]})  # older runs
    assert not REPLICAS.is_valid({**line, "batches": [[0, 2, 0]]})
    assert not REPLICAS.is_valid({**line, "batches": [[0, 2, 0, 1, -2, 0, 0, 0]]})
    assert not REPLICAS.is_valid({k: v for k, v in line.items() if k != "node"})
