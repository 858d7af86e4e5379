"""write_atomic's files get the mode a plain ``open()`` gives under the process's umask
(issue 41: they were 0600 whatever the umask, so a report was for root's eyes only)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultline.rundir import write_atomic


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
                         ids=["umask-022", "umask-077", "umask-002"],
                         indirect=["umask"])
def test_a_written_file_has_the_mode_the_umask_gives(umask: int, mode: int, tmp_path: Path) -> None:
    written = write_atomic(tmp_path / "results.json", b"{}")
    assert stat.S_IMODE(written.stat().st_mode) == mode
    with open(tmp_path / "plain", "wb"):
        pass
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == mode
    assert written.read_bytes() == b"{}" and sorted(p.name for p in tmp_path.iterdir()) == [
        "plain", "results.json"]


def test_a_rewrite_takes_the_mode_of_now(tmp_path: Path) -> None:
    """The file is replaced, not rewritten in place: its mode is that of the new file."""
    before = os.umask(0o077)
    try:
        write_atomic(tmp_path / "report.html", b"a")
    finally:
        os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.html", [b"b", b"c"])
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644
    assert (tmp_path / "report.html").read_bytes() == b"bc"
