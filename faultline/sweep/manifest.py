"""``sweep.json``, the manifest of a sweep directory (docs/history.md, "Sweep directory"),
and what a rerun of a sweep does.

A cell is ``pending``, ``running``, ``done`` (its run finished and its ``results.json``
exists; ``valid`` copies its verdict) or ``failed`` (the harness could not run or check
it; ``error`` is one line saying why, ``interrupted`` after a Ctrl-C). The manifest is
rewritten atomically after every change of a cell's state, so a crash leaves the
previous state: at worst a cell ``running`` that no process runs.

A rerun (:func:`plan`) keeps every ``done`` cell whose ``results.json`` is still there
and whose ``test.json`` is the config the cell expands to now, and makes every other
cell ``pending`` again: a failed cell, a cell a crash left ``running``, a done cell
whose results were deleted, a done cell run under another config (the matrix is the
same, but a default or rule of faultline's changed since): one sweep's runs of one cell
are runs of one config.

A cell run on a Spark cluster (``faultline sweep --master``) says where in ``ran_on``
(:class:`RanOn`); a cell run here has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from faultline.checkers.result import Valid
from faultline.errors import HistoryError, SpecError
from faultline.rundir import RESULTS_FILE, TEST_FILE, write_atomic
from faultline.spec import TestSpec
from faultline.sweep.matrix import Matrix

MANIFEST_FILE = "sweep.json"
MATRIX_FILE = "matrix.yaml"
CELLS_DIR = "cells"
VERSION = 1

Status = Literal["pending", "running", "done", "failed"]
STATUSES: tuple[Status, ...] = ("pending", "running", "done", "failed")


def utc_now() -> str:
    """The time now as sweep.json writes it: UTC, ISO 8601, microseconds, ``Z``. Finer than
    seconds because a sweep's id is its name and ``created``: a backfill starts several
    nights' sweeps in one second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class RanOn:
    """Where a cell's run ran on a Spark cluster: the worker's host name, the id of the
    executor whose task ran it, and that task's attempt (0 the first; a later one reran
    the cell after an attempt was lost with its worker)."""

    host: str
    executor: str
    attempt: int

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "executor": self.executor, "attempt": self.attempt}


@dataclass(slots=True)
class CellState:
    """One cell's line of the manifest; ``run_dir`` is relative to the sweep directory.
    ``recipe`` and ``predicts``: a targeted run's, as :class:`~faultline.sweep.matrix.Cell`
    has them (None and empty for a random-seed run)."""

    id: str
    axes: Mapping[str, Any]
    status: Status = "pending"
    valid: Valid | None = None
    error: str | None = None
    started: str | None = None
    ended: str | None = None
    recipe: str | None = None
    predicts: tuple[str, ...] = ()
    ran_on: RanOn | None = None

    @property
    def run_dir(self) -> str:
        return f"{CELLS_DIR}/{self.id}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "axes": dict(self.axes), "status": self.status,
                "run_dir": self.run_dir, "valid": self.valid, "error": self.error,
                "started": self.started, "ended": self.ended, "recipe": self.recipe,
                "predicts": list(self.predicts),
                "ran_on": self.ran_on.to_json() if self.ran_on is not None else None}


@dataclass(slots=True)
class Manifest:
    """The whole of ``sweep.json``; ``night`` is the night (``YYYY-MM-DD``) a nightly sweep
    was run for, None for another sweep."""

    name: str
    created: str
    cells: list[CellState] = field(default_factory=list)
    night: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "name": self.name, "created": self.created, "night": self.night,
                "cells": [c.to_json() for c in self.cells]}

    def save(self, sweep_dir: Path) -> None:
        """Rewrite ``sweep_dir/sweep.json`` atomically."""
        write_atomic(sweep_dir / MANIFEST_FILE, orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2))

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cells if c.status == status)

    @property
    def exit_code(self) -> int:
        """0: every cell done and valid; 1: a cell invalid (a violation); 2: a cell failed,
        not run, or unknown."""
        if any(c.status != "done" or c.valid not in (True, False) for c in self.cells):
            return 2
        return 1 if any(c.valid is False for c in self.cells) else 0


def load(sweep_dir: Path) -> Manifest | None:
    """``sweep_dir/sweep.json``, or None when there is none; HistoryError naming the file
    when it is unreadable or not a manifest."""
    path = sweep_dir / MANIFEST_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as e:
        raise HistoryError(str(path), None, f"cannot read: {e.strerror}") from None
    except orjson.JSONDecodeError as e:
        raise HistoryError(str(path), None, f"not valid JSON ({e})") from None
    try:
        if data["version"] != VERSION:
            raise HistoryError(str(path), None, f"manifest version {data['version']}, "
                                                f"this faultline reads {VERSION}")
        # recipe, predicts and ran_on are absent in a sweep.json written before them
        cells = [CellState(str(c["id"]), dict(c["axes"]), c["status"], c["valid"], c["error"],
                           c["started"], c["ended"], c.get("recipe"), tuple(c.get("predicts") or ()),
                           _ran_on(c.get("ran_on")))
                 for c in data["cells"]]
        night = data.get("night")  # absent in a sweep.json written before it was
        if night is not None and not isinstance(night, str):
            raise TypeError("night")
        manifest = Manifest(str(data["name"]), str(data["created"]), cells, night)
    except (KeyError, TypeError, ValueError) as e:  # ValueError: "axes" not a mapping (dict("ab"))
        raise HistoryError(str(path), None, f"not a sweep manifest (at {e})") from None
    bad = [c.id for c in cells if c.status not in STATUSES]
    if bad:
        raise HistoryError(str(path), None, f"cell {bad[0]}: status is not one of {', '.join(STATUSES)}")
    return manifest


def _ran_on(data: Any) -> RanOn | None:
    if data is None:
        return None
    host, executor, attempt = data["host"], data["executor"], data["attempt"]
    if not isinstance(host, str) or not isinstance(executor, str) or not isinstance(attempt, int):
        raise TypeError("ran_on")
    return RanOn(host, executor, attempt)


def plan(matrix: Matrix, previous: Manifest | None, sweep_dir: Path, night: str | None = None) -> Manifest:
    """The manifest a (re)run of ``matrix`` starts from: the matrix's cells in order, each
    ``done`` as ``previous`` had it when its results.json exists and it ran as the cell's
    spec now says (:func:`ran_as`), else ``pending``; the night ``night``, else
    ``previous``'s."""
    before = {c.id: c for c in previous.cells} if previous is not None else {}
    cells = []
    for cell in matrix.cells:
        old = before.get(cell.id)
        if (old is not None and old.status == "done" and (sweep_dir / old.run_dir / RESULTS_FILE).exists()
                and ran_as(cell.spec, sweep_dir / old.run_dir)):
            cells.append(old)
        else:
            cells.append(CellState(cell.id, dict(cell.axes), recipe=cell.recipe, predicts=cell.predicts))
    created = previous.created if previous is not None else utc_now()
    if night is None and previous is not None:
        night = previous.night
    return Manifest(matrix.name, created, cells, night)


def ran_as(spec: TestSpec, run_dir: Path) -> bool:
    """Whether ``run_dir``'s ``test.json`` is ``spec`` but for what the run sets
    (``start_wall_ms``); False when it is missing or unreadable."""
    try:
        stored = TestSpec.load(run_dir / TEST_FILE)
    except SpecError:
        return False
    return replace(spec, start_wall_ms=stored.start_wall_ms) == stored
