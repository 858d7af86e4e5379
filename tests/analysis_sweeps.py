"""Sweep directories for the pipeline's tests, as ``faultline sweep`` leaves them
(the sweep directory of docs/analysis.md, read by ``faultline/analysis/sweepdir.py``).

Cells are stored runs: the real run in ``tests/e2e/data/kill-partition`` (acks=all,
kill + partition, no loss), and simulated runs of ``tests/e2e/report_runs.make_run``
(a kill whose new leader lost the last acknowledged record: a lost write), whose
``test.json`` may be rewritten to another config and re-checked, so the same history is
judged by that config's guarantees (acks=1: the loss is permitted).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline.checkers.results_file import check_run
from tests.e2e.report_runs import Scenario, make_run

DATA = Path(__file__).resolve().parent / "e2e" / "data"
REAL_RUN = DATA / "kill-partition"


@dataclass(frozen=True, slots=True)
class CellRun:
    """One cell: its id, axes and how its run directory is made.

    ``source`` copies a stored run; else a simulated run with ``seed`` is made; either way
    ``config`` (dotted test.json paths -> values) rewrites its test.json before it is checked.
    ``status`` other than done leaves the run directory empty (a failed cell). ``recipe``
    and ``predicts`` make it a targeted run (sweep.json's).
    """

    id: str
    axes: dict[str, Any]
    source: Path | None = None
    seed: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    status: str = "done"
    error: str | None = None
    recipe: str | None = None
    predicts: tuple[str, ...] = ()


def make_sweep(path: Path, name: str, created: str, cells: list[CellRun]) -> Path:
    """Write a sweep directory at ``path``: sweep.json and one run directory per cell."""
    entries = []
    for c in cells:
        run_dir = path / "cells" / c.id
        if c.status == "done":
            if c.source is not None:
                shutil.copytree(c.source, run_dir)
            else:
                make_run(run_dir, Scenario(seed=c.seed))
            if c.config:
                spec = json.loads((run_dir / "test.json").read_text())
                for dotted, v in c.config.items():
                    *parents, last = dotted.split(".")
                    node = spec
                    for p in parents:
                        node = node[p]
                    node[last] = v
                (run_dir / "test.json").write_text(json.dumps(spec, indent=2))
                check_run(run_dir)
        else:
            run_dir.mkdir(parents=True)
        valid = json.loads((run_dir / "results.json").read_text())["valid"] if c.status == "done" else None
        entries.append({"id": c.id, "axes": c.axes, "status": c.status, "run_dir": f"cells/{c.id}",
                        "valid": valid, "error": c.error, "started": created, "ended": created,
                        "recipe": c.recipe, "predicts": list(c.predicts)})
    manifest = {"version": 1, "name": name, "created": created, "cells": entries}
    (path / "sweep.json").write_text(json.dumps(manifest, indent=2))
    return path


def acks_cells(seeds: tuple[int, ...] = (3, 42)) -> list[CellRun]:
    """A 2-cell sweep over acks (all, 1) x seeds under kills: acks=all loses a write its
    guarantees forbid (a violation), acks=1 the same write, permitted."""
    out = []
    for acks in ("all", "1"):
        for seed in seeds:
            axes = {"producer.acks": acks, "nemesis.faults": ["kill"], "seed": seed}
            out.append(CellRun(f"acks={acks},faults=kill,seed={seed}", axes, seed=seed,
                               config={"producer.acks": acks, "producer.enable_idempotence": acks == "all",
                                       "seed": seed}))
    return out
