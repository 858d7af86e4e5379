"""A short no-fault run on a real 3-node cluster: the history validates, and every
acknowledged value is in the drain exactly once, at the offset it was acknowledged at;
the observer's samples validate and end where the drain ended."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import pytest
from rich.console import Console

from faultline.history import ReadResult, read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import KafkaSpec, TestSpec
from tests.schemas import valid_lines

pytestmark = pytest.mark.integration
SPEC = TestSpec(name="it-no-fault", time_limit_s=15.0, kafka=KafkaSpec(heap_mb=384))


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_run_directory(outcome: RunOutcome) -> None:
    run_dir = outcome.run_dir
    assert outcome.error is None
    assert (run_dir.parent.parent / "latest").resolve() == run_dir.resolve()
    spec = json.loads((run_dir / "test.json").read_text())
    assert spec["name"] == "it-no-fault" and spec["start_wall_ms"] > 0
    assert sorted(p.name for p in (run_dir / "nodes").iterdir() if p.is_dir()) == ["1", "2", "3"]
    assert outcome.recovered


def test_history_validates_and_the_drain_holds_every_ack_once(outcome: RunOutcome) -> None:
    result = ReadResult()
    acked: dict[int, tuple[int, int]] = {}
    failed: set[int] = set()
    drained: dict[int, list[tuple[int, int]]] = defaultdict(list)
    last: set[int] = set()
    polls = 0
    for op in read_history(outcome.run_dir, result):  # validates pairing
        v = op.value
        if op.f == "send" and op.type == "ok":
            acked[v["value"]] = (v["partition"], v["offset"])
        elif op.f == "send" and op.type == "fail":
            failed.add(v["value"])
        elif op.f == "poll" and op.type == "ok":
            polls += 1
        elif op.f == "drain" and op.type == "ok":
            assert v["log_start_offset"] == 0
            for offset, value in v["records"]:
                assert offset < v["high_watermark"]
                drained[value].append((v["partition"], offset))
            if v.get("last"):
                last.add(v["partition"])
    assert not result.truncated
    assert last == {0, 1, 2}, "every partition's drain completed"
    assert len(acked) > 1000, "the workload made progress"
    assert polls > 0
    assert not failed, "no fault, no definite failure"
    wrong = {value: (where, drained.get(value)) for value, where in acked.items()
             if drained.get(value) != [where]}
    assert not wrong, f"{len(wrong)} acknowledged values misplaced, e.g. {list(wrong.items())[:5]}"
    assert outcome.stats.ok == len(acked)


def test_observations_validate_and_end_at_the_drained_high_watermark(outcome: RunOutcome) -> None:
    lines = valid_lines(outcome.run_dir / "observations.jsonl", "observations.schema.json")
    assert lines, "the observer wrote samples"
    times = [line["time"] for line in lines]
    assert times == sorted(times)
    assert {line["partition"] for line in lines} == {0, 1, 2}
    final = {line["partition"]: line for line in lines}
    drained = {d.partition: d.high_watermark for d in outcome.drains}
    for p, line in final.items():
        assert line["hw"] == drained[p] and line["hw"] > 0, line
        assert set(line["leo"].values()) == {drained[p]}, f"every replica's LEO at the end: {line}"
        assert sorted(line["isr"]) == [1, 2, 3] and line["leader"] in line["isr"]


def test_verdict(outcome: RunOutcome) -> None:
    assert outcome.valid is True, f"verdict {outcome.valid}: see {outcome.run_dir / 'results.json'}"
    assert outcome.exit_code == 0
    assert Path(outcome.run_dir / "results.json").exists()


def test_broker_state_files_validate(outcome: RunOutcome) -> None:
    metadata = valid_lines(outcome.run_dir / "metadata.jsonl", "metadata.schema.json")
    assert any(m["type"] == "partition" and m.get("topic") == SPEC.topic.name for m in metadata)
    replicas = valid_lines(outcome.run_dir / "replicas.jsonl", "replicas.schema.json")
    assert len(replicas) == SPEC.topic.partitions * SPEC.topic.replication_factor
