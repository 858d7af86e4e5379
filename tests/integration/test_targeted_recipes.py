"""The group recipes on real Kafka, 3 nodes (faultline/hunt/targeted_recipes.py): the group
commits past the high watermark its partition had once its leader was alone in the ISR,
and an unclean election truncates the log below that committed position.

- ``group-truncation-under-commit``: the owner's position moves back and its next commit is
  lower. The producer is crashed before the election, dropping its backlog, and restarted
  after it: the new log refills the truncated span at the producer's rate, so the owner's
  commits stay below the old one for seconds (with it writing on, its backlog refilled the
  log past the old commit before one CI run's owner next committed).
- ``group-truncation-new-owner``: the members left before the election and start again
  once the new log has passed the committed offset; librdkafka's new owner reads on from
  there, and the records below it reach no member.

Each run is valid, its anomalies permitted by the rule the recipe names
(``guarantees.group_permitted``). The schedules' waits pin each step to the state it needs,
but for the last: it takes any partition's commit, and partition 0's owner commits every
second in the rest of the run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from faultline.history import read_history
from faultline.hunt.targeted_recipes import RECIPES, TargetedRecipe
from faultline.run.runner import run_test

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r.kind == "group"], ids=lambda r: r.name)
def test_a_group_recipe_shows_its_anomalies_and_the_rule_permits_them(
        recipe: TargetedRecipe, tmp_path: Path) -> None:
    outcome = run_test(recipe.spec, results=tmp_path, console=Console(file=io.StringIO()))
    assert outcome.error is None, outcome.error
    waits = [op.value for op in read_history(outcome.run_dir) if op.f == "wait" and "result" in op.value]
    steps = [s for s in recipe.spec.nemesis.schedule if s.startswith("wait ")]
    assert len(waits) == len(steps) and all(w["result"].startswith(("met", "waited")) for w in waits), waits
    results = json.loads((outcome.run_dir / "results.json").read_text())
    group = results["group"]
    seen = {a for a, n in group["anomaly_counts"].items() if n}
    assert set(recipe.anomalies) <= seen, group["anomaly_counts"]
    assert group["violations"] == [] and set(recipe.anomalies) <= set(group["permitted"]), group
    assert results["valid"] is True, (results["violations"], results["unknown"])
