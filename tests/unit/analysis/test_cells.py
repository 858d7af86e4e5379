"""The per-cell aggregates (aggregate.cell_runs, aggregate.cells) and the tables' writing
(pipeline.write_rows): faults reviews found, each test failing against the code before."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from faultline.analysis import aggregate, tables
from faultline.analysis.comparison import config, grids, names
from faultline.analysis.evidence import status
from faultline.analysis.pipeline import partitions, replace_partitions
from faultline.analysis.tables import config_columns
from faultline.spec import NemesisSpec, TestSpec


def run_row(run: str, status: str, spec: TestSpec | None, **kw: Any) -> dict[str, Any]:
    """A runs row as the pipeline writes it; a run that wrote no test.json has no config."""
    return {"sweep": "nightly-1", "run": run, "cell": "nemesis.faults=kill,producer.acks=all",
            "night": "2026-11-23", "created": "2026-11-23T02:00:00Z", "status": status,
            "run_dir": f"/x/{run}", "report": None,
            **(config_columns(spec) if spec is not None else {"seed": 1}),
            "valid": "unknown", "error": None, "violations": [], "permitted": [], "unknown": [],
            "n_lost_write": 0, "acked_per_s": None, "unavailability": None,
            "fault_to_first_loss_s": None, "expected_loss": None, "expected_reason": None, **kw}


def cells(rows: Sequence[dict[str, Any]],
          latencies: dict[aggregate.CellKey, tuple[float, float]] | None = None) -> list[dict[str, Any]]:
    """The cells rows of the runs rows ``rows``, with ``latencies`` by cells row (none by default)."""
    return aggregate.cells(aggregate.cell_runs(rows, tables.CONFIG_COLUMNS), latencies or {},
                           tables.CONFIG_COLUMNS)


def write_rows(rows: Sequence[dict[str, Any]], path: str, sweeps: Sequence[str], keys: tuple[str, ...],
               schema: pa.Schema) -> None:
    replace_partitions(path, sweeps, keys, partitions(rows, keys, schema))


def test_a_seed_without_test_json_does_not_move_its_cell_out_of_its_config(tmp_path: Path) -> None:
    """F.first took a config column from whichever run came first: a failed seed's nulls put
    a violating acks=all cell under "faults: none, acks=None, loss unknown"."""
    base = TestSpec()
    spec = dataclasses.replace(base, seed=2, nemesis=NemesisSpec(faults=("kill",)),
                               producer=dataclasses.replace(base.producer, acks="all"))
    rows = [run_row("seed=1", "failed", None, error="the cluster did not come up"),
            run_row("seed=2", "done", spec, valid="false", violations=["lost-write"],
                    n_lost_write=1, expected_loss="forbidden", expected_reason="acks=all")]
    for order in (rows, rows[::-1]):
        (cell,) = cells(order)
        assert (cell["nemesis_faults"], cell["producer_acks"], cell["expected_loss"]) == (
            "kill", "all", "forbidden")
        assert (cell["runs_total"], cell["runs_failed"]) == (2, 1)
        assert [g["faults"] for g in grids([cell], tmp_path)] == ["kill"]


def test_analyzing_a_sweep_again_forgets_the_anomalies_it_no_longer_has(tmp_path: Path) -> None:
    """Writing overwrites only the (sweep, run) partitions it has rows for: after a checker
    fix, a run's old anomalies stayed in the table beside runs and cells that no longer
    counted them."""
    out = str(tmp_path / "anomalies")
    row = {"run": "r1", "type": "lost-write", "example": 0, "violation": True}
    both = ["nightly-1", "nightly-2"]
    write_rows([{"sweep": s, **row} for s in both], out, both,
               ("sweep", "run"), tables.ANOMALIES_SCHEMA)
    write_rows([], out, ["nightly-1"], ("sweep", "run"), tables.ANOMALIES_SCHEMA)  # analyzed again: none now
    left = ds.dataset(out, partitioning="hive").to_table().to_pylist()
    assert [(r["sweep"], r["run"], r["type"]) for r in left] == [("nightly-2", "r1", "lost-write")]


def test_rows_that_cannot_be_written_leave_the_table_as_it_was(tmp_path: Path) -> None:
    """Found by review: a table's partitions of the sweeps analyzed again were deleted before
    their new rows were made, so an analysis that failed there lost the last one's."""
    out = str(tmp_path / "runs")
    row = run_row("seed=1", "done", TestSpec(), valid="true")
    write_rows([row], out, ["nightly-1"], ("sweep",), tables.RUNS_SCHEMA)
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        write_rows([{**row, "n_lost_write": "many"}], out, ["nightly-1"], ("sweep",), tables.RUNS_SCHEMA)
    assert [r["run"] for r in ds.dataset(out, partitioning="hive").to_table().to_pylist()] == ["seed=1"]


def test_a_violation_the_broker_state_left_undecided_is_an_unknown_run() -> None:
    """A run whose broker state could not be read is unknown whatever its history showed, and
    keeps the violations the history found: the cell counted it violating (the page said
    violation) where its results.json, its report and ``faultline sweep`` say unknown."""
    base = TestSpec()
    spec = dataclasses.replace(base, nemesis=NemesisSpec(faults=("kill",)),
                               producer=dataclasses.replace(base.producer, acks="all"))
    rows = [run_row("seed=1", "done", spec, valid="unknown", violations=["lost-write"], n_lost_write=1,
                    unknown=["broker-state-unreadable"]),
            run_row("seed=2", "done", spec, valid="true")]
    (cell,) = cells(rows)
    assert (cell["runs_violating"], cell["violations"], cell["runs_unknown"]) == (0, [], 1)
    assert status(cell) == "unknown"


def test_a_run_whose_loss_is_undecided_is_not_a_run_without_loss() -> None:
    """An unknown run that lost no write (its drain incomplete, say) may have lost one: its
    report says "data loss undecided". The cell counted it a run without loss, so p_loss
    and its interval claimed evidence of safety the runs do not give."""
    base = TestSpec()
    rows = [run_row("seed=1", "done", base, valid="true"),
            run_row("seed=2", "done", base, valid="unknown", unknown=["incomplete-drain"]),
            run_row("seed=3", "done", base, valid="unknown", n_lost_write=2, unknown=["incomplete-drain"])]
    (cell,) = cells(rows)
    assert (cell["runs"], cell["runs_undecided"], cell["runs_lost"], cell["lost_sum"]) == (3, 1, 1, 2)
    lo, hi = aggregate.wilson(1, 2)
    assert cell["p_loss"] == 0.5 and cell["p_loss_low"] == pytest.approx(lo)
    assert cell["p_loss_high"] == pytest.approx(hi)


def test_the_loss_figures_count_done_runs_and_the_means_every_run_with_a_value() -> None:
    """What each figure counts, as the page reads it: loss over the done runs (a failed run
    has none), means and the minimum over the runs that have the figure."""
    base = TestSpec()
    rows = [run_row("seed=1", "done", base, valid="false", violations=["lost-write", "duplicate"],
                    n_lost_write=3, acked_per_s=100.0, fault_to_first_loss_s=2.5),
            run_row("seed=2", "done", base, valid="false", violations=["lost-write"], n_lost_write=8,
                    acked_per_s=300.0, fault_to_first_loss_s=1.5),
            run_row("seed=3", "done", base, valid="true", n_lost_write=0),
            run_row("seed=4", "failed", base, n_lost_write=None, error="no cluster")]
    key = ("nightly-1", rows[0]["cell"], next(iter(aggregate.cell_runs(rows, tables.CONFIG_COLUMNS)))[2])
    (cell,) = cells(rows, {key: (1.5, 9.0)})
    assert (cell["runs_total"], cell["runs"], cell["runs_failed"], cell["runs_lost"]) == (4, 3, 1, 2)
    assert (cell["lost_sum"], cell["lost_median"], cell["lost_max"]) == (11, 3.0, 8)
    assert (cell["runs_violating"], cell["violations"]) == (2, ["duplicate", "lost-write"])
    assert (cell["acked_per_s"], cell["fault_to_first_loss_s"]) == (200.0, 1.5)
    assert (cell["p50_ms"], cell["p99_ms"], cell["p_loss"]) == (1.5, 9.0, 2 / 3)
    assert [r["run"] for r in cell["run_list"]] == ["seed=1", "seed=2", "seed=3", "seed=4"]


def test_runs_of_one_key_under_two_configs_are_two_cells() -> None:
    """A sweep resumed after a default changed held runs of one cell key under two configs
    (here the workload's rate): they were one cells row, its loss figures mixing both and
    its config whichever run came first, so the page showed one config's loss as the other's."""
    base = dataclasses.replace(TestSpec(), nemesis=NemesisSpec(faults=("kill",)))
    slow = dataclasses.replace(base, workload=dataclasses.replace(base.workload, rate=100.0))
    rows = [run_row("seed=1", "done", dataclasses.replace(base, seed=1), valid="false",
                    violations=["lost-write"], n_lost_write=3),
            run_row("seed=2", "done", dataclasses.replace(slow, seed=2), valid="true"),
            run_row("seed=3", "done", dataclasses.replace(slow, seed=3), valid="true"),
            run_row("seed=4", "failed", None, error="the cluster did not come up")]
    got = sorted(cells(rows), key=lambda c: str(c["workload_rate"]))
    assert [(c["workload_rate"], c["runs_total"], c["runs_violating"], c["runs_lost"])
            for c in got] == [(0.0, 1, 1, 1), (100.0, 2, 0, 0), (None, 1, 0, 0)], \
        "a run without test.json belongs to neither config when its key has two"
    assert [sorted(r["run"] for r in c["run_list"]) for c in got] == [
        ["seed=1"], ["seed=2", "seed=3"], ["seed=4"]]
    named = names(got)  # as the page and junit.xml name them: by what tells them apart
    assert [named[config(c)] for c in got] == [
        f"nemesis.faults=kill,producer.acks=all (workload_rate={r})" for r in (0.0, 100.0, None)]


def test_the_cells_table_holds_every_column_typed_and_none_else(tmp_path: Path) -> None:
    """The cells rows as written: each column the schema's type, partitioned by sweep, no
    column the schema does not name."""
    rows = cells([run_row("seed=1", "done", TestSpec(), valid="true", acked_per_s=5.0)])
    write_rows(rows, str(tmp_path / "cells"), ["nightly-1"], ("sweep",), tables.CELLS_SCHEMA)
    assert set(rows[0]) == set(tables.CELLS_SCHEMA.names)
    table = ds.dataset(tmp_path / "cells", partitioning="hive").to_table()
    assert sorted(table.schema.names) == sorted(tables.CELLS_SCHEMA.names)
    for f in tables.CELLS_SCHEMA:
        if f.name != "sweep":
            assert table.schema.field(f.name).type == f.type, f.name
    (back,) = table.to_pylist()
    assert (back["sweep"], back["runs"], back["acked_per_s"], back["run_list"][0]["valid"]) == (
        "nightly-1", 1, 5.0, "true")
    assert pa.types.is_string(table.schema.field("sweep").type)
