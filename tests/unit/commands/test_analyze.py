"""``faultline analyze`` on bad input: one line and exit 2, before Spark starts; which
sweep ``faultline nightly``'s verdict is about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from faultline.analysis import outputs
from faultline.analysis.pipeline import Analysis
from faultline.analysis.sweepdir import read_sweeps
from faultline.cli import main
from faultline.commands import nightly
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
    monkeypatch.setattr(outputs, "session", lambda master, remote: None)
    monkeypatch.setattr(outputs, "analyze", lambda spark, dirs, out, progress: Analysis(
        read_sweeps(dirs), {"runs": str(tmp_path / "t" / "runs")}, [], rows))
    monkeypatch.setattr(nightly, "run_matrix", lambda matrix, sweep_dir, console, night, workers: Manifest(
        "nightly", "2026-11-22T02:00:00Z", [CellState("acks=1", {"producer.acks": "1"}, "done", True)]))
    matrix = tmp_path / "nightly.yaml"
    matrix.write_text("axes: {acks: ['1']}\n")
    result = CliRunner().invoke(main, ["nightly", str(matrix), "--results", str(tmp_path / "results"),
                                       "--date", "2026-11-22"])
    assert result.exit_code == 0, result.output
    junit = (nightly_dir / "2026-11-22" / "analysis" / "junit.xml").read_text()
    assert 'name="acks=1"' in junit and "acks=all" not in junit


def test_a_night_is_the_night_asked_for_not_the_day_its_sweep_began(tmp_path: Path, monkeypatch: Any) -> None:
    """A night run after midnight (``--date`` the night before), or an earlier night run
    late, was labelled by the date its sweep was created: the trend showed it under the
    day it ran, merged with that day's own night."""
    from faultline.cluster import kafka_dist
    from faultline.sweep import manifest, runner
    from tests.unit.sweep.test_runner import FakeRuns

    nights: list[list[str]] = []

    def analyze(spark: Any, dirs: list[Path], out: str, progress: Any) -> Analysis:
        sweeps = read_sweeps(dirs)
        nights.append([s.night for s in sweeps])
        return Analysis(sweeps, {"runs": str(tmp_path / "t" / "runs")}, [], [])

    began = iter(["2020-01-03T00:30:00Z", "2020-01-03T00:40:00Z"])  # both the day after
    monkeypatch.setattr(manifest, "utc_now", lambda: next(began))
    monkeypatch.setattr(kafka_dist, "ensure_kafka", lambda *args, **kwargs: None)
    monkeypatch.setattr(runner, "run_isolated", FakeRuns())
    monkeypatch.setattr(outputs, "session", lambda master, remote: None)
    monkeypatch.setattr(outputs, "analyze", analyze)
    matrix = tmp_path / "nightly.yaml"
    matrix.write_text("defaults: {time_limit_s: 5, workload: {rate: 10}}\naxes: {acks: ['1']}\n")
    for night in ("2020-01-02", "2020-01-01"):  # the later night first
        result = CliRunner().invoke(main, ["nightly", str(matrix), "--results", str(tmp_path / "results"),
                                           "--date", night])
        assert result.exit_code == 0, result.output
    assert nights == [["2020-01-02"], ["2020-01-01"]]
    later = read_sweeps([tmp_path / "results" / "nightly" / n / "sweep"
                         for n in ("2020-01-02", "2020-01-01")])
    assert [s.night for s in later] == ["2020-01-01", "2020-01-02"], "oldest night first, whenever it ran"
