"""faultline.rundir: the modes of the files it writes (write_atomic's get the mode a plain
``open()`` gives under the process's umask: issue 41, they were 0600 whatever the umask,
so a report was for root's eyes only) and the bounds of its JSON-lines readers."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from faultline.errors import HistoryError
from faultline.rundir import MAX_LINE_BYTES, read_jsonl, read_jsonl_prefix, write_atomic


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


def sample(size: int) -> bytes:
    """An observation line of ``size`` bytes, newline included."""
    def of(pad: str) -> bytes:
        return orjson.dumps({"time": 1, "topic": "t", "partition": 0, "error": pad}) + b"\n"
    return of("x" * (size - len(of(""))))


def test_a_line_of_the_limit_is_read_and_a_longer_one_is_refused_naming_it(tmp_path: Path) -> None:
    """Found by review (as for the history): a line of any length was read whole, into
    memory, by every reader of observations.jsonl, metadata.jsonl and replicas.jsonl."""
    path = tmp_path / "observations.jsonl"
    path.write_bytes(sample(100) + sample(MAX_LINE_BYTES))
    assert len(read_jsonl(path)) == 2
    path.write_bytes(sample(100) + sample(MAX_LINE_BYTES + 1))
    for read in (read_jsonl, read_jsonl_prefix):
        with pytest.raises(HistoryError, match=rf"^{path}:2: a line longer than {MAX_LINE_BYTES} bytes "
                                               r"\(docs/history.md's limit\): no run writes one$"):
            read(path)


def test_a_line_there_is_no_memory_to_parse_is_no_invalid_line(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """As for the history: orjson's "Not enough memory" is the machine's, not the file's."""
    path = tmp_path / "metadata.jsonl"
    path.write_bytes(sample(100))

    def no_memory(raw: bytes) -> Any:
        raise orjson.JSONDecodeError("Not enough memory to allocate buffer for parsing", "", 0)

    monkeypatch.setattr(orjson, "loads", no_memory)
    with pytest.raises(MemoryError):
        read_jsonl(path)
