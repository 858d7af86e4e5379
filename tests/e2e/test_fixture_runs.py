"""The stored runs the report tests read (report_runs.make_run) are runs a real `faultline
run` could leave: every file validates against its schema, and the white-box files give
the white-box checks something to check. (test_report_size's large run is the one-kill
kind, scaled up; validating its 100k lines would take a minute.)"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.report_runs import Scenario, make_run
from tests.schemas import validate_run_dir

EVERY_FILE = ["test.json", "results.json", "history.jsonl", "observations.jsonl", "metadata.jsonl"]

#: Every kind of stored run the suite makes (see the callers of make_run).
SCENARIOS = {
    "one-kill": (Scenario(), True, EVERY_FILE),
    "short-kill": (Scenario(duration_s=12, kills=((5.0, 2, 3.0),)), True, EVERY_FILE),
    "no-fault": (Scenario(duration_s=12, kills=(), lost_per_kill=0), True, EVERY_FILE),
    "no-white-box": (Scenario(duration_s=12, kills=((5.0, 2, 3.0),), metadata=False, observations=False),
                     True, EVERY_FILE[:3]),
    "minimal-results": (Scenario(duration_s=12, kills=((5.0, 2, 3.0),)), False, EVERY_FILE),
    "many-kills": (Scenario(duration_s=24, kills=((4.0, 1, 5.0), (14.0, 3, 4.0)), lost_per_kill=3),
                   True, EVERY_FILE),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_file_of_a_stored_run_validates(tmp_path: Path, name: str) -> None:
    scenario, use_checker, files = SCENARIOS[name]
    run = make_run(tmp_path / name, scenario, use_checker=use_checker)
    assert validate_run_dir(run.path) == files


def test_the_white_box_checks_have_something_to_check(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r")
    white = json.loads((run.path / "results.json").read_text())["white_box"]
    invariants = {i["name"]: i for i in white["invariants"]}
    for name in ("hw-le-leo", "hw-monotonic", "leader-from-isr-or-elr"):
        assert invariants[name]["status"] == "pass" and invariants[name]["checked"] > 0, invariants[name]
    # the killed node (2) falls behind while it is out of the ISR, then catches up
    lines = [json.loads(raw) for raw in (run.path / "observations.jsonl").read_text().splitlines()]
    behind = [s for s in lines if s["partition"] == 1 and s["leo"]["2"] < s["hw"]]
    assert behind and all(2 not in s["isr"] for s in behind)
    assert lines[-1]["leo"] == dict.fromkeys(("1", "2", "3"), lines[-1]["hw"])


def test_a_line_a_real_run_cannot_write_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", Scenario(duration_s=12, kills=((5.0, 2, 3.0),)))
    path = run.path / "observations.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    del first["replicas"]
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(jsonschema.ValidationError, match=r"observations\.jsonl: 'replicas' is a required"):
        validate_run_dir(run.path)
