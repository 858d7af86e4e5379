"""The group recipe on real Kafka, 3 nodes: with partition 0's followers held until the ISR is
its leader alone, the members commit past what the followers hold; the leader is killed and,
with unclean leader election on, a held follower leads without those records, below the
group's committed position. The group checker finds the recipe's anomaly (the owner's
position reset), and every group anomaly it finds (a commit below the one before, where the
owner commits after the reset) permitted with the rule's reason, and the run is valid. (The
same schedule with unclean election off finds none of the recipe's, the partition waiting
for its old leader: seen once, 58 s, and left to the unit tests' pair of rules to keep
``make test`` in its budget.)"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from faultline.hunt.targeted_recipes import RECIPES
from faultline.run.runner import run_test
from faultline.spec import TestSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

(RECIPE,) = [r for r in RECIPES if r.kind == "group"]


def _run(spec: TestSpec, results: Path) -> tuple[bool | str | None, dict[str, Any]]:
    spec = replace(spec, kafka=replace(spec.kafka, heap_mb=384))
    outcome = run_test(spec, results=results, console=Console(file=io.StringIO()))
    assert outcome.error is None, outcome.error
    results_json: dict[str, Any] = json.loads((outcome.run_dir / "results.json").read_text())
    print(spec.topic.unclean_leader_election_enable, results_json["group"]["anomaly_counts"])
    return outcome.valid, results_json


def test_a_truncation_below_the_committed_position_shows_with_the_unclean_election(
        local_backend: None, tmp_path: Path) -> None:
    valid, results = _run(RECIPE.spec, tmp_path)
    group = results["group"]
    assert all(group["anomaly_counts"][a] > 0 for a in RECIPE.anomalies), group["anomaly_counts"]
    rules = RECIPE.permitted()
    for anomaly, examples in group["anomalies"].items():
        assert all(e["permitted"] == rules[anomaly] for e in examples), anomaly
    assert group["valid"] is True and valid is True, (group["violations"], results["unknown"])

