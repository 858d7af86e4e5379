"""Targeted schedules in a sweep (``schedules: targeted`` in the matrix): which of the
model's recipes (:data:`faultline.hunt.RECIPES`) each cell runs, and how.

A recipe's *families* are the fault families of its fault steps (each step kind a
family's first model step: ``crash`` kill, ``wipe`` wipe, ...), but for a pause of a
follower: a pause of the followers, like a cut of their links (no family's fault step),
holds them back, which is how a real cluster realises the model's "the followers did
not fetch" (:mod:`faultline.hunt.compile`); the recipe faults the leader with what loses
the data. A recipe *applies to* a cell whose
``nemesis.faults`` hold all of its families. The sweep runs the recipes that the model
says lose data (:data:`~faultline.checkers.model.outcome.LOST_WRITE` among the anomalies
of its replay on the cell's config) in some cell they apply to; each cell runs every one
of them that applies to it, once per config (not per seed). So a cell whose guarantees
forbid loss faces exactly the schedules that break the cells that permit it under the
same faults.

A targeted run is its cell's spec with the recipe's schedule instead of the seeded
faults, the recipe's ``time_limit_s``, and, where unclean election is on, the
controller looking for leaderless partitions every second (minutes by default, longer
than a run). Recipes are the model's single partition on 3 replicas: a cell they apply
to must have 3 nodes and replication factor 3.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from faultline.checkers.model.outcome import LOST_WRITE
from faultline.errors import SpecError
from faultline.faults import FAMILIES
from faultline.hunt.recipes import RECIPES, HuntConfig, Recipe, unclean_broker_config
from faultline.spec import TestSpec

#: The values of a matrix's ``schedules``: random seeds only, or targeted recipes besides.
SCHEDULES = ("random", "targeted")
#: The family of each model step kind that is a family's fault (its first model step); of
#: two such families the first (a partition's ``isolate``, not a degraded link's).
_FAMILY_OF_STEP = {f.model_steps[0]: f.name for f in reversed(list(FAMILIES.values())) if f.model_steps}
#: The model's followers of the first leader (replica 1).
_FOLLOWERS = frozenset({2, 3})


@dataclass(frozen=True, slots=True)
class TargetedRun:
    """One recipe on one cell's config: its spec and what the model's replay of the
    recipe shows on that config (anomaly names, sorted)."""

    recipe: str
    spec: TestSpec
    predicts: tuple[str, ...]


@functools.cache
def families(recipe: Recipe) -> frozenset[str]:
    """The fault families ``recipe`` needs (module docstring): the holds of followers aside."""
    return frozenset(_FAMILY_OF_STEP[s.kind] for s in recipe.model_steps()
                     if s.kind in _FAMILY_OF_STEP and not (s.kind == "pause" and s.a in _FOLLOWERS))


def _applies(recipe: Recipe, spec: TestSpec) -> bool:
    return families(recipe) <= set(spec.nemesis.faults)


def predicts(recipe: Recipe, spec: TestSpec) -> tuple[str, ...]:
    """The anomalies the model's replay of ``recipe`` shows on ``spec``'s config."""
    config = HuntConfig(spec.producer.acks, spec.topic.min_insync_replicas,
                        spec.topic.unclean_leader_election_enable, spec.kafka.version)
    return tuple(sorted(config.predicted(recipe)))


def chosen(specs: Sequence[TestSpec]) -> tuple[Recipe, ...]:
    """The recipes a sweep of ``specs`` runs: those that apply to some spec on whose config
    the model's replay loses data (:data:`~faultline.checkers.model.outcome.LOST_WRITE`), in
    :data:`RECIPES`' order."""
    return tuple(r for r in RECIPES if any(_applies(r, s) and LOST_WRITE in predicts(r, s) for s in specs))


def targeted_runs(spec: TestSpec, recipes: Sequence[Recipe]) -> tuple[TargetedRun, ...]:
    """The runs of each of ``recipes`` that applies to ``spec``; SpecError when one applies and
    the cell is not 3 nodes with replication factor 3."""
    runs = [r for r in recipes if _applies(r, spec)]
    if runs and (spec.kafka.nodes, spec.topic.replication_factor) != (3, 3):
        raise SpecError(f"schedules: targeted runs the model's recipes ({', '.join(r.name for r in runs)}), "
                        f"which need kafka.nodes 3 and topic.replication_factor 3, not "
                        f"{spec.kafka.nodes} and {spec.topic.replication_factor}")
    return tuple(TargetedRun(r.name, targeted_spec(spec, r), predicts(r, spec)) for r in runs)


def targeted_spec(spec: TestSpec, recipe: Recipe) -> TestSpec:
    """``spec`` running ``recipe``'s schedule (module docstring)."""
    broker = {**unclean_broker_config(spec.topic.unclean_leader_election_enable), **spec.kafka.broker_config}
    return replace(spec, time_limit_s=recipe.time_limit_s, kafka=replace(spec.kafka, broker_config=broker),
                   nemesis=replace(spec.nemesis, faults=(), schedule=recipe.schedule))
