"""The checker on Spark's executors: each run's directory -> :func:`check_stored_table`.

The pipeline's task for a run (``mapInArrow``, :func:`faultline.analysis.pipeline.analyze`)
calls :func:`check_run`, which calls :func:`faultline.checkers.stored.check_stored_table` on its
directory: the one check of a stored run that ``faultline check`` runs, reading the
history file as it does (the compiled scanner, :mod:`faultline.checkers.scan`) and the
run's other files (``test.json``, the broker's state) beside it. So both give the same
verdict, by construction, and a test holds them to it.

Per run, not per partition: the queue checker decides a run in one pass (its measures,
fault windows and verdict span every partition; a poll returns records of several),
so a run is the unit it can be given without a second implementation of how per-partition
verdicts compose. From the same pass come the history's figures the tables need
(:data:`CHECK_SCHEMA`): its lines, whether its last one was cut, the span of its sends
and the latency of every ok send (its ok's time minus its invoke's).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from faultline.analysis.aggregate import latency_ms, pack
from faultline.checkers.stored import check_stored_table
from faultline.checkers.table import HistoryDigest
from faultline.errors import FaultlineError

#: The row :func:`check_run` returns per run (a dict, null columns absent): the verdict
#: (``true`` / ``false`` / ``unknown``), the whole results.json object as JSON, or the error that stopped the
#: check; and, when the check read the whole history, its lines, whether its last one was
#: cut (``truncated``), the first send invoke and the last send op (ns; null without
#: sends), the p50 and p99 latency of its ok sends (ms) and every one of those latencies
#: (ns, packed: :func:`faultline.analysis.aggregate.pack`).
CHECK_SCHEMA = pa.schema([
    pa.field("sweep", pa.string()), pa.field("run", pa.string()), pa.field("valid", pa.string()),
    pa.field("result_json", pa.string()), pa.field("error", pa.string()),
    pa.field("lines", pa.int64()), pa.field("truncated", pa.bool_()),
    pa.field("first_send", pa.int64()), pa.field("last_send", pa.int64()),
    pa.field("p50_ms", pa.float64()), pa.field("p99_ms", pa.float64()),
    pa.field("latency_ns", pa.binary()),
])
CHECK_DDL = ("sweep string, run string, valid string, result_json string, error string, lines long, "
             "truncated boolean, first_send long, last_send long, p50_ms double, p99_ms double, "
             "latency_ns binary")


def valid_text(valid: object) -> str:
    """``true``, ``false`` or ``unknown``: results.json's ``valid`` as a string column holds it."""
    return "true" if valid is True else "false" if valid is False else "unknown"


def check_run(r: Mapping[str, str]) -> dict[str, Any]:
    """A run's (sweep, run, run_dir) -> its :data:`CHECK_SCHEMA` row (a dict), on an executor,
    which must be able to read the run directory."""
    row: dict[str, Any] = {"sweep": r["sweep"], "run": r["run"], "valid": "unknown"}
    try:
        result, table = check_stored_table(Path(r["run_dir"]))
    except FaultlineError as e:
        row["error"] = str(e)
    else:
        data = result.to_json()
        row.update(valid=valid_text(data["valid"]), result_json=orjson.dumps(data).decode())
        if table is not None:
            latency = _latencies(table)
            p50, p99 = latency_ms(latency)
            row.update(lines=table.ops, truncated=table.truncated, first_send=table.first_send,
                       last_send=table.last_send if len(table.sends) else None, p50_ms=p50,
                       p99_ms=p99, latency_ns=pack(latency))
    return row


def _latencies(table: HistoryDigest) -> npt.NDArray[np.int64]:
    """Every ok send's latency (ns) from the check's table of a history's sends."""
    s = table.sends
    ok = s.outcome == 1
    latency: npt.NDArray[np.int64] = (s.end_time[ok] - s.invoke_time[ok]).astype(np.int64)
    return latency
