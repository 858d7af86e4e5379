"""Running a sweep with a stand-in for run_test (the runs themselves are the
integration test's): what the manifest says after each kind of cell ending, what a
rerun runs again, Ctrl-C, the disk estimate."""

from __future__ import annotations

import errno
import io
import multiprocessing
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from faultline.analysis.sweepdir import read_sweeps
from faultline.errors import FaultlineError, HistoryError, SetupError, SpecError
from faultline.run.runner import RunOutcome
from faultline.spec import TestSpec
from faultline.sweep import manifest as manifest_module
from faultline.sweep import runner
from faultline.sweep.manifest import CellState, Manifest, load, plan
from faultline.sweep.matrix import Matrix, parse_matrix
from faultline.workloads.clients import WorkloadStats
from tests.schemas import validator

SWEEP = validator("sweep.schema.json")
MATRIX = {"name": "t", "defaults": {"time_limit_s": 10},
          "axes": {"acks": ["1", "all"], "min_insync": [1, 2]}}


def matrix(data: dict[str, Any] = MATRIX) -> Matrix:
    return parse_matrix(data, "m.yaml", "m")


class FakeRuns:
    """Stands in for run_test: makes the run directory and results.json, or does what
    ``behave[cell index]`` says: ``"raise"``, ``"error"``, ``"no-results"``, ``"ctrl-c"``,
    or a verdict."""

    def __init__(self, behave: dict[int, Any] | None = None) -> None:
        self.behave = behave or {}
        self.ran: list[str] = []

    def __call__(self, spec: TestSpec, *, console: Console | None = None,
                 run_dir: Path | None = None) -> RunOutcome:
        assert run_dir is not None and not run_dir.exists()
        run_dir.mkdir(parents=True)
        (run_dir / "test.json").write_bytes(orjson.dumps(spec.to_json()))
        self.ran.append(run_dir.name)
        what = self.behave.get(len(self.ran) - 1, True)
        if what == "raise":
            raise RuntimeError("boom\nsecond line")
        if what == "ctrl-c":
            raise KeyboardInterrupt
        if what == "error":
            return RunOutcome(run_dir, None, WorkloadStats(), error="cluster did not start")
        if what == "garbled":
            (run_dir / "results.json").write_bytes(b'{"valid": tru')
        elif what != "no-results":
            (run_dir / "results.json").write_bytes(orjson.dumps({"valid": what}))
        return RunOutcome(run_dir, what if what != "no-results" else None, WorkloadStats())


def run(sweep_dir: Path, fake: FakeRuns, m: Matrix | None = None) -> Manifest:
    m = m or matrix()
    manifest = runner.prepare(m, sweep_dir)
    return runner.run_sweep(m, sweep_dir, manifest, console=Console(file=io.StringIO()), run_cell=fake)


def statuses(sweep_dir: Path) -> list[tuple[str, Any, Any]]:
    data = orjson.loads((sweep_dir / "sweep.json").read_bytes())
    SWEEP.validate(data)
    return [(c["status"], c["valid"], c["error"]) for c in data["cells"]]


def test_every_cell_runs_into_its_directory_and_the_manifest_says_how_it_ended(tmp_path: Path) -> None:
    fake = FakeRuns({0: False, 1: "raise", 2: "error", 3: "no-results", 4: "garbled", 5: "unknown"})
    manifest = run(tmp_path, fake, matrix({**MATRIX, "cells": [{"seeds": 1}, {"seeds": 2}]}))
    assert fake.ran == ["acks=1,min_insync=1", "acks=1,min_insync=2", "acks=all,min_insync=1",
                        "acks=all,min_insync=2", "seed=1", "seed=2"]
    assert statuses(tmp_path) == [
        ("done", False, None), ("failed", None, "RuntimeError: boom second line"),
        ("failed", None, "cluster did not start"), ("failed", None, "the run left no results.json"),
        ("failed", None, "results.json unreadable: unexpected end of data: line 1 column 14 (char 13)"),
        ("done", "unknown", None)]
    spec = orjson.loads((tmp_path / "cells" / "acks=all,min_insync=2" / "test.json").read_bytes())
    assert (spec["producer"]["acks"], spec["topic"]["min_insync_replicas"], spec["name"]) == ("all", 2, "t")
    assert manifest.exit_code == 2
    assert (tmp_path / "matrix.yaml").exists()


def test_a_rerun_runs_only_what_is_not_done_and_replaces_its_directory(tmp_path: Path) -> None:
    run(tmp_path, FakeRuns({1: "raise", 3: "unknown"}))
    stale = tmp_path / "cells" / "acks=1,min_insync=2" / "left-over"
    stale.write_text("from the failed attempt")
    again = FakeRuns()
    manifest = run(tmp_path, again)
    assert again.ran == ["acks=1,min_insync=2"]  # done cells stay done, "unknown" included
    assert not stale.exists()
    assert [s for s, _, _ in statuses(tmp_path)] == ["done"] * 4
    assert manifest.exit_code == 2  # one cell's verdict is unknown
    third = FakeRuns()
    assert run(tmp_path, third).exit_code == 2
    assert third.ran == []


def test_a_done_cell_run_under_another_config_runs_again(tmp_path: Path) -> None:
    """The matrix is the same but what it expands to changed since the cell ran (a default
    of faultline's, a rule such as idempotence following acks): the cell kept its old run,
    and one sweep held runs of one cell key under two configs."""
    run(tmp_path, FakeRuns())
    stored = tmp_path / "cells" / "acks=1,min_insync=2" / "test.json"
    old = orjson.loads(stored.read_bytes())
    old["workload"]["rate"] = old["workload"]["rate"] + 1000.0  # the default of an older faultline
    old["start_wall_ms"] = 1764000000000  # set by the run: no config change
    stored.write_bytes(orjson.dumps(old))
    other = tmp_path / "cells" / "acks=all,min_insync=1" / "test.json"
    other.write_bytes(orjson.dumps({**orjson.loads(other.read_bytes()), "start_wall_ms": 1764000000000}))
    again = FakeRuns()
    assert run(tmp_path, again).exit_code == 0
    assert again.ran == ["acks=1,min_insync=2"]
    gone = tmp_path / "cells" / "acks=all,min_insync=2" / "test.json"
    gone.unlink()
    third = FakeRuns()
    run(tmp_path, third)
    assert third.ran == ["acks=all,min_insync=2"], "no test.json: what it ran is not known"


def test_ctrl_c_keeps_the_finished_cells_and_records_the_interrupted_one(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeRuns({1: "ctrl-c"}))
    assert statuses(tmp_path) == [("done", True, None), ("failed", None, "interrupted"),
                                  ("pending", None, None), ("pending", None, None)]
    again = FakeRuns()
    assert run(tmp_path, again).exit_code == 0
    assert again.ran == ["acks=1,min_insync=2", "acks=all,min_insync=1", "acks=all,min_insync=2"]


def test_a_cell_a_crash_left_running_or_whose_results_are_gone_runs_again(tmp_path: Path) -> None:
    m = matrix()
    (tmp_path / "cells" / m.cells[0].id).mkdir(parents=True)
    (tmp_path / "cells" / m.cells[0].id / "results.json").write_text("{}")
    (tmp_path / "cells" / m.cells[0].id / "test.json").write_bytes(orjson.dumps(m.cells[0].spec.to_json()))
    (tmp_path / "cells" / m.cells[1].id).mkdir(parents=True)
    (tmp_path / "cells" / m.cells[3].id).mkdir(parents=True)  # Ctrl-C during its report
    (tmp_path / "cells" / m.cells[3].id / "results.json").write_text("{}")
    t = [f"2026-11-23T16:0{i}:00Z" for i in range(5)]
    before = Manifest("t", t[0], [
        CellState(m.cells[0].id, m.cells[0].axes, "done", True, None, t[0], t[1]),
        CellState(m.cells[1].id, m.cells[1].axes, "done", True, None, t[1], t[2]),
        CellState(m.cells[2].id, m.cells[2].axes, "running", None, None, t[2], None),
        CellState(m.cells[3].id, m.cells[3].axes, "failed", None, "interrupted", t[3], t[4]),
    ])
    after = plan(m, before, tmp_path)
    assert [c.status for c in after.cells] == ["done", "pending", "pending", "pending"]
    assert after.created == "2026-11-23T16:00:00Z"
    assert [c.started for c in after.cells] == ["2026-11-23T16:00:00Z", None, None, None]


def test_the_manifest_round_trips_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    run(tmp_path, FakeRuns())
    loaded = load(tmp_path)
    assert loaded is not None
    assert loaded.to_json() == orjson.loads((tmp_path / "sweep.json").read_bytes())
    (tmp_path / "sweep.json").write_text('{"version": 1, "name": "t"}')
    with pytest.raises(HistoryError, match=r"sweep\.json: not a sweep manifest"):
        load(tmp_path)
    assert load(tmp_path / "nowhere") is None


def test_a_manifest_cell_whose_axes_are_no_mapping_is_one_line(tmp_path: Path) -> None:
    """Found in use: "axes": "ab" (dict("ab"): ValueError) was a traceback, "internal error"."""
    run(tmp_path, FakeRuns())
    data = orjson.loads((tmp_path / "sweep.json").read_bytes())
    data["cells"][0]["axes"] = "ab"
    (tmp_path / "sweep.json").write_bytes(orjson.dumps(data))
    with pytest.raises(HistoryError, match=r"sweep\.json: not a sweep manifest"):
        load(tmp_path)


def test_a_directory_of_another_matrix_is_refused(tmp_path: Path) -> None:
    run(tmp_path, FakeRuns())
    other = matrix({**MATRIX, "axes": {"acks": ["0"]}})
    with pytest.raises(SpecError, match=r"holds the sweep of another matrix .*choose another --out"):
        runner.prepare(other, tmp_path)


def test_the_disk_estimate_refuses_with_the_figure(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cells = matrix().cells
    per_s = runner.RUN_BYTES_PER_S + runner.FULL_SPEED_SENDS_PER_S * runner.HISTORY_BYTES_PER_SEND
    assert runner.disk_needed(cells) == 4 * 10 * per_s
    lines = 4 * 10 * runner.FULL_SPEED_SENDS_PER_S * runner.HISTORY_LINES_PER_SEND
    tables = lines * runner.ANALYSIS_BYTES_PER_LINE
    assert runner.disk_needed(cells[:1], cells) == 10 * per_s + tables, "the analysis of every cell"
    runner.check_disk(tmp_path / "new" / "dir", cells, cells)  # 86 MB and 272 MB of tables fit
    need = (10 * per_s + lines * 10**11) / 1e9
    monkeypatch.setattr(runner, "ANALYSIS_BYTES_PER_LINE", 10**11)
    with pytest.raises(SetupError, match=rf"needs about {need:.1f} GB for 1 cell\(s\) and the analysis "
                                         rf"of 4 .* has [\d.]+ GB free"):
        runner.check_disk(tmp_path / "new" / "dir", cells[:1], cells)


def test_a_rate_limited_cell_needs_less() -> None:
    slow = matrix({**MATRIX, "defaults": {"time_limit_s": 10, "workload": {"rate": 100}}}).cells
    assert runner.disk_needed(slow) == 4 * 10 * (runner.RUN_BYTES_PER_S + 100 * runner.HISTORY_BYTES_PER_SEND)
    assert runner.analysis_s(slow, 2) == 4 * 10 * 100 * runner.HISTORY_LINES_PER_SEND / (
        runner.ANALYSIS_LINES_PER_CORE_S * 2)
    fast = matrix({**MATRIX, "defaults": {"time_limit_s": 10, "workload": {"rate": 10**9}}}).cells
    assert runner.disk_needed(fast) == runner.disk_needed(matrix().cells)
    assert runner.analysis_s(fast, 1) == runner.analysis_s(matrix().cells, 1) > runner.analysis_s(slow, 1)


def test_the_eta_counts_what_is_left_at_the_measured_overhead() -> None:
    m = matrix()
    manifest = plan(m, None, Path("/nonexistent"))
    progress = runner._Progress(Console(file=io.StringIO()), manifest, {c.id: c for c in m.cells})
    assert progress.eta_s() == pytest.approx(4 * (10 + runner.CELL_OVERHEAD_S), abs=1)
    manifest.cells[0].status = "done"
    progress._overheads.append(20.0)
    assert progress.eta_s() == pytest.approx(3 * (10 + 20), abs=1)




def _abort(spec: TestSpec, run_dir: Path, errors: multiprocessing.Queue[str | None]) -> None:
    run_dir.mkdir(parents=True)
    os.abort()  # as librdkafka's failed assertions do


def _finish_run(spec: TestSpec, run_dir: Path, errors: multiprocessing.Queue[str | None]) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(f'{{"valid": true, "seed": {spec.seed}}}')
    errors.put(None)


def test_a_cell_whose_process_dies_is_an_error_and_the_sweep_goes_on(tmp_path: Path) -> None:
    spec = TestSpec(seed=7)
    died = runner.run_isolated(spec, run_dir=tmp_path / "a", target=_abort)
    assert died.error == "the run's process died of signal SIGABRT"
    ran = runner.run_isolated(spec, run_dir=tmp_path / "b", target=_finish_run)
    assert ran.error is None
    assert orjson.loads((tmp_path / "b" / "results.json").read_bytes())["seed"] == 7


def test_a_full_disk_while_the_matrix_is_copied_leaves_the_sweep_resumable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy of the matrix is rewritten on every rerun: a write that fails half-way
    left it empty, and every later rerun refused the directory as another matrix's."""
    run(tmp_path, FakeRuns({1: "raise"}))
    real_open = io.open

    def full_disk(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, mode, *args, **kwargs)
        if "w" in mode:
            f.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return f

    monkeypatch.setattr(io, "open", full_disk)
    with pytest.raises(FaultlineError, match=r"matrix\.yaml: cannot write: No space left on device"):
        run(tmp_path, FakeRuns())
    monkeypatch.undo()
    again = FakeRuns()
    run(tmp_path, again)
    assert again.ran == ["acks=1,min_insync=2"]


def test_two_sweeps_started_in_one_second_are_two_sweeps(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's id is its name and when it was created; ``created`` was written to the
    second, so a backfill running ``faultline nightly --date`` for past nights at once
    made sweeps of one id, and every later night's analysis (over every night so far)
    refused them as "the same sweep"."""
    ticks = iter(datetime(2026, 11, 23, 2, 0, 0, us, tzinfo=UTC) for us in (100000, 200000))

    class Clock:
        @staticmethod
        def now(tz: Any) -> datetime:
            return next(ticks)

    monkeypatch.setattr(manifest_module, "datetime", Clock)
    dirs = []
    for night in ("2026-11-20", "2026-11-21"):
        d = tmp_path / night / "sweep"
        d.mkdir(parents=True)
        runner.prepare(matrix(), d, night).save(d)
        SWEEP.validate(orjson.loads((d / "sweep.json").read_bytes()))
        dirs.append(d)
    sweeps = read_sweeps(dirs)
    assert [s.night for s in sweeps] == ["2026-11-20", "2026-11-21"]
    assert [s.id for s in sweeps] == ["t-20261123T020000100000Z", "t-20261123T020000200000Z"]


def test_a_nightly_sweep_keeps_its_night_when_resumed(tmp_path: Path) -> None:
    """The night a nightly names is saved, and a resume that names none (``faultline
    sweep`` on the nightly's directory) keeps it; a night that is no string is refused."""
    m = matrix()
    runner.prepare(m, tmp_path, "2026-11-22").save(tmp_path)
    assert orjson.loads((tmp_path / "sweep.json").read_bytes())["night"] == "2026-11-22"
    assert runner.prepare(m, tmp_path).night == "2026-11-22"
    assert runner.prepare(m, tmp_path, "2026-11-23").night == "2026-11-23"
    data = orjson.loads((tmp_path / "sweep.json").read_bytes())
    (tmp_path / "sweep.json").write_bytes(orjson.dumps({**data, "night": 20261122}))
    with pytest.raises(HistoryError, match=r"sweep\.json: not a sweep manifest"):
        load(tmp_path)
