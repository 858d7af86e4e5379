"""The checker on Spark's executors: each run's ``ops`` rows -> :func:`check_stored`.

The pipeline groups the ``ops`` table by run and hands each group to
:func:`check_group` (``groupBy("sweep", "run").applyInArrow``), which turns the rows back
into the history's rows (:func:`faultline.analysis.rows.to_history_row`) and calls
:func:`faultline.checkers.stored.check_stored` with them: the one check of a stored run
that ``faultline check`` runs, reading the run's other files (``test.json``, the
broker's state) from its directory. So both give the same verdict, by construction,
and a test holds them to it.

Per run, not per partition: the queue checker decides a run in one pass (its measures,
fault windows and verdict span every partition; a poll returns records of several),
so a run is the unit it can be given without a second implementation of how per-partition
verdicts compose. Arrow rather than pandas on the way in: pandas turns a nullable int64
column into float64, and the checker must see the history's exact integers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import orjson
import pyarrow as pa

from faultline.analysis.rows import records, to_history_row
from faultline.checkers.stored import check_stored
from faultline.errors import FaultlineError

#: What :func:`check_group` returns per run: the verdict (``true`` / ``false`` /
#: ``unknown``), the whole results.json object as JSON, or the error that stopped the check.
CHECK_SCHEMA = pa.schema([
    pa.field("sweep", pa.string()), pa.field("run", pa.string()), pa.field("valid", pa.string()),
    pa.field("result_json", pa.string()), pa.field("error", pa.string()),
])
CHECK_DDL = "sweep string, run string, valid string, result_json string, error string"


def valid_text(valid: object) -> str:
    """``true``, ``false`` or ``unknown``: results.json's ``valid`` as a string column holds it."""
    return "true" if valid is True else "false" if valid is False else "unknown"


def check_group(run_dirs: Mapping[tuple[str, str], str]) -> Callable[[pa.Table], pa.Table]:
    """The function ``applyInArrow`` calls with one run's ``ops`` rows; ``run_dirs`` maps
    (sweep, run) to the run directory, which executors must be able to read."""

    def check(table: pa.Table) -> pa.Table:
        sweep, run = table.column("sweep")[0].as_py(), table.column("run")[0].as_py()
        recs = list(records(table))
        truncated = bool(recs and recs[0]["history_truncated"])
        try:
            result = check_stored(Path(run_dirs[(sweep, run)]), map(to_history_row, recs),
                                  truncated=truncated)
        except FaultlineError as e:
            row = {"sweep": sweep, "run": run, "valid": "unknown", "result_json": None, "error": str(e)}
        else:
            data = result.to_json()
            row = {"sweep": sweep, "run": run, "valid": valid_text(data["valid"]),
                   "result_json": orjson.dumps(data).decode(), "error": None}
        return pa.Table.from_pylist([row], schema=CHECK_SCHEMA)

    return check
