"""``faultline check RUN_DIR`` and check_run: exit codes, results.json, one-line errors."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import faultline
from faultline.checkers import queue, stored
from faultline.checkers.result import Result
from faultline.checkers.results_file import check_run, write_results
from faultline.checkers.stored import check_stored
from faultline.cli import main
from faultline.errors import FaultlineError, HistoryError, SpecError
from faultline.history import iter_rows, latest_time
from faultline.report.page import load_run, render_report
from faultline.rundir import MAX_LINE_BYTES
from faultline.spec import TestSpec
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec


def run_dir(tmp_path: Path, h: H, *, acks: str = "all", tail: bytes = b"") -> Path:
    (tmp_path / "test.json").write_bytes(orjson.dumps(make_spec(acks=acks).to_json()))
    (tmp_path / "history.jsonl").write_bytes(
        b"".join(orjson.dumps(o.to_dict()) + b"\n" for o in h.ops) + tail)
    return tmp_path


def ok_history() -> H:
    h = H()
    h.send(0, 10, offset=0)
    h.poll(5, [(0, 10)])
    h.drain([(0, 10)])
    return h


def lossy_history() -> H:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault("kill", leaders={f"{TOPIC}/0": 1})
    h.drain([(0, 10)])
    return h


def invoke(d: Path) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["check", str(d)])
    return r.exit_code, r.output


def test_valid_exits_0_and_writes_results(tmp_path: Path) -> None:
    code, out = invoke(run_dir(tmp_path, ok_history()))
    assert code == 0 and out.startswith("VALID")
    data = orjson.loads((tmp_path / "results.json").read_bytes())
    assert data["valid"] is True and data["stats"]["send"] == {"ok": 1, "fail": 0, "info": 0}
    assert not list(tmp_path.glob(".results.*"))


def test_invalid_exits_1(tmp_path: Path) -> None:
    code, out = invoke(run_dir(tmp_path, lossy_history()))
    assert code == 1 and "INVALID" in out and "violations (not permitted): lost-write" in out


def test_python_m_faultline_cli_check_exits_with_the_verdict(tmp_path: Path) -> None:
    """``python -m faultline.cli check`` is the command, not a silent exit 0 (a nightly
    script that calls it so must not read every run as valid)."""
    run = str(run_dir(tmp_path, lossy_history()))
    done = subprocess.run([sys.executable, "-m", "faultline.cli", "check", run],
                          capture_output=True, text=True, cwd=Path(__file__).parents[3], timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("INVALID") and (tmp_path / "results.json").is_file()


def test_permitted_loss_exits_0(tmp_path: Path) -> None:
    code, _ = invoke(run_dir(tmp_path, lossy_history(), acks="1"))
    assert code == 0


def test_a_cut_last_line_gives_unknown_and_exit_2(tmp_path: Path) -> None:
    code, out = invoke(run_dir(tmp_path, ok_history(), tail=b'{"index": 9, "ti'))
    assert code == 2 and "UNKNOWN" in out and "truncated-history" in out
    data = orjson.loads((tmp_path / "results.json").read_bytes())
    assert data["valid"] == "unknown" and data["unknown"][0]["kind"] == "truncated-history"


def test_a_cut_history_with_a_violation_stays_invalid(tmp_path: Path) -> None:
    code, _ = invoke(run_dir(tmp_path, lossy_history(), tail=b'{"index"'))
    assert code == 1


def test_a_corrupt_line_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    d = run_dir(tmp_path, ok_history())
    lines = (d / "history.jsonl").read_bytes().splitlines(keepends=True)
    lines[2] = b"garbage\n"
    (d / "history.jsonl").write_bytes(b"".join(lines))
    code, out = invoke(d)
    assert code == 2
    assert out.strip().splitlines() == [
        f"faultline: error: {d / 'history.jsonl'}:3: not valid JSON "
        + out.split("not valid JSON ", 1)[1].strip()]
    assert orjson.loads((d / "results.json").read_bytes())["valid"] == "unknown"


def test_a_bad_test_json_is_a_spec_error(tmp_path: Path) -> None:
    d = run_dir(tmp_path, ok_history())
    (d / "test.json").write_bytes(b'{"topic": {"partitions": "x"}}')
    code, out = invoke(d)
    assert code == 2 and "test.json" in out and "topic.partitions" in out
    with pytest.raises(SpecError):
        check_run(d)


def test_a_test_json_with_extra_keys_loads(tmp_path: Path) -> None:
    """docs/history.md welcomes extra keys in a stored test.json (a later version's, a tool's)."""
    d = run_dir(tmp_path, ok_history())
    data = orjson.loads((d / "test.json").read_bytes())
    data["annotations"] = {"by": "a tool"}
    data["topic"]["future_setting"] = 1
    (d / "test.json").write_bytes(orjson.dumps(data))
    assert TestSpec.load(d / "test.json") == make_spec()
    assert check_run(d).valid is True


def test_unreadable_test_json_is_one_spec_error_line(tmp_path: Path) -> None:
    (tmp_path / "test.json").write_bytes(b"{nope")
    with pytest.raises(SpecError, match=r"test\.json: not valid JSON") as e:
        TestSpec.load(tmp_path / "test.json")
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match=r"absent\.json: cannot read"):
        TestSpec.load(tmp_path / "absent.json")


def test_a_missing_run_directory(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not a run directory"):
        check_run(tmp_path / "nope")
    (tmp_path / "test.json").write_bytes(orjson.dumps(make_spec().to_json()))
    code, out = invoke(tmp_path)
    assert code == 2 and "history.jsonl.zst: missing (nor history.jsonl)" in out


def test_check_run_returns_the_result(tmp_path: Path) -> None:
    r = check_run(run_dir(tmp_path, lossy_history()))
    assert r.valid is False and r.anomaly_counts["lost-write"] == 1


def test_results_are_replaced_atomically(tmp_path: Path) -> None:
    write_results(tmp_path, Result(valid=True))
    write_results(tmp_path, Result(valid=False))
    assert orjson.loads((tmp_path / "results.json").read_bytes())["valid"] is False
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_the_metadata_logs_isr_decides_whether_two_wipes_overlapped(tmp_path: Path) -> None:
    """Two wipes, one on each of two nodes, and a lost write (acks=all, min.insync=2):
    permitted while both nodes may have lost their data at once, a violation once
    metadata.jsonl shows the first node back in the ISR before the second wipe."""
    h = H()
    h.send(0, 10, offset=0)
    h.fault("wipe", [1], leaders={f"{TOPIC}/0": 1})
    h.t = 10 * 10**9
    h.fault("wipe", [2])
    h.fault("pause", [3])  # issue 17: with node 3 never faulted, it would keep the write
    h.drain([])
    d = run_dir(tmp_path, h)
    assert check_run(d).valid is True

    def isr(offset: int, t_s: int, nodes: list[int]) -> bytes:
        return orjson.dumps({"offset": offset, "time": t_s * 10**9, "type": "partition-change",
                             "topic": TOPIC, "partition": 0, "leader": 3, "isr": nodes}) + b"\n"

    (d / "metadata.jsonl").write_bytes(isr(1, 2, [2, 3]) + isr(2, 5, [1, 2, 3]))
    result = check_run(d)
    assert result.valid is False and result.violations == ["lost-write"]


def test_the_reports_own_check_agrees_with_faultline_check(tmp_path: Path) -> None:
    """A run without results.json is checked in memory by the report; on a wipe run whose
    metadata log decides the verdict, that check and ``faultline check`` must agree."""
    h = H()
    h.send(0, 10, offset=0)
    h.fault("wipe", [1])
    h.t = 10 * 10**9
    h.fault("wipe", [2])
    h.drain([])
    d = run_dir(tmp_path, h)
    (d / "metadata.jsonl").write_bytes(b"".join(
        orjson.dumps({"offset": i, "time": t * 10**9, "type": "partition-change", "topic": TOPIC,
                      "partition": 0, "leader": 3, "isr": isr}) + b"\n"
        for i, (t, isr) in enumerate([(2, [2, 3]), (5, [1, 2, 3])])))
    in_memory = load_run(d).results
    assert not (d / "results.json").exists()  # the report wrote nothing
    stored = check_run(d).to_json()
    assert in_memory["valid"] is stored["valid"] is False
    assert in_memory["partitions"] == stored["partitions"]
    assert in_memory["white_box"] == stored["white_box"]


def test_a_checker_failure_is_unknown_never_a_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(queue.Engine, "_values", boom)
    r = check_run(run_dir(tmp_path, lossy_history()))
    assert r.valid == "unknown" and r.unknown[0]["kind"] == "checker-error"
    assert "the queue checker failed: RuntimeError: bug" in r.unknown[0]["why"]
    assert invoke(tmp_path)[0] == 2


def test_a_workload_without_a_checker_is_one_line(tmp_path: Path) -> None:
    d = run_dir(tmp_path, ok_history())
    spec = orjson.loads((d / "test.json").read_bytes())
    (d / "test.json").write_bytes(orjson.dumps({**spec, "workload": {**spec["workload"], "name": "bank"}}))
    code, out = invoke(d)
    assert code == 2 and out.strip() == ("faultline: error: no checker for workload 'bank'; "
                                         "checkers: queue, txn, group")


@pytest.mark.parametrize(("command", "blocked"), [("check", "results.json"),
                                                   ("check", "history.sends.parquet"),
                                                   ("report", "report.html")])
def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path, command: str, blocked: str) -> None:
    """Found in use: a results.json, table or report.html that could not be written (here a
    directory of that name; a full disk alike) ended in a traceback, "internal error"."""
    d = run_dir(tmp_path, ok_history())
    (d / blocked).mkdir()
    r = CliRunner().invoke(main, [command, str(d)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert f"{blocked}: cannot write" in r.output
    assert not list(d.glob(".*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize("field", [{"stats": "x"}, {"stats": {"send": 5}}, {"permitted": 5},
                                   {"violations": 5}, {"unknown": 3}, {"anomalies": {"lost-write": 5}},
                                   # found by review: these crashed the report too
                                   {"violations": [{"a": 1}]}, {"permitted": [["lost-write"]]},
                                   {"permitted_reasons": ["x"]}, {"forbidden_reasons": "x"}])
def test_report_refuses_a_results_json_of_wrong_types_in_one_line(
        tmp_path: Path, field: dict[str, Any]) -> None:
    """Found in use: a stored results.json whose listed fields had the wrong type crashed
    the report (AttributeError / TypeError, "internal error")."""
    d = run_dir(tmp_path, ok_history())
    check_run(d)
    data = orjson.loads((d / "results.json").read_bytes())
    (d / "results.json").write_bytes(orjson.dumps({**data, **field}))
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert "results.json: " + next(iter(field)) in r.output
    assert not (d / "report.html").exists()


def test_a_stored_test_json_out_of_range_names_the_file(tmp_path: Path) -> None:
    """Found in use: ``faultline check`` on a test.json with partitions -3 said only
    "--partitions must be at least 1", an option the user never gave."""
    d = run_dir(tmp_path, ok_history())
    (d / "test.json").write_bytes(b'{"topic": {"partitions": -3}}')
    code, out = invoke(d)
    assert code == 2 and f"{d / 'test.json'}: --partitions must be between 1 and 10000, not -3" in out


def test_a_directory_that_is_no_run_gets_no_results_json(tmp_path: Path) -> None:
    """Found in use: ``faultline check`` on a directory with none of a run's files (a typo,
    the results root) wrote a results.json into it."""
    code, out = invoke(tmp_path)
    assert code == 2 and "test.json: cannot read" in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["history.jsonl", "history.jsonl.zst"])
def test_a_history_that_is_no_file_is_named_so_not_missing(tmp_path: Path, name: str) -> None:
    """Found by review: a run directory whose history was a directory was said to have none
    ("missing (nor history.jsonl): is this a run directory?"), by check and report alike."""
    d = run_dir(tmp_path, ok_history())
    (d / "history.jsonl").unlink()
    (d / name).mkdir()
    for command in ("check", "report"):
        r = CliRunner().invoke(main, [command, str(d)])
        assert r.exit_code == 2, r.output
        assert r.output.strip() == f"faultline: error: {d / name}: not a regular file", r.output


def test_a_test_json_that_is_no_file_is_named_so_by_the_report(tmp_path: Path) -> None:
    """Found by review: the report called a test.json that is a directory "missing"."""
    d = run_dir(tmp_path, ok_history())
    (d / "test.json").unlink()
    (d / "test.json").mkdir()
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2 and f"{d / 'test.json'}: cannot read: Is a directory" in r.output, r.output


@pytest.mark.parametrize("fields", ['"partition": "0"', '"partition": [0]', '"partition": null',
                                    '"partition": 0, "leader": "n1"', '"partition": 0, "hw": "5"',
                                    '"partition": 0, "isr": 3'])
def test_report_refuses_observations_of_wrong_types_in_one_line(tmp_path: Path, fields: str) -> None:
    """Found by review: an observations.jsonl line whose partition, leader or HW was no
    integer (or ISR no list) crashed the report ("internal error")."""
    d = run_dir(tmp_path, ok_history())
    (d / "observations.jsonl").write_text(f'{{"time": 1, "topic": "{TOPIC}", {fields}}}\n')
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2, r.output
    assert "observations.jsonl:1: expected an object with time, topic, partition" in r.output
    assert "internal error" not in r.output and not (d / "report.html").exists()


def _sample(t: int, hw: int) -> bytes:
    return orjson.dumps({"time": t, "topic": TOPIC, "partition": 0, "leader": 1, "isr": [1],
                         "replicas": [1], "hw": hw, "leo": {"1": hw}, "hw_checkpoint": {"1": hw}})


def test_report_reads_observations_up_to_a_cut_last_line_and_says_so(tmp_path: Path) -> None:
    """Found by review: a run that died writing observations.jsonl (a last line cut
    mid-write, which the history's reader takes for the end of its prefix) could not be
    reported at all. The page draws the samples before the cut and names the cut line."""
    d = run_dir(tmp_path, ok_history())
    (d / "observations.jsonl").write_bytes(_sample(1, 0) + b"\n" + _sample(2, 1) + b"\n" + _sample(3, 1)[:30])
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 0, r.output
    run = load_run(d)
    assert ([x["time"] for x in run.observations[(TOPIC, 0)]], run.observations_cut) == ([1, 2], 3)
    assert run.results["white_box"]["errors"] == [
        f"{d / 'observations.jsonl'}:3: the last line was cut (the run died writing it); "
        "only the lines before it were checked"]
    assert "its line 3 was cut\nmid-write (the run died writing it)" in (d / "report.html").read_text()


def test_report_refuses_a_cut_line_that_is_not_the_last_in_one_line(tmp_path: Path) -> None:
    d = run_dir(tmp_path, ok_history())
    (d / "observations.jsonl").write_bytes(_sample(1, 0)[:30] + b"\n" + _sample(2, 1) + b"\n")
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert line.startswith(f"faultline: error: {d / 'observations.jsonl'}:1: not valid JSON"), line
    assert not (d / "report.html").exists()


def test_an_unreadable_history_in_a_run_that_cannot_take_results_names_both(tmp_path: Path) -> None:
    """Found by review: a corrupt history in a run whose results.json could not be written
    said only "results.json: cannot write", hiding what was wrong with the run."""
    d = run_dir(tmp_path, ok_history(), tail=b"garbage\n")
    (d / "results.json").mkdir()
    code, out = invoke(d)
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert f"{d / 'history.jsonl'}:7: not valid JSON" in out and "results.json: cannot write" in out


@pytest.mark.parametrize("drop", ["producer", "producer.acks", "topic.min_insync_replicas"])
def test_a_test_json_that_lacks_the_config_is_refused_not_defaulted(tmp_path: Path, drop: str) -> None:
    """Found by review: a test.json without its producer section (or acks) was read with the
    default acks=all, and an acks=1 run's permitted loss was reported a violation (exit 1)."""
    d = run_dir(tmp_path, lossy_history(), acks="1")
    assert invoke(d)[0] == 0
    data = orjson.loads((d / "test.json").read_bytes())
    section, _, key = drop.partition(".")
    del (data[section] if key else data)[key or section]
    (d / "test.json").write_bytes(orjson.dumps(data))
    code, out = invoke(d)
    assert code == 2, out
    assert out.strip().splitlines()[0] == (f"faultline: error: {d / 'test.json'}: lacks {drop}, which every "
                                           "test.json holds (docs/history.md)")


@pytest.mark.parametrize("name", ["test.json", "metadata.jsonl", "cluster.json"])
def test_a_fifo_in_the_run_directory_is_not_read(tmp_path: Path, name: str) -> None:
    """Found by review: check and report read a FIFO named test.json (or metadata.jsonl,
    cluster.json) and waited for a writer forever."""
    d = run_dir(tmp_path, ok_history())
    (d / name).unlink(missing_ok=True)
    os.mkfifo(d / name)
    for command, code in (("check", 2), ("report", 0 if name != "test.json" else 2)):
        done = subprocess.run([sys.executable, "-m", "faultline.cli", command, str(d)],
                              capture_output=True, text=True, cwd=Path(__file__).parents[3], timeout=60)
        assert done.returncode == code, (command, done.stdout, done.stderr)
        if name == "test.json":
            assert done.stderr.strip() == f"faultline: error: {d / name}: not a regular file"
        elif command == "check":
            assert "unknown: broker-state-unreadable" in done.stdout, done.stdout


def test_report_refuses_a_results_json_of_another_history(tmp_path: Path) -> None:
    """Found by review: results.json said nothing of the history it judged, and the report
    showed its verdict beside any history: here a run checked valid, then its history
    re-written with a forbidden loss, was reported VALID. results.json names its history
    (file, size, digest of its end), and the report refuses one that does not match."""
    d = run_dir(tmp_path, ok_history())
    assert check_run(d).valid is True
    run_dir(tmp_path, lossy_history())  # the same run directory, another history
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2, r.output
    assert r.output.strip().startswith(f"faultline: error: {d / 'results.json'}: judged history.jsonl")
    assert "faultline check" in r.output and len(r.output.strip().splitlines()) == 1
    assert not (d / "report.html").exists()
    assert check_run(d).valid is False  # checked again, it is the report's
    assert load_run(d).results["valid"] is False


def test_a_followed_check_that_fails_names_the_history_as_closed(tmp_path: Path, monkeypatch: Any) -> None:
    """Found in a run: a followed check whose checker failed early wrote results.json at
    once, naming the history as it was then, half written; the run's report then refused
    it as another history's. It names the history once the run has closed it."""
    d = run_dir(tmp_path, ok_history())
    history = d / "history.jsonl"

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a checker bug")

    monkeypatch.setitem(stored.CHECKERS, "queue", broken)
    closed = threading.Event()

    def write() -> None:  # the run goes on writing, then closes the history
        for _ in range(3):
            time.sleep(0.1)
            with history.open("ab") as fh:
                fh.write(b" \n")
        closed.set()

    writer = threading.Thread(target=write)
    writer.start()
    follow = closed.is_set
    assert check_run(d, follow=follow).valid == "unknown"
    results = orjson.loads((d / "results.json").read_bytes())
    assert results["history"]["bytes"] == history.stat().st_size
    writer.join()
    assert CliRunner().invoke(main, ["report", str(d)]).exit_code == 0


def _partition_line(offset: int, **fields: Any) -> bytes:
    return orjson.dumps({"offset": offset, "time": 0, "type": "partition-change", "topic": TOPIC,
                         "partition": 0, "leader": 1, "isr": [1, 2, 3], "raw": {}, **fields}) + b"\n"


def test_a_metadata_line_whose_isr_is_no_list_is_unknown_naming_file_and_line(tmp_path: Path) -> None:
    """Issue 33: ``"isr": 3`` on a metadata.jsonl line ended the check in an internal error,
    exit 2 and no results.json; it is a broker-state file that does not conform."""
    d = run_dir(tmp_path, lossy_history(), acks="1")
    (d / "metadata.jsonl").write_bytes(_partition_line(1) + b"\n" + _partition_line(2, isr=3))
    code, out = invoke(d)
    assert code == 2 and out.startswith("UNKNOWN"), out
    data = orjson.loads((d / "results.json").read_bytes())
    (entry,) = [u for u in data["unknown"] if u["kind"] == "broker-state-unreadable"]
    assert data["valid"] == "unknown" and entry["affects_verdict"] is True
    assert f"{d / 'metadata.jsonl'}:3: isr: expected an array or null, got 3" in entry["why"]


def test_running_out_of_memory_is_one_line_and_keeps_the_stored_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a check that ran out of memory saved a ``checker-error`` unknown
    over the run's verdict, as if the checker had a bug."""
    d = run_dir(tmp_path, lossy_history())
    check_run(d)
    before = (d / "results.json").read_bytes()

    def no_memory(*args: Any, **kwargs: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(queue.Engine, "_values", no_memory)
    r = CliRunner().invoke(main, ["check", str(d)])
    assert r.exit_code == 2 and r.output == (
        "faultline: error: out of memory (the machine's, or this process's limit); "
        "the step that ran out saved nothing\n")
    assert (d / "results.json").read_bytes() == before


@pytest.mark.parametrize("name", ["history.jsonl", "history.jsonl.zst"])
def test_a_history_line_past_the_limit_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    """The checker's own reader refuses a line past docs/history.md's limit as iter_rows does."""
    d = run_dir(tmp_path, ok_history())
    data = (d / "history.jsonl").read_bytes()
    (d / "history.jsonl").unlink()
    pad = b'{"index":6,"time":7000000,"process":"nemesis","type":"info","f":"kill","value":"'
    data += pad + b"x" * (MAX_LINE_BYTES - len(pad)) + b'"}\n'
    (d / name).write_bytes(zstandard.ZstdCompressor().compress(data) if name.endswith(".zst") else data)
    code, out = invoke(d)
    assert code == 2 and out == (f"faultline: error: {d / name}:7: a line longer than {MAX_LINE_BYTES} "
                                 "bytes (docs/history.md's limit): no run writes one\n")


@pytest.mark.parametrize("name", ["history.jsonl", "history.jsonl.zst"])
def test_an_op_later_than_the_test_allows_is_one_line_naming_it_and_the_limit(tmp_path: Path,
                                                                              name: str) -> None:
    """Found by review: one op at time 9e18 made the checker build about 9e9 throughput
    buckets (and the report as many). The test allows its time limit plus a day."""
    d = run_dir(tmp_path, ok_history())
    data = (d / "history.jsonl").read_bytes()
    (d / "history.jsonl").unlink()
    latest = latest_time(TestSpec.load(d / "test.json").time_limit_s)

    def late(t: int) -> bytes:
        return b"".join(orjson.dumps({"index": 6 + i, "time": t, "process": 0, "type": typ, "f": "send",
                                      "value": {"topic": TOPIC, "partition": 0, "value": 11, **extra}})
                        + b"\n" for i, (typ, extra) in enumerate([("invoke", {}), ("ok", {"offset": 1})]))

    def write(t: int) -> None:
        (d / name).write_bytes(zstandard.ZstdCompressor().compress(data + late(t))
                               if name.endswith(".zst") else data + late(t))

    write(latest)  # read and judged (an ack after the drain began is set aside: unknown)
    assert "past the test's time limit" not in invoke(d)[1]
    assert orjson.loads((d / "results.json").read_bytes())["unknown"][0]["kind"] != "unreadable-input"
    write(latest + 1)
    code, out = invoke(d)
    assert code == 2 and out == (f"faultline: error: {d / name}:7: time {latest + 1} ns is past the "
                                 "test's time limit (60 s, test.json) plus 86400 s: no run journals an "
                                 "op that late\n")
    assert orjson.loads((d / "results.json").read_bytes())["unknown"][0]["kind"] == "unreadable-input"
    with pytest.raises(HistoryError, match=rf":7: time {latest + 1} ns is past"):  # the rows' reader
        check_stored(d, iter_rows(d / name))


@pytest.mark.parametrize("stored", [False, True])
@pytest.mark.parametrize("late", [1, 9 * 10**18])
def test_the_report_of_a_run_with_an_op_later_than_the_test_allows_is_one_line(
        tmp_path: Path, stored: bool, late: int) -> None:
    """Found by review: an op at time 9e18 crashed ``faultline report`` with a MemoryError
    traceback (about 9e9 buckets of a second)."""
    d = run_dir(tmp_path, ok_history())
    t = late if late > 1 else latest_time(60.0) + late
    with (d / "history.jsonl").open("ab") as fh:
        fh.write(orjson.dumps({"index": 6, "time": t, "process": "nemesis", "type": "info", "f": "kill",
                               "value": {"nodes": [1]}}) + b"\n")
    if stored:
        assert invoke(d)[0] == 2
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2 and r.output == (
        f"faultline: error: {d / 'history.jsonl'}:7: time {t} ns is past the test's time limit (60 s, "
        "test.json) plus 86400 s: no run journals an op that late\n")


def test_the_report_refuses_a_bucket_width_that_makes_too_many_buckets(tmp_path: Path) -> None:
    """Found by review: ``measures.bucket_ns: 1`` in results.json crashed the report with a
    MemoryError traceback (a bucket per nanosecond of the run)."""
    d = run_dir(tmp_path, ok_history())
    check_run(d)
    data = orjson.loads((d / "results.json").read_bytes())
    data["measures"]["bucket_ns"] = 1
    (d / "results.json").write_bytes(orjson.dumps(data))
    r = CliRunner().invoke(main, ["report", str(d)])
    assert r.exit_code == 2 and r.output == (
        f"faultline: error: {d / 'results.json'}: measures.bucket_ns 1 makes 6000001 buckets over the "
        f"run's 0.006 s (its history.sends.parquet), and a report draws at most 1000000: "
        f"`faultline check {d}` judges the run again\n")
    assert not (d / "report.html").exists()


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (keys and list indexes)."""
    yield at
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from _paths(v, (*at, k))


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                     | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                  max_size=3),
                     max_leaves=6)


def test_no_value_of_a_stored_results_json_crashes_the_report(tmp_path: Path) -> None:
    """Found by review: wrong types in a stored results.json's ``measures`` or
    ``partitions`` (and ``causes``) crashed the report. Any one value replaced by any JSON
    value, or removed: the page is drawn, or the report says in one line what is wrong."""
    d = run_dir(tmp_path, lossy_history())
    check_run(d)
    (d / "metadata.jsonl").touch()  # the page's "Broker state" section too
    stored = orjson.loads((d / "results.json").read_bytes())
    schema = orjson.loads((Path(faultline.__file__).parent / "schemas" / "results.schema.json").read_bytes())
    paths = [p for p in _paths(stored) if p] + [(k,) for k in schema["properties"] if k not in stored]

    @settings(max_examples=10, deadline=None, database=None)
    @given(st.sampled_from(paths), st.one_of(st.just(_REMOVED), _JSON))
    def mutated(path: tuple[Any, ...], value: Any) -> None:
        data = orjson.loads(orjson.dumps(stored))
        inner = data
        for k in path[:-1]:
            inner = inner[k]
        if value is _REMOVED:
            if isinstance(inner, list):
                del inner[path[-1]]
            else:
                inner.pop(path[-1], None)  # a schema key the stored results.json lacks stays absent
        else:
            inner[path[-1]] = value
        (d / "results.json").write_bytes(orjson.dumps(data))
        with contextlib.suppress(FaultlineError):
            render_report(load_run(d))

    mutated()


_REMOVED = object()
