"""Reading sweep directories (faultline/analysis/sweepdir.py): the contract, and one clear
error for anything that breaks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultline.analysis.sweepdir import cell_key, read_sweep, read_sweeps
from faultline.analysis.tables import SendFigures, run_row
from faultline.errors import HistoryError


def write(path: Path, manifest: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "sweep.json").write_text(json.dumps(manifest))
    return path


def manifest(created: str = "2026-11-23T16:00:00Z", **cell: Any) -> dict[str, Any]:
    c = {"id": "acks=1,seed=1",
         "axes": {"producer.acks": "1", "nemesis.faults": ["kill", "pause"], "seed": 1},
         "status": "done", "run_dir": "cells/acks=1,seed=1", "valid": True, "error": None, **cell}
    return {"version": 1, "name": "smoke", "created": created, "cells": [c]}


def test_reads_cells_with_their_config_key(tmp_path: Path) -> None:
    s = read_sweep(write(tmp_path / "s", manifest()))
    assert (s.id, s.name, s.night, s.axes) == ("smoke-20261123T160000Z", "smoke", "2026-11-23",
                                                ("nemesis.faults", "producer.acks", "seed"))
    (c,) = s.cells
    assert c.run_dir == (tmp_path / "s" / "cells" / "acks=1,seed=1").resolve()
    assert c.key == "nemesis.faults=kill+pause,producer.acks=1"
    assert cell_key({"seed": 3}) == "(all)"


def test_a_targeted_run_keeps_its_recipe_and_cell_key(tmp_path: Path) -> None:
    s = read_sweep(write(tmp_path / "s", manifest(id="acks=1,recipe=r", recipe="r", predicts=["lost-write"])))
    (c,) = s.cells
    assert (c.recipe, c.predicts) == ("r", ("lost-write",))
    assert c.key == "nemesis.faults=kill+pause,producer.acks=1", "the key of its config's random seeds"
    row = run_row(c, None, "unknown", None, None, SendFigures())
    assert (row["recipe"], row["predicts"]) == ("r", ["lost-write"])
    (old,) = read_sweep(write(tmp_path / "old", manifest())).cells  # written before targeted runs
    assert (old.recipe, old.predicts) == (None, ())


@pytest.mark.parametrize(("data", "says"), [
    ("not json", "not valid JSON"),
    ({"version": 2}, '"version": 1'),
    ({**manifest(), "cells": "x"}, '"cells"'),
    (manifest(created="yesterday"), "not an ISO 8601 time"),
    (manifest(status="lost"), "status 'lost' is not one of"),
    (manifest(axes=None), 'an object "axes"'),
    (manifest(id=""), 'a non-empty string "id"'),  # a partition directory Spark refuses
    ({**manifest(), "cells": manifest()["cells"] * 2}, "cell id 'acks=1,seed=1' is given to more than one"),
    ({**manifest(), "night": "2026-1-5"}, '"night" is not a date YYYY-MM-DD'),
    ({**manifest(), "night": 20261105}, '"night" is not a date YYYY-MM-DD'),
])
def test_a_broken_manifest_is_one_line_naming_it(tmp_path: Path, data: Any, says: str) -> None:
    path = tmp_path / "s"
    path.mkdir()
    (path / "sweep.json").write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(HistoryError) as e:
        read_sweep(path)
    assert says in str(e.value) and str(path / "sweep.json") in str(e.value) and "\n" not in str(e.value)


def test_not_a_sweep_directory(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not a sweep directory"):
        read_sweep(tmp_path)


def test_nights_in_order_and_no_sweep_twice(tmp_path: Path) -> None:
    late = write(tmp_path / "b", manifest("2026-11-23T02:00:00Z"))
    early = write(tmp_path / "a", manifest("2026-11-22T02:00:00Z"))
    assert [s.night for s in read_sweeps([late, early])] == ["2026-11-22", "2026-11-23"]
    with pytest.raises(HistoryError, match="the same sweep as"):
        read_sweeps([late, write(tmp_path / "c", manifest("2026-11-23T02:00:00Z"))])


def test_a_nightly_sweep_is_of_the_night_it_was_run_for_whenever_it_ran(tmp_path: Path) -> None:
    """A nightly's sweep names its night: rerun days later (``--date``, to finish its
    failed cells), it is still that night, and older than the next night's sweep."""
    rerun = write(tmp_path / "a", {**manifest("2026-11-25T09:00:00Z"), "night": "2026-11-22"})
    next_night = write(tmp_path / "b", {**manifest("2026-11-23T02:00:00Z"), "night": "2026-11-23"})
    assert [(s.night, s.created) for s in read_sweeps([next_night, rerun])] == [
        ("2026-11-22", "2026-11-25T09:00:00Z"), ("2026-11-23", "2026-11-23T02:00:00Z")]


def test_one_sweep_directory_given_twice_is_refused(tmp_path: Path) -> None:
    """Found in use: ``faultline analyze S S`` read every run twice and said "0 runs checked
    (8 not)", exit 2, of a sweep that alone analyzes clean."""
    s = write(tmp_path / "s", manifest())
    with pytest.raises(HistoryError, match="the same sweep as"):
        read_sweeps([s, tmp_path / "s"])
