"""``faultline analyze`` on bad input: one line and exit 2, before Spark starts; which
sweep ``faultline nightly``'s verdict is about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from faultline import nightly
from faultline.analysis import cli as analysis_cli
from faultline.analysis.pipeline import Analysis
from faultline.analysis.sweepdir import read_sweeps
from faultline.cli import main
from faultline.sweep.manifest import CellState, Manifest
from tests.analysis_sweeps import CellRun, make_sweep
from tests.unit.analysis.test_comparison import cell_row


def test_not_a_sweep_directory_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"faultline: error: {tmp_path / 'sweep.json'}: cannot read (No such file or directory): "
        "not a sweep directory"]


def test_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "nope")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "does not exist" in result.output


def test_nightly_of_an_earlier_night_judges_that_night(tmp_path: Path, monkeypatch: Any) -> None:
    """Resuming an earlier night (``--date``) after a later one ran: the analysis took the
    sweep created last for the one junit.xml and the exit status are about, so the night
    just run (clean) exited 1 and wrote the later night's violation into its junit.xml."""
    nightly_dir = tmp_path / "results" / "nightly"
    for night, cell in (("2026-11-22", "acks=1"), ("2026-11-23", "acks=all")):
        make_sweep(nightly_dir / night / "sweep", "nightly", f"{night}T02:00:00Z",
                   [CellRun(cell, {"producer.acks": cell[5:]}, status="failed", error="x")])
    rows = [cell_row(sweep="nightly-20261122T020000Z", night="2026-11-22", cell="acks=1",
                     created="2026-11-22T02:00:00Z"),
            cell_row(sweep="nightly-20261123T020000Z", night="2026-11-23", cell="acks=all",
                     created="2026-11-23T02:00:00Z", runs_violating=1, violations=["lost-write"],
                     run_list=[{"run": "r", "status": "done", "valid": "false",
                                "violations": ["lost-write"], "report": None, "error": None}])]
    monkeypatch.setattr(analysis_cli, "session", lambda master, remote: None)
    monkeypatch.setattr(analysis_cli, "analyze", lambda spark, dirs, out, progress: Analysis(
        read_sweeps(dirs), {"runs": str(tmp_path / "t" / "runs")}, [], rows))
    monkeypatch.setattr(nightly, "run_matrix", lambda matrix, sweep_dir, console: Manifest(
        "nightly", "2026-11-22T02:00:00Z", [CellState("acks=1", {"producer.acks": "1"}, "done", True)]))
    matrix = tmp_path / "nightly.yaml"
    matrix.write_text("axes: {acks: ['1']}\n")
    result = CliRunner().invoke(main, ["nightly", str(matrix), "--results", str(tmp_path / "results"),
                                       "--date", "2026-11-22"])
    assert result.exit_code == 0, result.output
    junit = (nightly_dir / "2026-11-22" / "analysis" / "junit.xml").read_text()
    assert 'name="acks=1"' in junit and "acks=all" not in junit
