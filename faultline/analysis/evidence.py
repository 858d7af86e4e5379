"""What a cell of a night shows, its random seeds and its targeted runs taken together.

A cell's random-seed runs are its ``cells`` row (:func:`faultline.analysis.aggregate.cells`);
its targeted runs (a matrix's ``schedules: targeted``, :mod:`faultline.sweep.schedules`)
are the ``runs`` rows of its sweep and cell key that have a ``recipe``, which
:func:`with_targeted` adds to the row as ``targeted``. Each run has a :func:`run_status`,
the random seeds together a :func:`status`; the cell's *state* (:func:`evidence`) is,
from the first that holds:

- ``violation``: a run's verdict is false (an anomaly the guarantees forbid);
- ``unknown``: a run failed, was not run, or its verdict is unknown: what it did not
  decide may hide a violation;
- ``demonstrated``: a run lost acknowledged writes, which its verdict permits;
- ``not-demonstrated``: the guarantee table permits the cell's loss
  (``expected_loss``) and no run showed one: a flag, not a pass. No recipe of the model
  loses data on the config (a recipe is missing), or the model says one does and Kafka
  kept every write (the model, or the recipe's compiled timing, is wrong there);
- ``held``: no run lost a write, and the table forbids the loss: it held under every
  targeted schedule and random seed it faced.

A cell with several rows in a night (two sweeps of its config) shows its first state in
:data:`STATES`, the most a night can say of it: a loss shown in one sweep is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline.checkers.model.outcome import LOST_WRITE

#: A run's or the random seeds' status, the worst first (:func:`run_status`, :func:`status`).
SEVERITY = ("violation", "unknown", "permitted", "clean")
#: A cell's states, in the order :func:`evidence` decides them.
STATES = ("violation", "unknown", "demonstrated", "not-demonstrated", "held")


def status(cell: Mapping[str, Any]) -> str:
    """The random seeds' status, from a cells row: ``violation``, ``unknown`` (a run failed or
    its verdict is unknown: what it did not decide may hide a forbidden loss), ``permitted``
    (loss, none forbidden) or ``clean``, in that order."""
    if cell.get("runs_violating"):
        return "violation"
    if cell.get("runs_unknown") or cell.get("runs_failed") or not cell.get("runs"):
        return "unknown"
    if cell.get("runs_lost"):
        return "permitted"
    return "clean"


def model_loses(run: Mapping[str, Any]) -> bool:
    """Whether the model's replay of a targeted run's recipe loses data on its config (its
    ``predicts`` names :data:`~faultline.checkers.model.outcome.LOST_WRITE`)."""
    return LOST_WRITE in (run.get("predicts") or ())


def run_status(run: Mapping[str, Any]) -> str:
    """One run's status (:data:`SEVERITY`), from a ``runs`` row or a cells row's ``run_list`` entry."""
    if run.get("status") != "done" or run.get("valid") not in ("true", "false"):
        return "unknown"
    if run.get("valid") == "false":
        return "violation"
    return "permitted" if run.get("n_lost_write") else "clean"


@dataclass(frozen=True, slots=True)
class Evidence:
    """A cell's state (:data:`STATES`), why in one line, the run that shows it (a ``runs``
    row or ``run_list`` entry; None for held, not-demonstrated and unknown), and how many
    targeted runs and random seeds it faced."""

    state: str
    why: str
    run: Mapping[str, Any] | None
    schedules: int
    seeds: int


def evidence(cell: Mapping[str, Any]) -> Evidence:
    """The state of ``cell`` (a cells row, with its ``targeted`` runs when it has some:
    :func:`with_targeted`), as the module docstring says; a targeted run is named before
    a seed."""
    targeted: Sequence[Mapping[str, Any]] = cell.get("targeted") or ()
    runs = [*targeted, *(cell.get("run_list") or ())]
    seeds, k = int(cell.get("runs") or 0), len(targeted)
    worst = min([status(cell), *map(run_status, targeted)], key=SEVERITY.index)
    faced = f"{_n(k, 'targeted schedule')} and {_n(seeds, 'random seed')}"
    if worst == "violation":
        run = next((r for r in runs if run_status(r) == "violation"), None)
        what = ", ".join((run or {}).get("violations") or ()) or "a forbidden anomaly"
        return Evidence("violation", f"{what} under {_under(run)}", run, k, seeds)
    if worst == "unknown":
        bad = sum(1 for r in targeted if run_status(r) == "unknown") + int(cell.get("runs_failed") or 0) \
            + int(cell.get("runs_unknown") or 0)
        return Evidence("unknown", f"{_n(bad, 'run')} failed, not run or undecided", None, k, seeds)
    if worst == "permitted":
        run = next((r for r in runs if run_status(r) == "permitted"), None)
        lost = _n(int((run.get("n_lost_write") if run else cell.get("lost_sum")) or 0), "acknowledged write")
        return Evidence("demonstrated", f"lost {lost} under {_under(run)}, permitted", run, k, seeds)
    if cell.get("expected_loss") == "permitted":
        losing = [str(r.get("recipe")) for r in targeted if model_loses(r)]
        why = (f"the model loses data under {', '.join(losing)} here, and Kafka kept every write" if losing
               else "no recipe of the model loses data on this config under its faults")
        return Evidence("not-demonstrated", f"loss permitted, none under {faced}: {why}", None, k, seeds)
    return Evidence("held", f"no loss under {faced}", None, k, seeds)


def _under(run: Mapping[str, Any] | None) -> str:
    if run is None:
        return "a random seed"
    if run.get("recipe"):
        return f"recipe {run['recipe']}"
    return f"seed {run.get('seed')}" if run.get("seed") is not None else f"run {run.get('run')}"


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def with_targeted(cells: Sequence[Mapping[str, Any]],
                  runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``cells`` rows, each with ``targeted``: the ``runs`` rows of its sweep and cell key that
    have a ``recipe``, in the order given (a key with two configs in a sweep, resumed after a
    default of faultline's changed, gives both rows its targeted runs)."""
    by_cell: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in runs:
        if r.get("recipe"):
            by_cell.setdefault((str(r["sweep"]), str(r["cell"])), []).append(r)
    return [{**c, "targeted": by_cell.get((str(c["sweep"]), str(c["cell"])), [])} for c in cells]
