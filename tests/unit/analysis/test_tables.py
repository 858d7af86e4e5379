"""The explicit schemas of the analysis tables name every column the rows hold
(faultline/analysis/tables.py): a column left out would be dropped without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultline.analysis import tables
from faultline.analysis.sweepdir import Cell
from faultline.errors import HistoryError
from faultline.spec import TestSpec


def test_the_runs_schema_holds_every_column_of_a_runs_row() -> None:
    spec = TestSpec()
    cell = Cell("s", "2026-11-23T02:00:00Z", "2026-11-23", "acks=all", {"producer.acks": "all"},
                "done", Path("/nonexistent"), None)
    row = tables.run_row(cell, spec, "true", {}, None, tables.SendFigures())
    added = {"expected_loss", "expected_reason", "results_json"}  # by the pipeline
    assert set(row) | added == set(tables.RUNS_SCHEMA.names)
    assert list(tables.config_columns(spec)) == tables.CONFIG_COLUMNS
    types = {f.name: str(f.type) for f in tables.CONFIG_FIELDS}
    assert (types["seed"], types["nemesis_interval_s"], types["kafka_log_flush_interval_messages"],
            types["topic_unclean_leader_election_enable"], types["nemesis_faults"],
            types["kafka_broker_config"]) == ("int64", "double", "int64", "bool", "string", "string")


def test_the_observations_of_a_run_that_died_writing_them_are_its_readable_prefix(tmp_path: Path) -> None:
    """Found by review: a cut last line of observations.jsonl (a run that died writing it)
    was an error that refused the whole run; a bad line before the last still is."""
    whole = b'{"time": 1, "topic": "t", "partition": 0, "hw": 5}\n'
    (tmp_path / "observations.jsonl").write_bytes(whole + whole[:20])
    [batch] = tables.observation_batches(tmp_path)
    assert batch.column("hw").to_pylist() == [5]
    (tmp_path / "observations.jsonl").write_bytes(whole[:20] + b"\n" + whole)
    with pytest.raises(HistoryError, match=r"observations\.jsonl:1: not valid JSON"):
        list(tables.observation_batches(tmp_path))


def test_observations_of_a_type_their_column_cannot_hold_are_null(tmp_path: Path) -> None:
    """Found by review: a boolean, or an integer past its column's type, stopped the run's task."""
    (tmp_path / "observations.jsonl").write_bytes(
        b'{"time": true, "partition": 2147483648, "hw": 18446744073709551615, "isr": [1, false, 2]}\n'
        b'{"time": 9223372036854775807, "partition": -2147483648, "leader": -1, "isr": [1]}\n')
    [batch] = tables.observation_batches(tmp_path)
    assert [(r["time"], r["partition"], r["hw"], r["leader"], r["isr"]) for r in batch.to_pylist()] == [
        (None, None, None, None, [1, 2]), (2**63 - 1, -2**31, None, -1, [1])]
