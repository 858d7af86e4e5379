"""`faultline report RUN_DIR`: (re)builds report.html from a stored run; a bad run
directory is one line and exit code 2."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.checkers.results_file import check_run
from faultline.cli import main
from faultline.rundir import IDENTITY_TAIL
from tests.e2e.report_runs import Scenario, StoredRun, make_run
from tests.report_html import example_values, stories

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> StoredRun:
    return make_run(tmp_path_factory.mktemp("runs") / "base", Scenario(duration_s=12, kills=((5.0, 2, 3.0),)))


def _copy(base: StoredRun, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(base.path, dst)
    (dst / "report.html").unlink(missing_ok=True)
    return dst


def _report(run_dir: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["report", str(run_dir)])
    return result.exit_code, result.stdout, result.stderr


def test_builds_and_prints_the_path(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    code, out, _ = _report(run_dir)
    assert code == 0
    assert out.strip() == str(run_dir / "report.html")
    html = (run_dir / "report.html").read_text()
    assert 'data-verdict="invalid"' in html and 'id="traces"' in html
    assert list(run_dir.glob(".report.html.*")) == []  # written through a temporary file


def test_rebuilds_after_results_change(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    assert _report(run_dir)[0] == 0
    results = json.loads((run_dir / "results.json").read_text())
    results.update(valid=True, violations=[], permitted=["lost-write", "inconsistent-offsets"],
                   permitted_reasons={"lost-write": "acks=1 and a leader was faulted",
                                      "inconsistent-offsets": "acks=1 and a leader was faulted"})
    (run_dir / "results.json").write_text(json.dumps(results))
    assert _report(run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert 'data-verdict="valid"' in html
    assert "1 acknowledged write lost" in html and "acks=1 and a leader was faulted" in html


def test_unchecked_run_without_observations(base: StoredRun, tmp_path: Path) -> None:
    """No results.json: the report checks the history in memory and writes nothing else."""
    run_dir = _copy(base, tmp_path)
    (run_dir / "results.json").unlink()
    (run_dir / "observations.jsonl").unlink()
    assert _report(run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert 'data-verdict="invalid"' in html and "1 acknowledged write lost" in html
    assert "This run has no <code>results.json</code>" in html
    assert not (run_dir / "results.json").exists()
    assert 'id="traces"' not in html and 'href="results.json"' not in html
    assert 'class="fault"' in html  # the fault bands come from the history alone


def test_truncated_history_still_reports(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    hist = run_dir / "history.jsonl"
    hist.write_bytes(hist.read_bytes()[:-20])
    assert _report(run_dir)[0] == 2  # its results.json judged the whole history
    check_run(run_dir)
    assert _report(run_dir)[0] == 0
    assert "history cut short" in (run_dir / "report.html").read_text()


@pytest.mark.parametrize("damage, message", [
    ("no-dir", "not a run directory"),
    ("no-test-json", "test.json: missing"),
    ("bad-spec", "test.json.topic.partitions: expected an integer"),
    ("no-history", "history.jsonl.zst: missing (nor history.jsonl)"),
    ("bad-history", "history.jsonl:3: not valid JSON"),
    ("bad-results", "results.json: not valid JSON"),
])
def test_bad_run_dir_is_one_line_exit_2(base: StoredRun, tmp_path: Path, damage: str, message: str) -> None:
    run_dir = _copy(base, tmp_path)
    if damage == "no-dir":
        run_dir = tmp_path / "absent"
    elif damage == "no-test-json":
        (run_dir / "test.json").unlink()
    elif damage == "bad-spec":
        (run_dir / "test.json").write_text(json.dumps({"topic": {"partitions": "x"}}))
    elif damage == "no-history":
        (run_dir / "history.jsonl").unlink()
    elif damage == "bad-history":  # of a run not checked yet: the report reads it
        (run_dir / "results.json").unlink()
        lines = (run_dir / "history.jsonl").read_text().splitlines(keepends=True)
        lines[2] = "{not json\n"
        (run_dir / "history.jsonl").write_text("".join(lines))
    elif damage == "bad-results":
        (run_dir / "results.json").write_text("{")
    code, _, err = _report(run_dir)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("faultline: error: ") and message in err, err
    assert not (run_dir / "report.html").exists()


def test_minimal_results_show_their_examples_own_fields(tmp_path: Path) -> None:
    """A results.json with docs/history.md's fields only: no measures, no stories. The
    examples show their own fields; no story is made up for them."""
    run = make_run(tmp_path / "run", Scenario(duration_s=12, kills=((5.0, 2, 3.0),)), use_checker=False)
    assert _report(run.path)[0] == 0
    html = (run.path / "report.html").read_text()
    (lost,) = run.lost
    row = html.split(f'data-anomaly="lost-write" data-value="{lost["value"]}"', 1)[1].split("</tr>", 1)[0]
    assert f"<td>{lost['offset']}</td>" in row and f"<td>{lost['value']}</td>" in row
    at = example_values(html, "lost-write").index(str(lost["value"]))
    assert stories(html)["lost-write"][at] == [[], ""]
    assert 'class="fault"' in html  # the fault windows still come from the in-memory check


def test_a_test_json_with_extra_keys_is_reported(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    spec = json.loads((run_dir / "test.json").read_text())
    (run_dir / "test.json").write_text(json.dumps({**spec, "written_by": "a later version"}))
    assert _report(run_dir)[0] == 0


def test_unknown_verdict_says_why(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    results.update(valid="unknown", violations=[], anomaly_counts=dict.fromkeys(results["anomaly_counts"], 0),
                   anomalies={}, unknown=[{"kind": "incomplete-drain", "topic": "fl-queue", "partition": 1,
                                           "affects_verdict": True, "why": "no ok drain with last: true"}])
    (run_dir / "results.json").write_text(json.dumps(results))
    assert _report(run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert 'data-verdict="unknown"' in html and "data loss undecided" in html
    assert "incomplete-drain fl-queue/1: no ok drain with last: true" in html


def test_broker_state_only_with_a_metadata_log(base: StoredRun, tmp_path: Path) -> None:
    run_dir = _copy(base, tmp_path)
    assert _report(run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert 'id="broker-state"' in html and 'data-white-box="valid"' in html
    assert 'data-invariant="leader-from-isr-or-elr" data-status="pass"' in html
    assert 'class="election" data-kind="isr"' in html and "n2 → n3" in html
    (run_dir / "metadata.jsonl").unlink()
    assert _report(run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert 'id="broker-state"' not in html and 'href="#broker-state"' not in html


def test_broker_state_from_an_older_results_json(base: StoredRun, tmp_path: Path) -> None:
    """results.json without white_box: the report checks the white-box files in memory."""
    run_dir = _copy(base, tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    del results["white_box"]
    (run_dir / "results.json").write_text(json.dumps(results))
    assert _report(run_dir)[0] == 0
    assert 'data-kind="isr"' in (run_dir / "report.html").read_text()
    assert "white_box" not in json.loads((run_dir / "results.json").read_text())


def test_a_checked_run_is_reported_from_the_checkers_columns_not_its_history(base: StoredRun,
                                                                             tmp_path: Path) -> None:
    """``faultline check`` leaves the sends as columns beside results.json; the report reads
    them instead of the history, as long as the history is the one they were made from."""
    run_dir = _copy(base, tmp_path)
    check_run(run_dir)
    assert (run_dir / "history.sends.parquet").is_file()
    hist = run_dir / "history.jsonl"
    st = hist.stat()
    data = hist.read_bytes()
    tail = len(data) - IDENTITY_TAIL  # results.json names the history by its size and end
    assert tail > 0
    hist.write_bytes(b"x" * (tail - 1) + b"\n" + data[tail:])  # unreadable now, with the same size,
    os.utime(hist, ns=(st.st_atime_ns, st.st_mtime_ns))  # end and time
    assert _report(run_dir)[0] == 0
    assert 'data-verdict="invalid"' in (run_dir / "report.html").read_text()
    os.utime(hist, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # another history: read it
    code, _, err = _report(run_dir)
    assert code == 2 and "history.jsonl:1: not valid JSON" in err
