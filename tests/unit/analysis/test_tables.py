"""The explicit schemas of the analysis tables name every column the rows hold
(faultline/analysis/tables.py): a column left out would be dropped without a word."""

from __future__ import annotations

from pathlib import Path

from faultline.analysis import tables
from faultline.analysis.sweepdir import Cell
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
