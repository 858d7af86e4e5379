"""The `faultline model` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.cli import main


def test_list_names_every_scenario() -> None:
    res = CliRunner().invoke(main, ["model", "--list"])
    assert res.exit_code == 0
    assert "kip101-loss-hw" in res.output and "unclean-election-loss" in res.output


def test_scenario_table_and_json() -> None:
    res = CliRunner().invoke(main, ["model", "kip101-loss-hw"])
    assert res.exit_code == 0
    assert "lost-write" in res.output and "restart(2)" in res.output
    data = json.loads(CliRunner().invoke(main, ["model", "kip101-loss-epoch", "--json"]).output)
    assert data["anomalies"] == {}
    assert data["steps"][0]["phase"] == "start"
    assert set(data["steps"][1]["replicas"]["1"]) >= {"log", "leo", "hw", "role"}


def test_explore_one_cell() -> None:
    res = CliRunner().invoke(main, ["model", "--explore", "--acks", "1", "--faults", "kill,leader-fault",
                                     "--depth", "3", "--walks", "0", "--json"])
    assert res.exit_code == 0, res.output
    cells = json.loads(res.output)["cells"]
    (found,) = cells.values()
    assert found["lost-write"] == "produce crash(1)"


def test_bad_input_is_one_line_and_nonzero() -> None:
    for args in (["nope"], [], ["--explore", "--acks", "1", "--faults", "meteor"], ["--list", "--explore"]):
        res = CliRunner().invoke(main, ["model", *args])
        assert res.exit_code == 2, args
        assert "Traceback" not in res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)


def test_elr_scenario_shows_the_elr_column_and_explore_takes_elr() -> None:
    res = CliRunner().invoke(main, ["model", "elr-wipe-leader"])
    assert res.exit_code == 0
    head = next(line for line in res.output.splitlines() if line.startswith("#"))
    assert " ELR " in head and "elr=true" in res.output
    assert " ELR " not in CliRunner().invoke(main, ["model", "no-elr-wipe-leader"]).output
    args = ["--explore", "--acks", "all", "--min-insync", "2", "--faults", "kill,wipe,leader-fault",
            "--depth", "0", "--walks", "0", "--json"]
    for flag, suffix in (("--elr", " elr=true"), ("--no-elr", "")):
        out = CliRunner().invoke(main, ["model", *args, flag])
        assert out.exit_code == 0, out.output
        (key,) = json.loads(out.output)["cells"]
        assert key.endswith("faults=kill+leader-fault+wipe" + suffix)


@pytest.mark.parametrize(("args", "says"), [
    (["--explore", "--acks", "all", "--rf", "1", "--min-insync", "3"], "above the replication factor"),
    (["--explore", "--min-insync", "1"], "--min-insync needs --acks"),
    (["--explore", "--unclean"], "--unclean needs --acks"),
    (["acks1-failover-loss", "--acks", "all"], "--acks goes with --explore"),
    (["--list", "--depth", "2"], "--depth goes with --explore"),
])
def test_options_the_command_would_ignore_or_cannot_model_are_refused(args: list[str], says: str) -> None:
    """Found in use: --min-insync 3 with --rf 1 explored a config Kafka refuses and found
    nothing; config options without --acks, and explore options with a scenario, were
    silently ignored (the default matrix took minutes; the scenario ran its own config)."""
    res = CliRunner().invoke(main, ["model", *args])
    assert res.exit_code == 2, res.output
    assert says in res.output


@pytest.mark.parametrize(("faults", "says"), [("", "no fault kind given"), (" , ", "no fault kind given"),
                                              ("kill,meteor", "unknown fault kind(s) meteor;")])
def test_an_empty_or_unknown_fault_list_is_refused(faults: str, says: str) -> None:
    """Found by review: ``--faults ""`` explored the default faults (kill, leader-fault)
    as if the option had not been given, and said so nowhere."""
    res = CliRunner().invoke(main, ["model", "--explore", "--acks", "1", "--faults", faults, "--depth", "0",
                                     "--walks", "0"])
    assert res.exit_code == 2, res.output
    assert says in res.output and "kill+leader-fault" not in res.output


_WRITE_WITH_A_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from click.testing import CliRunner
import faultline.commands.model as cli
from faultline.cli import main
cli.TABLE_PATH = Path(sys.argv[1])
cli.explore_cell = lambda cell, bound: {}  # the write is what is tested, not the walk
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is EFBIG, as a full disk's ENOSPC
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
res = CliRunner().invoke(main, ["model", "--explore", "--write"])
print(res.exit_code, res.output.strip().splitlines()[-1])
"""


def test_explore_write_that_fails_midway_leaves_the_stored_table_as_it_was(tmp_path: Path) -> None:
    """Found by review: ``--write`` wrote the table in place, so a crash or a full disk
    midway left a cut, unreadable table.json in place of the stored one (which
    ``expected_outcome`` reads); it is written through a temporary file renamed over it,
    as the project's other files are."""
    table = tmp_path / "table.json"
    table.write_text('{"cells": {}}\n')
    done = subprocess.run([sys.executable, "-c", _WRITE_WITH_A_FULL_DISK, str(table)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert table.read_text() == '{"cells": {}}\n', done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]  # no temporary file left
    assert done.stdout.startswith("2 ") and "cannot write" in done.stdout, (done.stdout, done.stderr[-2000:])
