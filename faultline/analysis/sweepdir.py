"""Reading a sweep directory (``sweep.json`` and its cells), as ``faultline sweep`` writes it.

The contract: ``SWEEP_DIR/sweep.json`` holds ``version`` 1, the sweep's ``name``, when
it was ``created`` (UTC, ISO 8601), the ``night`` (``YYYY-MM-DD``) a nightly sweep was
run for (null or absent for another sweep) and its ``cells``, each with a filesystem-safe ``id``,
the swept ``axes`` (dotted paths into ``test.json`` -> values), a ``status`` (``pending``,
``running``, ``done``, ``failed``), its ``run_dir`` relative to the sweep directory, and
for a failed cell the one-line ``error``. A cell's full config is its run directory's
``test.json``; ``axes`` only say which fields were swept.

Pure: reads JSON, imports no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from faultline.errors import HistoryError

SWEEP_FILE = "sweep.json"
STATUSES = frozenset(("pending", "running", "done", "failed"))


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of one sweep: a run directory (absolute) and what the manifest says of it.

    ``sweep`` is the sweep's id (:attr:`Sweep.id`).

    ``key`` names the cell's config without its seed (its axes but ``seed``, as
    ``path=value`` joined by ``,``): the runs of one key are one *config cell*, across
    seeds and across nights. A targeted run has the ``recipe`` it ran and what the model
    ``predicts`` of it (``sweep.json``'s; None and empty for a random-seed run).
    """

    sweep: str
    created: str
    night: str
    id: str
    axes: Mapping[str, Any]
    status: str
    run_dir: Path
    error: str | None
    recipe: str | None = None
    predicts: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return cell_key(self.axes)


@dataclass(frozen=True, slots=True)
class Sweep:
    """A sweep directory read: its id, name, creation time, night (the manifest's ``night``,
    else the date of ``created``), the axes it swept and its cells.

    ``id`` is ``<name>-<created, digits and letters only>`` (``smoke-20261123T160000123456Z``;
    ``smoke-20261123T160000Z`` for a manifest written to the second, before microseconds):
    unique per sweep, and the ``sweep`` partition of every table.
    """

    id: str
    path: Path
    name: str
    created: str
    night: str
    axes: tuple[str, ...]
    cells: tuple[Cell, ...]


def cell_key(axes: Mapping[str, Any]) -> str:
    """``path=value`` for every axis but ``seed``, sorted, joined by ``,`` (lists joined by ``+``);
    ``(all)`` when only the seed was swept."""
    parts = [f"{k}={_text(v)}" for k, v in sorted(axes.items()) if k != "seed"]
    return ",".join(parts) or "(all)"


def _text(v: Any) -> str:
    if isinstance(v, list | tuple):
        return "+".join(map(_text, v))
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def read_sweep(path: Path) -> Sweep:
    """Read ``path/sweep.json``; HistoryError naming the file for anything that breaks the contract."""
    path = Path(path)
    manifest = path / SWEEP_FILE
    try:
        data = orjson.loads(manifest.read_bytes())
    except OSError as e:
        raise HistoryError(str(manifest), None,
                           f"cannot read ({e.strerror}): not a sweep directory") from None
    except orjson.JSONDecodeError as e:
        raise HistoryError(str(manifest), None, f"not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("version") != 1:
        raise HistoryError(str(manifest), None, "expected an object with \"version\": 1")
    name, created, cells = data.get("name"), data.get("created"), data.get("cells")
    if not isinstance(name, str) or not isinstance(created, str) or not isinstance(cells, list):
        raise HistoryError(str(manifest), None,
                           "needs a string \"name\", a string \"created\" and a list \"cells\"")
    try:
        day = datetime.fromisoformat(created.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        raise HistoryError(str(manifest), None, f"\"created\" is not an ISO 8601 time: {created!r}") from None
    night = data.get("night")
    if night is None:
        night = day
    elif not isinstance(night, str) or not is_date(night):
        raise HistoryError(str(manifest), None, f"\"night\" is not a date YYYY-MM-DD: {night!r}")
    sid = f"{name}-{''.join(ch for ch in created if ch.isalnum())}"
    out = tuple(_cell(manifest, i, c, sid, created, night) for i, c in enumerate(cells))
    ids = [c.id for c in out]
    if len(set(ids)) < len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise HistoryError(str(manifest), None, f"cell id {twice[0]!r} is given to more than one cell")
    axes = sorted({k for c in out for k in c.axes})
    return Sweep(sid, path, name, created, night, tuple(axes), out)


def is_date(text: str) -> bool:
    """Whether ``text`` is a date written ``YYYY-MM-DD`` (zero-padded: nights sort by name)."""
    try:
        return datetime.strptime(text, "%Y-%m-%d").strftime("%Y-%m-%d") == text
    except ValueError:
        return False


def _cell(manifest: Path, i: int, c: Any, sweep: str, created: str, night: str) -> Cell:
    where = f"cells[{i}]"
    if not isinstance(c, dict):
        raise HistoryError(str(manifest), None, f"{where} is not an object")
    cid, axes, status, run_dir = c.get("id"), c.get("axes"), c.get("status"), c.get("run_dir")
    if not isinstance(cid, str) or not cid or not isinstance(axes, dict) or not isinstance(run_dir, str):
        raise HistoryError(str(manifest), None, f"{where} needs a non-empty string \"id\", an object "
                                                "\"axes\" and a string \"run_dir\"")
    if status not in STATUSES:
        raise HistoryError(str(manifest), None, f"{where} ({cid}): status {status!r} is not one of "
                                                f"{', '.join(sorted(STATUSES))}")
    error, recipe, predicts = c.get("error"), c.get("recipe"), c.get("predicts")
    return Cell(sweep, created, night, cid, axes, status, (manifest.parent / run_dir).resolve(),
                error if isinstance(error, str) else None, recipe if isinstance(recipe, str) else None,
                tuple(map(str, predicts)) if isinstance(predicts, list) else ())


def read_sweeps(paths: Sequence[Path]) -> list[Sweep]:
    """Every sweep directory given, oldest night first (then oldest ``created``: an earlier
    night run later is still the earlier); HistoryError when two have one id (the same
    sweep given twice)."""
    sweeps = sorted((read_sweep(p) for p in paths), key=lambda s: (s.night, s.created, s.name))
    seen: dict[str, Path] = {}
    for s in sweeps:  # another copy of the sweep, or the same directory given twice
        if s.id in seen:
            raise HistoryError(str(s.path), None, f"the same sweep as {seen[s.id]} (name {s.name!r}, "
                                                  f"created {s.created})")
        seen[s.id] = s.path
    return sweeps
