"""``faultline analyze`` on bad input: one line and exit 2, before Spark starts."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from faultline.cli import main


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
