"""``schedules: targeted`` in a matrix (faultline/sweep/schedules.py): which of the model's
recipes each cell runs, the cells they make, and what the manifest keeps of them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from faultline.errors import SpecError
from faultline.hunt import RECIPES
from faultline.sweep import runner
from faultline.sweep.manifest import load
from faultline.sweep.matrix import parse_matrix
from faultline.sweep.schedules import families
from tests.schemas import validator
from tests.unit.sweep.test_runner import FakeRuns

#: The smoke matrix's shape, two seeds: acks=1 may lose a write to a leader kill, acks=all may not.
KILLS = {"name": "t", "defaults": {"time_limit_s": 20, "nemesis": {"faults": ["kill"]}},
         "axes": {"acks": ["1", "all"], "min_insync": [2], "seeds": [1, 2]}, "schedules": "targeted"}


def ids(data: dict[str, Any]) -> list[str]:
    return [c.id for c in parse_matrix(data, "m.yaml", "m").cells]


def test_a_recipe_s_families_are_its_faults_but_the_followers_hold() -> None:
    assert {r.name: sorted(families(r)) for r in RECIPES} == {
        "leader-crash-followers-held": ["kill"],  # the followers paused: the hold
        "unclean-election-stale-follower": ["kill"],  # the followers cut off: the hold
        "wipe-last-isr-member": ["wipe"],
        "elr-limit-unclean-restarts": ["kill", "wipe"],  # each follower killed in turn
        "lose-unflushed-last-isr-member": ["lose-unflushed"],
    }


def test_each_config_runs_after_its_first_seed_the_recipes_that_break_some_cell_of_its_faults() -> None:
    """acks=all min.insync=2 loses nothing to either kill recipe in the model, and faces
    both: each loses acks=1's writes."""
    m = parse_matrix(KILLS, "m.yaml", "m")
    assert [c.id for c in m.cells] == [
        "acks=1,min_insync=2,seed=1",
        "acks=1,min_insync=2,recipe=leader-crash-followers-held",
        "acks=1,min_insync=2,recipe=unclean-election-stale-follower",
        "acks=1,min_insync=2,seed=2",
        "acks=all,min_insync=2,seed=1",
        "acks=all,min_insync=2,recipe=leader-crash-followers-held",
        "acks=all,min_insync=2,recipe=unclean-election-stale-follower",
        "acks=all,min_insync=2,seed=2"]
    safe = m.cells[5]
    assert (safe.recipe, safe.predicts, dict(safe.axes)) == (
        "leader-crash-followers-held", (), {"producer.acks": "all", "topic.min_insync_replicas": 2})
    assert m.cells[1].predicts == ("inconsistent-offsets", "lost-write")
    recipe = next(r for r in RECIPES if r.name == "leader-crash-followers-held")
    spec, base = safe.spec, m.cells[4].spec
    assert (spec.nemesis.schedule, spec.nemesis.faults, spec.time_limit_s) == (recipe.schedule, (), 20.0)
    assert (spec.producer, spec.topic, spec.seed, spec.workload) == (
        base.producer, base.topic, base.seed, base.workload), "the cell's config, the recipe's faults"


def test_a_recipe_that_breaks_no_cell_of_the_sweep_is_not_run() -> None:
    assert ids({**KILLS, "axes": {"acks": ["all"], "min_insync": [2]}}) == ["acks=all,min_insync=2"]
    assert ids({**KILLS, "schedules": "random"}) == ids({k: v for k, v in KILLS.items() if k != "schedules"})


def test_a_cell_runs_only_the_recipes_whose_faults_it_has() -> None:
    got = ids({**KILLS, "axes": {"faults": [["kill"], ["lose-unflushed"], ["pause"]], "acks": ["1"]}})
    assert got == ["faults=kill,acks=1", "faults=kill,acks=1,recipe=leader-crash-followers-held",
                   "faults=kill,acks=1,recipe=unclean-election-stale-follower",
                   "faults=lose-unflushed,acks=1",
                   "faults=lose-unflushed,acks=1,recipe=lose-unflushed-last-isr-member",
                   "faults=pause,acks=1"]  # no recipe faults the leader with a pause


def test_an_unclean_cell_s_controller_elects_uncleanly_within_the_run() -> None:
    axes = {"acks": ["all"], "min_insync": [1], "unclean": [True]}
    m = parse_matrix({**KILLS, "axes": axes}, "m.yaml", "m")
    (unclean,) = [c for c in m.cells if c.recipe == "unclean-election-stale-follower"]
    assert unclean.spec.kafka.broker_config == {"unclean.leader.election.interval.ms": "1000"}
    assert "lost-write" in unclean.predicts


@pytest.mark.parametrize(("change", "message"), [
    ({"schedules": "clever"}, "m.yaml: schedules: expected one of random, targeted, got 'clever'"),
    ({"defaults": {"kafka": {"nodes": 5}, "nemesis": {"faults": ["kill"]}}},
     "m.yaml: cell acks=1,min_insync=2,seed=1: schedules: targeted runs the model's recipes "
     "(leader-crash-followers-held, unclean-election-stale-follower), which need kafka.nodes 3 and "
     "topic.replication_factor 3, not 5 and 3"),
])
def test_a_matrix_targeted_schedules_cannot_serve_is_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_matrix({**KILLS, **change}, "m.yaml", "m")
    assert str(info.value) == message


def test_the_manifest_keeps_each_run_s_recipe_and_what_the_model_predicts(tmp_path: Path) -> None:
    m = parse_matrix(KILLS, "m.yaml", "m")
    runner.run_sweep(m, tmp_path, runner.prepare(m, tmp_path), console=Console(file=io.StringIO()),
                     run_cell=FakeRuns())
    data = orjson.loads((tmp_path / "sweep.json").read_bytes())
    validator("sweep.schema.json").validate(data)
    assert [(c["recipe"], c["predicts"]) for c in data["cells"][:3]] == [
        (None, []), ("leader-crash-followers-held", ["inconsistent-offsets", "lost-write"]),
        ("unclean-election-stale-follower", ["inconsistent-offsets", "lost-write"])]
    loaded = load(tmp_path)
    assert loaded is not None and loaded.to_json() == data
    again = runner.prepare(m, tmp_path)
    assert [c.status for c in again.cells] == ["done"] * 8, "a rerun keeps the targeted runs done"
    for c in data["cells"]:  # a manifest written before targeted runs
        del c["recipe"], c["predicts"]
    (tmp_path / "sweep.json").write_bytes(orjson.dumps(data))
    old = load(tmp_path)
    assert old is not None and {(c.recipe, c.predicts) for c in old.cells} == {(None, ())}
