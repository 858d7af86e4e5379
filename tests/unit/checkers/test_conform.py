"""The broker-state readers hold every line to its schema: a line of the wrong shape is
the readers' own error naming file and line, and the check of a run that has one is
unknown, never an internal error (issue 33). Fuzzed with mutated lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.checkers.conform import SCHEMAS, Schema, schema
from faultline.checkers.result import UNKNOWN
from faultline.checkers.results_file import check_run
from faultline.checkers.whitebox import BrokerFiles
from tests.schemas import validator
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec

METADATA = {"offset": 3, "time": 2_000_000_000, "type": "partition-change", "topic": TOPIC,
            "partition": 0, "leader": 2, "isr": [2, 3], "elr": [], "last_known_elr": [],
            "replicas": [1, 2, 3], "leader_epoch": 1, "leader_recovery_state": 0, "raw": {}}
OBSERVATION = {"time": 1_500_000_000, "topic": TOPIC, "partition": 0, "leader": 1, "isr": [1, 2, 3],
               "replicas": [1, 2, 3], "hw": 2, "hw_epoch": 0, "leo": {"1": 2, "2": 2, "3": 1},
               "hw_checkpoint": {"1": 1, "2": 1, "3": None}}
REPLICA = {"topic": TOPIC, "partition": 0, "node": 1, "log_start_offset": 0, "log_end_offset": 2,
           "hw_checkpoint": 2, "batches": [[0, 0, 0, 7, -1, -1, -1, -1], [1, 1, 1, 8]]}
CLUSTER = {"kafka_version": "4.3.1", "dump_log_segments": "org.apache.kafka.tools.DumpLogSegments",
           "features": {"metadata.version": 27}, "eligible_leader_replicas": True,
           "broker_state_errors": []}
LINES = {"metadata.jsonl": METADATA, "observations.jsonl": OBSERVATION, "replicas.jsonl": REPLICA,
         "cluster.json": CLUSTER}
SCHEMA_OF = {"metadata.jsonl": "metadata.schema.json", "observations.jsonl": "observations.schema.json",
             "replicas.jsonl": "replicas.schema.json", "cluster.json": "cluster.schema.json"}

#: any JSON value, huge integers, deep nesting and floats included
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.sampled_from([-1, 0, 1, 2, 3, 2**63])
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


@st.composite
def mutated(draw: st.DrawFn, line: dict[str, Any]) -> dict[str, Any]:
    """``line`` with a few of its fields (or their items) replaced, dropped or added."""
    out: dict[str, Any] = json.loads(json.dumps(line))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*out, "extra"]))
        how = draw(st.sampled_from(["replace", "drop", "item", "nest"]))
        if how == "drop":
            out.pop(key, None)
        elif how == "item" and isinstance(out.get(key), list | dict) and out[key]:
            inner = out[key]
            at = draw(st.sampled_from(sorted(inner) if isinstance(inner, dict) else range(len(inner))))
            inner[at] = draw(JSON)
        elif how == "nest":
            out[key] = [out.get(key)]
        else:
            out[key] = draw(JSON)
    return out


def _run(tmp: Path) -> Path:
    """A run with an acks=1 loss after a kill of node 1, leader of fl-queue/0."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault("kill", [1], leaders={f"{TOPIC}/0": 1})
    h.drain([(0, 10)], hw=2)
    tmp.mkdir()
    (tmp / "test.json").write_bytes(orjson.dumps(make_spec(acks="1", min_insync=1).to_json()))
    (tmp / "history.jsonl").write_bytes(b"".join(orjson.dumps(o.to_dict()) + b"\n" for o in h.ops))
    return tmp


def _write(path: Path, line: dict[str, Any]) -> None:
    if path.name == "cluster.json":
        path.write_text(json.dumps(line))
    else:  # a good line, then the mutated one: the error names line 2
        path.write_text(json.dumps(LINES[path.name]) + "\n" + json.dumps(line) + "\n")


@pytest.mark.parametrize("name", sorted(LINES))
def test_the_example_lines_conform(name: str) -> None:
    assert schema(SCHEMA_OF[name]).problem(LINES[name]) is None
    validator(SCHEMA_OF[name]).validate(LINES[name])


def test_a_schema_using_a_keyword_not_checked_is_refused(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(SCHEMAS / "cluster.schema.json", tmp_path / "x.json")
    data = json.loads((tmp_path / "x.json").read_text())
    data["properties"]["features"]["minProperties"] = 1
    (tmp_path / "x.json").write_text(json.dumps(data))
    monkeypatch.setattr("faultline.checkers.conform.SCHEMAS", tmp_path)
    with pytest.raises(ValueError, match="minProperties"):
        Schema("x.json")


def _no_floats_nor_wide_ints(x: Any) -> bool:
    if isinstance(x, float) or (isinstance(x, int) and not -(2**63) <= x < 2**63):
        return False
    if isinstance(x, list):
        return all(map(_no_floats_nor_wide_ints, x))
    if isinstance(x, dict):
        return all(map(_no_floats_nor_wide_ints, x.values()))
    return True


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(LINES)).flatmap(lambda n: st.tuples(st.just(n), mutated(LINES[n]))))
def test_the_readers_schema_agrees_with_json_schema(case: tuple[str, dict[str, Any]]) -> None:
    """What the readers accept, JSON Schema accepts; what JSON Schema accepts, the readers
    accept unless it holds a float or an integer past 64 bits (stricter on purpose)."""
    name, line = case
    mine = schema(SCHEMA_OF[name]).problem(line)
    theirs = validator(SCHEMA_OF[name]).is_valid(line)
    if mine is None:
        assert theirs
    elif _no_floats_nor_wide_ints(line):
        assert not theirs, mine


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(LINES)).flatmap(lambda n: st.tuples(st.just(n), mutated(LINES[n]))))
def test_a_mutated_broker_state_line_is_read_or_named_and_the_check_writes_results(
        tmp_path_factory: pytest.TempPathFactory, case: tuple[str, dict[str, Any]]) -> None:
    name, line = case
    d = _run(tmp_path_factory.mktemp("run") / "r")
    _write(d / name, line)
    files = BrokerFiles.read(d)  # never raises
    result = check_run(d)  # never an internal error: checker-error would be a crash inside
    assert not any(u["kind"] == "checker-error" for u in result.unknown), result.unknown
    data = orjson.loads((d / "results.json").read_bytes())
    assert data["valid"] == result.valid
    if name != "cluster.json" and files.unreadable:
        assert data["valid"] == UNKNOWN
        (entry,) = [u for u in data["unknown"] if u["kind"] == "broker-state-unreadable"]
        assert f"{d / name}:2: " in entry["why"]
    elif name == "cluster.json" and schema(SCHEMA_OF[name]).problem(line) is not None:
        assert data["valid"] == UNKNOWN and "cluster.json could not be read" in json.dumps(data["unknown"])
