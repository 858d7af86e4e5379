"""faultline.rundir: the bounds of its JSON-lines readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from faultline.errors import HistoryError
from faultline.rundir import MAX_LINE_BYTES, read_jsonl, read_jsonl_prefix


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
