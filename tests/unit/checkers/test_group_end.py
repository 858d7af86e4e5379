"""group.json read for the group checker (faultline/checkers/group_end.py): the group's
committed offsets, or one line saying why there are none; fuzzed with mutated files and
arbitrary bytes, like the other broker-state readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.checkers.conform import schema
from faultline.checkers.group_end import (
    GroupEnd,
    group_end,
    group_partition,
    offsets_nodes,
    offsets_timeline,
    partition_nodes,
    stored_before,
)
from faultline.targeted import coordinator_partition
from tests.schemas import validator
from tests.unit.checkers.test_conform import _no_floats_nor_wide_ints, mutated

GROUP = "faultline-g"
TOPIC = "fl-queue"
FILE = {"group": GROUP, "offsets": [{"topic": TOPIC, "partition": 0, "offset": 209, "leader_epoch": 2},
                                    {"topic": "other", "partition": 1, "offset": 3, "leader_epoch": None}],
        "offsets_topic_partition": 3,
        "offsets_replicas": [{"topic": "__consumer_offsets", "partition": 3, "node": 1,
                              "log_start_offset": 0, "log_end_offset": 2, "hw_checkpoint": 2,
                              "batches": [[0, 1, 0, 7, -1, -1, -1, -1, "data"]]}],
        "errors": []}
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def write(tmp: Path, data: Any) -> Path:
    (tmp / "group.json").write_text(json.dumps(data))
    return tmp


def test_the_example_conforms_and_gives_the_topics_offsets(tmp_path: Path) -> None:
    assert schema("group.schema.json").problem(FILE) is None
    validator("group.schema.json").validate(FILE)
    end = group_end(write(tmp_path, FILE), GROUP, TOPIC)
    assert end.offsets == {0: 209}
    assert end.offsets_partition == 3 and end.offsets_replicas == FILE["offsets_replicas"]


def line(partition: int, replicas: list[int]) -> dict[str, Any]:
    """A metadata.jsonl line creating __consumer_offsets partition ``partition`` on ``replicas``."""
    return {"offset": 1, "time": 0, "type": "partition", "topic": "__consumer_offsets",
            "partition": partition, "leader": replicas[0], "isr": replicas, "replicas": replicas}


def test_the_nodes_holding_the_offsets_partition_are_the_metadata_logs() -> None:
    """The metadata log's replicas of the group's __consumer_offsets partition (3), where
    group.json's replicas (node 1) are among them; else not known."""
    end = GroupEnd({}, 3, FILE["offsets_replicas"])  # type: ignore[arg-type]
    three_on_123 = offsets_timeline([line(3, [1, 2, 3])])
    assert offsets_nodes(end, offsets_timeline([line(2, [4, 5, 6]), line(3, [1, 2, 3])])) == {"1", "2", "3"}
    assert offsets_nodes(GroupEnd({}, 3, None), three_on_123) == {"1", "2", "3"}
    assert offsets_nodes(end, offsets_timeline([line(3, [2, 3, 4])])) is None, "node 1 is none of them"
    assert offsets_nodes(end, offsets_timeline([line(2, [1, 2, 3])])) is None, "no partition 3 in the log"
    assert offsets_nodes(end, offsets_timeline(None)) is None
    assert offsets_nodes(GroupEnd({}), three_on_123) is None, "the partition is not known"


def test_a_groups_offsets_partition_is_kafkas_pick_among_the_partitions_the_metadata_log_records() -> None:
    """A group without group.json (read-process-write's): its partition is
    coordinator_partition over the __consumer_offsets partitions the log records, where it
    records 0 to n - 1 each; else not known."""
    five = [line(p, [p % 3 + 1]) for p in range(5)]
    rpw = "faultline-t-rpw"
    assert group_partition(rpw, offsets_timeline(five)) == coordinator_partition(rpw, 5)
    assert group_partition(rpw, offsets_timeline(five[1:])) is None, "partition 0 is not recorded"
    assert group_partition("faultline-t-rpw", offsets_timeline([])) is None
    assert group_partition("faultline-t-rpw", offsets_timeline(None)) is None
    at = coordinator_partition("faultline-t-rpw", 5)
    assert partition_nodes(at, offsets_timeline(five)) == {str(at % 3 + 1)}


def test_a_missing_file_another_group_or_no_answer_is_one_line(tmp_path: Path) -> None:
    assert "did not collect" in str(group_end(tmp_path, GROUP, TOPIC).offsets)
    assert "not the run's" in str(group_end(write(tmp_path, FILE), "faultline-h", TOPIC).offsets)
    why = group_end(write(tmp_path, {**FILE, "offsets": None, "errors": ["committed offsets: down"]}),
                    GROUP, TOPIC).offsets
    assert why == f"{tmp_path / 'group.json'}: no committed offsets (committed offsets: down)"


@FUZZ
@given(mutated(FILE))
def test_a_mutated_file_is_read_or_named_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                     data: dict[str, Any]) -> None:
    got = group_end(write(tmp_path_factory.mktemp("run"), data), GROUP, TOPIC).offsets
    problem = schema("group.schema.json").problem(data)
    if problem is None:
        assert validator("group.schema.json").is_valid(data)
    elif _no_floats_nor_wide_ints(data):
        assert not validator("group.schema.json").is_valid(data), problem
    if isinstance(got, str):
        assert "\n" not in got
    else:
        assert problem is None and data["offsets"] is not None


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_read_or_named_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                       raw: bytes) -> None:
    path = tmp_path_factory.mktemp("run")
    (path / "group.json").write_bytes(raw)
    got = group_end(path, GROUP, TOPIC).offsets
    assert isinstance(got, dict) or "\n" not in got


def test_only_the_first_record_of_the_lower_offset_answers_for_the_lower_commit() -> None:
    """History: 100 committed and lost with destroyed data, then 80; later 100 and 80 again,
    as members re-commit the same offsets. The log holds 50, 80, 100, 80: the later pair
    says nothing of the first, whose 100 never reached the log (the review's finding); a
    log where 100 comes before the first 80 does say 100 was kept until then."""
    repeated = [(0, 0, 50), (1, 0, 80), (2, 0, 100), (3, 0, 80)]
    assert stored_before([repeated, repeated], 0, 100, 80) is False
    kept = [(0, 0, 50), (1, 0, 100), (2, 0, 80)]
    assert stored_before([kept, kept], 0, 100, 80) is True
    assert stored_before([kept, repeated], 0, 100, 80) is None
