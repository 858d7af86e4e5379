"""`faultline run`: spec building, option validation, the run directory."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.errors import SpecError
from faultline.harness.run_cli import build_spec
from faultline.harness.runner import RunOutcome, new_run_dir
from faultline.workloads.queue import WorkloadStats, decode_value


def test_defaults_are_the_default_test() -> None:
    spec = build_spec(None, {})
    assert (spec.kafka.nodes, spec.producer.acks, spec.topic.min_insync_replicas) == (3, "all", 2)
    assert spec.producer.enable_idempotence and spec.nemesis.faults == ()


def test_options_override_the_file(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("name: from-file\ntopic:\n  partitions: 5\n  min_insync_replicas: 1\n"
                 "start_wall_ms: 123\n")
    spec = build_spec(f, {"topic": {"partitions": 2, "min_insync_replicas": None},
                          "nemesis": {"faults": ["kill"]}})
    assert spec.name == "from-file"
    assert (spec.topic.partitions, spec.topic.min_insync_replicas) == (2, 1)
    assert spec.nemesis.faults == ("kill",)
    assert spec.start_wall_ms == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--min-insync", "4"], "--min-insync must be between 1 and the replication factor 3, not 4"),
    (["--replication-factor", "5"], "--replication-factor must be between 1 and the node count"),
    (["--acks", "1"], "pass --no-idempotence"),
    (["--nodes", "2"], "--nodes must be 1, 3 or 5"),
    (["--nemesis", "kill,flood"], "unknown fault(s) flood"),
    (["--time-limit", "0"], "--time-limit must be positive"),
])
def test_a_bad_option_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("topic: [\n")
    with pytest.raises(SpecError, match=r"bad\.yaml: not valid YAML \(line 2\)"):
        build_spec(f, {})


def test_run_dir_and_latest(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = new_run_dir(tmp_path, "t", now)
    b = new_run_dir(tmp_path, "t", now)
    assert a == tmp_path / "t" / "20260102T030405Z"
    assert b == tmp_path / "t" / "20260102T030405Z-1"
    assert (tmp_path / "latest").resolve() == b.resolve()
    assert not (tmp_path / "latest").readlink().is_absolute()


@pytest.mark.parametrize(("valid", "error", "code"), [
    (True, None, 0), (False, None, 1), ("unknown", None, 2), (None, None, 2), (True, "boom", 2),
])
def test_exit_codes(valid: bool | str | None, error: str | None, code: int) -> None:
    outcome = RunOutcome(Path("."), valid, WorkloadStats(), error=error)  # type: ignore[arg-type]
    assert outcome.exit_code == code


@pytest.mark.parametrize(("raw", "value"), [
    (b"17", 17), (b"0", 0), (b"007", "007"), (b"-3", "-3"), (b" 1", " 1"), (b"x", "x"),
    (b"\xff", "\\xff"), (None, None), ("٣".encode(), "٣"),
])
def test_record_values(raw: bytes | None, value: int | str | None) -> None:
    assert decode_value(raw) == value
