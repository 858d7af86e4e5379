"""Targeted schedules on real Kafka, 3 nodes: with acks=1, holding the followers back
while the leader acknowledges and then crashing the leader loses acknowledged writes;
the same schedule with acks=all, min.insync=2 loses nothing; and with min.insync=1 and
unclean election on, followers held by a replication cut (alive, in the KRaft quorum)
until the ISR is the leader alone lose writes through an unclean election. Short runs
through the runner, the scripted nemesis and the checker (the hunt's own path,
:func:`faultline.hunt.runs.spec_for`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from faultline.hunt import RECIPES, HuntConfig, Recipe, Try, read_try, safe, spec_for
from faultline.run.runner import run_test
from tests.verdicts import assert_kafka_held

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECIPE = next(r for r in RECIPES if r.name == "leader-crash-followers-held")
UNCLEAN = next(r for r in RECIPES if r.name == "unclean-election-stale-follower")


def _try(config: HuntConfig, results: Path, hunting: bool, recipe: Recipe = RECIPE) -> Try:
    spec = spec_for(recipe, config, seed=1, hunting=hunting)
    outcome = run_test(spec, results=results, console=Console(file=io.StringIO()))
    assert outcome.error is None, outcome.error
    t = read_try(outcome.run_dir, outcome.error, spec.topic.name)
    print(f"{config.label}: {t.seen}, valid={t.valid}, {t.note or 'schedule ran to its end'}")
    return t


def test_acks1_loses_acknowledged_writes_and_the_safe_config_does_not(
        local_backend: None, tmp_path: Path) -> None:
    lossy = _try(HuntConfig("1", 2, False), tmp_path, hunting=True)
    assert lossy.note == "", "the schedule ran to its end"
    assert lossy.on_target.get("lost-write", 0) > 0, "acks=1: writes only the crashed leader had are lost"
    assert lossy.valid is True, "the loss is one acks=1 permits"
    clean = _try(safe(HuntConfig("1", 2, False).kafka_version), tmp_path, hunting=False)
    assert clean.note == ""
    assert clean.seen["lost-write"] == 0
    assert clean.run_dir is not None
    assert_kafka_held(json.loads((clean.run_dir / "results.json").read_text()))


def test_held_followers_lose_writes_through_an_unclean_election_on_three_nodes(
        local_backend: None, tmp_path: Path) -> None:
    lossy = _try(HuntConfig("all", 1, True), tmp_path, hunting=True, recipe=UNCLEAN)
    assert lossy.note == "", "the ISR shrank to the leader and a held follower was elected"
    assert lossy.on_target.get("lost-write", 0) > 0, "writes only the crashed leader had are lost"
    assert lossy.valid is True, "unclean election permits the loss"
