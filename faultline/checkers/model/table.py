"""The model's guarantee table, and each run's expected outcome.

``explore_cell`` explores one cell of a matrix (acks x min.insync x unclean x
ELR x fault set) and says which of ``MODEL_ANOMALIES`` can occur, each with its shortest
schedule found. The default matrix's table is stored in ``table.json`` (written by
``faultline model --explore --write``) so that ``expected_outcome``, which runs at
every check, is a dictionary look-up; cells outside it are explored on demand and
cached per process.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from faultline.checkers.model.core import Acks, ModelConfig, Step
from faultline.checkers.model.explore import FAULT_KINDS, LEADER_FAULT, Bound, explore
from faultline.checkers.model.outcome import MODEL_ANOMALIES

TABLE_PATH = Path(__file__).with_name("table.json")
TABLE_BOUND = Bound(depth=5, walks=600, walk_length=12, seed=1)
ON_DEMAND_BOUND = Bound(depth=4, walks=400, walk_length=12, seed=1)


class GuaranteeLike(Protocol):
    """The fields of ``faultline.checkers.guarantees.GuaranteeConfig`` the model reads."""

    @property
    def acks(self) -> str: ...
    @property
    def min_insync_replicas(self) -> int: ...
    @property
    def replication_factor(self) -> int: ...
    @property
    def unclean_leader_election_enable(self) -> bool: ...
    @property
    def eligible_leader_replicas(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Cell:
    """One matrix cell: a config, the fault kinds (maybe ``leader-fault``), a data-loss bound.

    ``key`` names the cell in ``table.json``; ELR cells end with ``elr=true``, so the
    keys of cells without ELR are those of tables written before the ELR dimension.
    """

    acks: Acks
    min_insync: int
    unclean: bool
    faults: frozenset[str]
    data_loss: int | None = None  # distinct replicas wipe / lose-unflushed may touch
    replication_factor: int = 3
    elr: bool = False  # KIP-966 eligible leader replicas

    @property
    def key(self) -> str:
        dl = "" if self.data_loss is None else f" data-loss<={self.data_loss}"
        return (f"rf={self.replication_factor} acks={self.acks} min.insync={self.min_insync} "
                f"unclean={str(self.unclean).lower()} faults={'+'.join(sorted(self.faults))}{dl}"
                + (" elr=true" if self.elr else ""))

    def model_config(self) -> ModelConfig:
        return ModelConfig(replication_factor=self.replication_factor, acks=self.acks,
                           min_insync=self.min_insync, unclean=self.unclean, elr=self.elr)


_FAULT_SETS: tuple[tuple[tuple[str, ...], int | None], ...] = (
    (("kill",), None), (("kill", LEADER_FAULT), None),
    (("pause",), None), (("pause", LEADER_FAULT), None),
    (("stop", LEADER_FAULT), None),
    (("partition",), None), (("partition", LEADER_FAULT), None),
    (("toxics",), None),
    (("wipe",), 1), (("wipe", LEADER_FAULT), 1), (("wipe", LEADER_FAULT), 2),
    (("lose-unflushed", LEADER_FAULT), 1), (("lose-unflushed", LEADER_FAULT), 2),
)


def default_matrix() -> Iterator[Cell]:
    """ELR {off,on} x acks {0,1,all} x min.insync {1,2} x unclean {false,true} x the fault sets, RF 3."""
    for elr in (False, True):
        for acks in ("0", "1", "all"):
            for mi in (1, 2):
                for unclean in (False, True):
                    for faults, dl in _FAULT_SETS:
                        yield Cell(acks, mi, unclean, frozenset(faults), dl, elr=elr)


def explore_cell(cell: Cell, bound: Bound = TABLE_BOUND) -> dict[str, tuple[Step, ...]]:
    """Anomaly -> shortest schedule found, for one cell."""
    b = dataclasses.replace(bound, max_data_loss=cell.data_loss)
    return dict(sorted(explore(cell.model_config(), cell.faults, b).found.items()))


Found = dict[str, tuple[Step, ...]]


def table_to_json(table: dict[Cell, Found]) -> dict[str, Any]:
    """Plain data: {"anomalies": [...], "cells": {cell key: {anomaly: schedule}}}."""
    cells = {c.key: {n: " ".join(map(str, s)) for n, s in found.items()} for c, found in table.items()}
    return {"anomalies": list(MODEL_ANOMALIES), "cells": cells}


@lru_cache(maxsize=1)
def stored_table() -> dict[str, dict[str, str]]:
    """The stored default-matrix table: cell key -> {anomaly: schedule}; empty if absent."""
    if not TABLE_PATH.exists():
        return {}
    data: dict[str, dict[str, str]] = json.loads(TABLE_PATH.read_text())["cells"]
    return data


@lru_cache(maxsize=256)
def _explored(cell: Cell) -> frozenset[str]:
    return frozenset(explore_cell(cell, ON_DEMAND_BOUND))


def cell_for(config: GuaranteeLike, faults: Iterable[str], leader_fault: bool | None = None) -> Cell:
    """Map a run's config and fault names to a model cell.

    Fault names are the checker's: fault kinds, ``leader-fault``, ``data-loss>=N``;
    others (``clock``, ``producer-restart``) have no model counterpart and are
    ignored. ``leader_fault`` overrides the presence of ``leader-fault``.
    """
    names = set(faults)
    kinds = {f for f in names if f in FAULT_KINDS}
    if leader_fault if leader_fault is not None else LEADER_FAULT in names:
        kinds.add(LEADER_FAULT)
    losses = [int(f.split(">=", 1)[1]) for f in names if f.startswith("data-loss>=")]
    data_loss = max(losses) if losses else None
    if not kinds & {"wipe", "lose-unflushed"}:
        data_loss = None
    if config.acks not in ("0", "1", "all"):
        raise ValueError(f"acks must be '0', '1' or 'all', not {config.acks!r}")
    acks: Acks = config.acks  # type: ignore[assignment]
    return Cell(acks, config.min_insync_replicas, config.unclean_leader_election_enable,
                frozenset(kinds), data_loss, config.replication_factor, config.eligible_leader_replicas)


def expected_outcome(config: GuaranteeLike, faults: Iterable[str],
                     leader_fault: bool | None = None) -> frozenset[str]:
    """Anomalies (among ``MODEL_ANOMALIES``) the model says a run can show.

    ``faults`` are the fault names of the run (see ``cell_for``). A stored cell is a
    look-up; any other is explored once per process (a second or so).
    """
    cell = cell_for(config, faults, leader_fault)
    if not cell.faults - {LEADER_FAULT}:
        return frozenset()
    stored = stored_table().get(cell.key)
    if stored is not None:
        return frozenset(stored)
    return _explored(cell)
