"""The report of a real stored run with faults (``data/kill-partition``: ``faultline run
--nemesis kill,partition --time-limit 20 --rate 40 --interval 5 --seed 3`` on a local
3-node cluster, its broker logs and report left out). Its files are what the harness
writes, so this is the report on input no fixture script made up."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from faultline.cli import main
from faultline.history import read_history
from faultline.report.page import load_run, plot_data
from faultline.rundir import GROUP_FILE
from tests.schemas import RUN_FILES, validate_run_dir

pytestmark = pytest.mark.e2e

STORED = Path(__file__).parent / "data" / "kill-partition"
VERDICT = {True: "valid", False: "invalid", "unknown": "unknown"}


def stored_run(tmp_path: Path, history: str) -> Path:
    """A copy of the stored run with its history as ``history`` (plain or compressed)."""
    run_dir = tmp_path / "run"
    shutil.copytree(STORED, run_dir)
    if history == "history.jsonl.zst":
        plain = run_dir / "history.jsonl"
        (run_dir / history).write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
        plain.unlink()
    return run_dir


@pytest.mark.parametrize("history", ["history.jsonl", "history.jsonl.zst"])
def test_the_stored_run_validates(tmp_path: Path, history: str) -> None:
    run_dir = stored_run(tmp_path, history)
    assert validate_run_dir(run_dir) == [n for n in RUN_FILES
                                        if n != GROUP_FILE and (not n.startswith("history") or n == history)]


@pytest.mark.parametrize("history", ["history.jsonl", "history.jsonl.zst"])
def test_its_report_shows_the_faults_the_verdict_and_the_broker_state(tmp_path: Path, history: str) -> None:
    run_dir = stored_run(tmp_path, history)
    result = CliRunner().invoke(main, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(run_dir / "report.html")
    html = (run_dir / "report.html").read_text()
    results = json.loads((run_dir / "results.json").read_text())
    assert f'data-verdict="{VERDICT[results["valid"]]}"' in html
    # one row per fault the nemesis took, named as the history names it
    taken = [op.f for op in read_history(run_dir)
             if op.process == "nemesis" and op.f in ("kill", "partition") and "result" in (op.value or {})]
    assert {"kill", "partition"} <= set(taken)
    rows = [row.split("</td>", 1)[0].rsplit(">", 1)[1] for row in html.split('<tr class="fault">')[1:]]
    assert sorted(rows) == sorted(taken), rows
    # the white box as results.json has it: each invariant's status, each election
    white = results["white_box"]
    for inv in white["invariants"]:
        assert f'data-invariant="{inv["name"]}" data-status="{inv["status"]}"' in html, inv["name"]
    assert html.count('<tr class="election') == len(white["leader_changes"]) > 0


def test_the_partitions_table_counts_every_lost_write_and_says_why(tmp_path: Path) -> None:
    """The count comes from the checker's per-partition counts, not from the examples
    results.json keeps (at most 1000); the reason is that partition's own."""
    run_dir = tmp_path / "run"
    shutil.copytree(STORED, run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    p0 = results["partitions"][0]
    p0["anomaly_counts"] = {"lost-write": 155039}
    p0["permitted_reasons"] = {"lost-write": "acks=1 and a fault hit the partition's leader"}
    p0["faults"] = ["data-loss>=1", "data-loss>=2", "kill", "leader-fault"]
    results["anomalies"]["lost-write"] = []
    (run_dir / "results.json").write_text(json.dumps(results))
    assert CliRunner().invoke(main, ["report", str(run_dir)]).exit_code == 0
    html = (run_dir / "report.html").read_text()
    row = html[html.index(f"<td>{p0['topic']}/{p0['partition']}</td>"):]
    row = row[:row.index("</tr>")]
    assert '<td class="num">155039</td>' in row
    assert "acks=1 and a fault hit the partition&#39;s leader" in row
    assert "kill, leader faulted or moved, data destroyed on 2 at once" in row


def test_a_high_watermark_that_could_not_be_read_is_drawn_as_a_gap_not_as_zero(tmp_path: Path) -> None:
    """During the kill, fl-queue/1's samples could not read the HW (``hw: null``, 96
    before and after): drawn as 0, the HW plot would show it fall to 0 and come back, a
    regression the brokers never had (and hw-monotonic says held)."""
    obs = [json.loads(x) for x in (STORED / "observations.jsonl").read_text().splitlines()]
    unread = {round(s["time"] / 1e9, 9) for s in obs if s["partition"] == 1 and s["hw"] is None}
    assert unread
    run = load_run(stored_run(tmp_path, "history.jsonl"))
    trace = plot_data(run, [], {}).traces["fl-queue/1"]
    hws = dict(zip(trace.time, trace.hw, strict=True))
    assert all(hws[round(t, 9)] is None for t in unread)
    assert 0 not in [hw for t, hw in hws.items() if t > min(unread)]
