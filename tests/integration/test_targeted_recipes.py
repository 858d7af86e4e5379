"""The group recipe on real Kafka, 3 nodes (faultline/hunt/targeted_recipes.py): the group
commits past the high watermark its partition had once its leader was alone in the ISR,
an unclean election truncates the log below that committed position, and the owner's
position resets and its next commit is lower; the run is valid, those anomalies permitted
by the rule the recipe names (``guarantees.group_permitted``). The schedule's waits pin
each step to the state it needs, but for the last: it takes any partition's commit, and
partition 0's owner commits every second in the rest of the run. The producer is down from
before the election until after it, so the new leader's log stays below the old commit
until well after the owner moved back (with it writing on, one CI run's owner caught up
past the old commit before its next commit)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from faultline.history import read_history
from faultline.hunt.targeted_recipes import RECIPES
from faultline.run.runner import run_test

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP = next(r for r in RECIPES if r.kind == "group")


def test_the_group_recipe_shows_its_anomalies_and_the_rule_permits_them(tmp_path: Path) -> None:
    outcome = run_test(GROUP.spec, results=tmp_path, console=Console(file=io.StringIO()))
    assert outcome.error is None, outcome.error
    waits = [op.value for op in read_history(outcome.run_dir) if op.f == "wait" and "result" in op.value]
    assert len(waits) == 6 and all(w["result"].startswith(("met", "waited")) for w in waits), waits
    results = json.loads((outcome.run_dir / "results.json").read_text())
    group = results["group"]
    seen = {a for a, n in group["anomaly_counts"].items() if n}
    assert set(GROUP.anomalies) <= seen, group["anomaly_counts"]
    assert group["violations"] == [] and set(GROUP.anomalies) <= set(group["permitted"]), group
    assert results["valid"] is True, (results["violations"], results["unknown"])
