"""The run's check done while the run goes on (:class:`faultline.run.runner._LiveCheck`):
its child process never outlives the run, whether the run ends by Ctrl-C or is killed.
(That its verdict is the stored run's: tests/integration/test_run_faulted.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from faultline.spec import TestSpec
from tests.processes import alive

#: A run that has begun: test.json, a history being written, the live check started.
RUN = """
import sys, time
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.run.runner import _LiveCheck
run_dir = Path(sys.argv[1])
history = HistoryWriter(run_dir / "history.jsonl.zst")
history.append(0, "invoke", "send", {"topic": "fl-queue", "partition": 0, "value": 0})
with _LiveCheck(run_dir) as live:
    print(live._child.pid, flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_the_checking_child_ends_with_the_run(tmp_path: Path, how: signal.Signals) -> None:
    (tmp_path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    run = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path)], stdout=subprocess.PIPE,
                           text=True)
    assert run.stdout is not None
    child = int(run.stdout.readline())
    time.sleep(1.0)
    assert alive(child), "it follows the history while the run goes on"
    run.send_signal(how)
    run.wait(30)  # bounds generous for a loaded machine: the test is that it ends, not how fast
    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), f"the checking child outlived a run ended by {how.name}"
    assert not (tmp_path / "results.json").exists(), "a run that did not finish gets no verdict"


#: A run whose history turns out malformed (a completion with no invoke), checked by the
#: live check once the history is closed.
MALFORMED = """
import sys
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.run.runner import _LiveCheck
run_dir = Path(sys.argv[1])
history = HistoryWriter(run_dir / "history.jsonl.zst")
with _LiveCheck(run_dir) as live:
    history.append(0, "ok", "send", {"topic": "fl-queue", "partition": 0, "value": 7, "offset": 0})
    history.close()
    print(live.verdict())
"""


def test_what_the_checking_child_logs_goes_to_the_runs_log(tmp_path: Path) -> None:
    (tmp_path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    done = subprocess.run([sys.executable, "-c", MALFORMED, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == "('unknown', None)"
    assert "has no open invoke" in (tmp_path / "faultline.log").read_text()
    assert "has no open invoke" not in done.stderr, "the terminal belongs to the progress line"
    assert orjson.loads((tmp_path / "results.json").read_bytes())["valid"] == "unknown"


#: A run checked and reported by the live check; prints the verdict, the report's path
#: and whether the run itself imported the report's code.
REPORTED = """
import sys
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.run.runner import _LiveCheck
run_dir = Path(sys.argv[1])
history = HistoryWriter(run_dir / "history.jsonl.zst")
with _LiveCheck(run_dir) as live:
    history.append(0, "invoke", "send", {"topic": "fl-queue", "partition": 0, "value": 7})
    history.append(0, "ok", "send", {"topic": "fl-queue", "partition": 0, "value": 7, "offset": 0})
    history.close()
    print(live.verdict()[0], live.report(), "faultline.report.page" in sys.modules)
"""


def test_the_checking_child_builds_the_report(tmp_path: Path) -> None:
    """The run waits for the report after its main phase; the child, which imported the
    report's code while the run went on, builds it, and the run never imports it."""
    (tmp_path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    done = subprocess.run([sys.executable, "-c", REPORTED, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.split() == ["unknown", str(tmp_path / "report.html"), "False"]
    assert "fl-queue" in (tmp_path / "report.html").read_text()
    assert orjson.loads((tmp_path / "results.json").read_bytes())["valid"] == "unknown"


#: A run whose drain is done: the live check's niceness before and after ``hurry``.
HURRIED = """
import os, sys, time
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.run.runner import _LiveCheck
run_dir = Path(sys.argv[1])
history = HistoryWriter(run_dir / "history.jsonl.zst")
with _LiveCheck(run_dir) as live:
    pid = live._child.pid
    deadline = time.monotonic() + 30
    while os.getpriority(os.PRIO_PROCESS, pid) != 19 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = os.getpriority(os.PRIO_PROCESS, pid)
    live.hurry()
    print(before, os.getpriority(os.PRIO_PROCESS, pid), os.getpriority(os.PRIO_PROCESS, 0))
    history.close()
"""


def test_the_checking_child_gets_the_runs_priority_once_the_drain_is_done(tmp_path: Path) -> None:
    """At nice 19 the live check leaves the machine to the test and its drain; then the run waits
    for it, so it gets the run's own priority (we run as root: raising it is allowed)."""
    (tmp_path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    done = subprocess.run([sys.executable, "-c", HURRIED, str(tmp_path)], capture_output=True,
                          text=True, timeout=90, check=True)
    during, after, run = (int(x) for x in done.stdout.split())
    assert during == 19
    assert after == run
