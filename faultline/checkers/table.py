"""The history's sends as columns, made by the checker's one pass and reused by the report.

The queue checker already holds every send in columns (one slot per send, in invoke
order). :class:`HistoryDigest` is those columns plus the few facts of the history
that are not about a send (its span, its op count, the errors of polls and drains), so
that the report, and any later pipeline, needs no second pass over a history of millions
of lines. ``faultline check`` stores it beside ``results.json`` as
``history.sends.parquet`` (:data:`faultline.rundir.SENDS_FILE`), one row per send:

============  =======================================================================
column        meaning
============  =======================================================================
value         the send's value (unique within the run)
part          the topic-partition, an index into the file's ``parts`` metadata
process       the client process
invoke_time   ns since the run started
end_time      ns of its completion; null while it never completed
outcome       0 never completed, 1 ok, 2 fail, 3 info
offset        the acknowledged offset; null without one (not ok, or acks=0)
error         the error of a fail / info completion; null without one
============  =======================================================================

The Parquet file's key-value metadata ``faultline`` holds the rest as JSON, with the
history file's name, size and mtime: :func:`read_digest` returns None for a digest made
from another history than the one now in the directory, which is then read again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from faultline.checkers.columns import NONE
from faultline.rundir import atomic_file

I64 = npt.NDArray[np.int64]
OUTCOMES: tuple[str | None, ...] = (None, "ok", "fail", "info")
_VERSION = 1
ROW_GROUP = 1 << 18


class Send(NamedTuple):
    """One send: its invoke and, when it completed, how (``outcome`` None while open)."""

    process: int
    value: Any
    topic: str
    partition: int
    invoke_time: int
    end_time: int | None = None
    outcome: str | None = None
    offset: int | None = None
    error: str | None = None

    @property
    def latency(self) -> int | None:
        """ns from invoke to completion, None if it never completed."""
        return None if self.end_time is None else self.end_time - self.invoke_time


@dataclass(slots=True)
class SendTable:
    """Every send as parallel columns, in invoke order; empty cells are :data:`NONE`
    (``error`` is an index into ``errors``, -1 for none; ``part`` into ``parts``)."""

    parts: list[tuple[str, int]]
    value: I64
    part: npt.NDArray[np.int32]
    process: I64
    invoke_time: I64
    end_time: I64
    outcome: npt.NDArray[np.int8]
    offset: I64
    error: npt.NDArray[np.int32]
    errors: list[str]
    _by_value: I64 | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.value)

    @staticmethod
    def of(sends: list[Send]) -> SendTable:
        """A table of ``sends`` (for tests and small histories)."""
        parts = sorted({(s.topic, s.partition) for s in sends})
        errors = sorted({s.error for s in sends if s.error is not None})

        def col(xs: list[Any], dtype: Any) -> Any:
            return np.array([NONE if x is None else x for x in xs], dtype=dtype)

        return SendTable(
            parts, col([s.value for s in sends], np.int64),
            col([parts.index((s.topic, s.partition)) for s in sends], np.int32),
            col([s.process for s in sends], np.int64), col([s.invoke_time for s in sends], np.int64),
            col([s.end_time for s in sends], np.int64),
            col([OUTCOMES.index(s.outcome) for s in sends], np.int8),
            col([s.offset for s in sends], np.int64),
            col([-1 if s.error is None else errors.index(s.error) for s in sends], np.int32),
            errors)

    def send(self, i: int) -> Send:
        """The send in row ``i``."""
        topic, partition = self.parts[int(self.part[i])]
        end, off, err = int(self.end_time[i]), int(self.offset[i]), int(self.error[i])
        return Send(int(self.process[i]), int(self.value[i]), topic, partition,
                    int(self.invoke_time[i]), None if end == NONE else end,
                    OUTCOMES[int(self.outcome[i])], None if off == NONE else off,
                    None if err < 0 else self.errors[err])

    def get(self, value: Any) -> Send | None:
        """The send of ``value``, or None."""
        if not isinstance(value, int) or not len(self.value):
            return None
        if self._by_value is None:
            self._by_value = np.argsort(self.value, kind="stable")
        i = int(np.searchsorted(self.value, value, sorter=self._by_value))
        if i < len(self.value) and int(self.value[self._by_value[i]]) == value:
            return self.send(int(self._by_value[i]))
        return None


@dataclass(slots=True)
class HistoryDigest:
    """What a report needs from a history, from the checker's pass.

    ``errors`` holds (time, f, kind) of every client completion that was not ok
    (sends, polls, drains), by time; ``first_send`` / ``last_send`` bound the sends
    (the first send invoke, the last send op); ``truncated``: the history was cut short.
    """

    sends: SendTable
    other_errors: list[tuple[int, str, str]]
    ops: int
    end_time: int
    first_send: int | None
    last_send: int
    truncated: bool

    @property
    def errors(self) -> list[tuple[int, str, str]]:
        """Every client completion that was not ok, as (time, f, kind), by time."""
        s = self.sends
        failed = np.flatnonzero(s.outcome >= 2)
        out = [(int(s.end_time[i]), "send",
                s.errors[int(s.error[i])] if s.error[i] >= 0 else f"{OUTCOMES[s.outcome[i]]} (no error)")
               for i in failed]
        out += self.other_errors
        out.sort(key=lambda e: e[0])
        return out


def write_digest(path: Path, digest: HistoryDigest, history: Path) -> Path:
    """Store ``digest``, made from the history file ``history``, as Parquet at ``path``
    (:func:`~faultline.rundir.atomic_file`); a FaultlineError naming ``path`` when it
    cannot be written."""
    s = digest.sends

    def nullable(a: I64) -> pa.Array:
        return pa.array(a, mask=a == NONE)

    st = os.stat(history)
    meta = {"version": _VERSION, "history": [history.name, st.st_size, st.st_mtime_ns],
            "parts": s.parts, "errors": s.errors, "other_errors": digest.other_errors,
            "ops": digest.ops, "end_time": digest.end_time, "first_send": digest.first_send,
            "last_send": digest.last_send, "truncated": digest.truncated}
    names = pa.array(s.errors, pa.string())

    def rows(lo: int, hi: int) -> pa.Table:
        return pa.table({
            "value": s.value[lo:hi], "part": s.part[lo:hi], "process": s.process[lo:hi],
            "invoke_time": s.invoke_time[lo:hi], "end_time": nullable(s.end_time[lo:hi]),
            "outcome": s.outcome[lo:hi], "offset": nullable(s.offset[lo:hi]),
            "error": pa.DictionaryArray.from_arrays(
                pa.array(s.error[lo:hi], mask=s.error[lo:hi] < 0), names),
        }).replace_schema_metadata({"faultline": orjson.dumps(meta)})

    # In row groups, so that memory stays one group's; only the errors, a few names,
    # are dictionary-encoded (a dictionary of a million distinct values costs more than it saves).
    with atomic_file(path) as fh, pq.ParquetWriter(fh, rows(0, 0).schema, compression="zstd",
                                                   use_dictionary=["error"]) as w:
        for lo in range(0, len(s), ROW_GROUP):
            w.write_table(rows(lo, lo + ROW_GROUP))
    return path


def read_digest(path: Path, history: Path) -> HistoryDigest | None:
    """The digest stored at ``path`` when it was made from ``history`` as it is now;
    None when there is none, it is unreadable, or the history changed since."""
    try:
        arrow = pq.read_table(path)
        meta = orjson.loads((arrow.schema.metadata or {})[b"faultline"])
        st = os.stat(history)
        if meta.get("version") != _VERSION or meta["history"] != [
                history.name, st.st_size, st.st_mtime_ns]:
            return None
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None

    def col(name: str, dtype: Any) -> Any:
        c = arrow.column(name).combine_chunks()
        return (c.fill_null(NONE) if c.null_count else c).to_numpy().astype(dtype)

    names = [str(e) for e in meta["errors"]]
    codes = pc.index_in(arrow.column("error").cast(pa.string()), value_set=pa.array(names, pa.string()))
    sends = SendTable(
        [(str(t), int(p)) for t, p in meta["parts"]], col("value", np.int64), col("part", np.int32),
        col("process", np.int64), col("invoke_time", np.int64), col("end_time", np.int64),
        col("outcome", np.int8), col("offset", np.int64),
        codes.combine_chunks().fill_null(-1).to_numpy().astype(np.int32), names)
    return HistoryDigest(sends, [(int(t), str(f), str(k)) for t, f, k in meta["other_errors"]],
                        meta["ops"], meta["end_time"], meta["first_send"], meta["last_send"],
                        meta["truncated"])
