"""The targeted recipes: each is kept as its example (the YAML builds the recipe's spec), each
anomaly it shows is permitted by its rule in faultline.checkers.guarantees on its config and
faults, and the one fact its demonstration varies forbids them again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faultline.hunt.targeted_recipes import RECIPES, TargetedRecipe
from faultline.spec import build_spec
from faultline.targeted import parse_schedule

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_each_recipe_is_its_example(recipe: TargetedRecipe) -> None:
    assert build_spec(EXAMPLES / f"{recipe.name}.yaml", {}) == recipe.spec
    parse_schedule(recipe.spec.nemesis.schedule, recipe.spec.topic.partitions, recipe.spec.kafka.nodes)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_each_anomaly_a_recipe_shows_is_permitted_by_its_rule(recipe: TargetedRecipe) -> None:
    permitted = recipe.permitted()
    for anomaly in recipe.anomalies:
        assert permitted.get(anomaly), f"{recipe.name}: no rule permits {anomaly}"


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r.kind == "group"], ids=lambda r: r.name)
def test_a_group_recipe_is_permitted_by_acks_1_and_by_the_unclean_election_alike(
        recipe: TargetedRecipe) -> None:
    """acks=1 with a leader fault permits it; so does the unclean election of a follower that
    lacks committed records, with acks=all: the high watermark, not the ack, is what the
    members read below, so the election is the fact that decides."""
    assert all(reason.startswith("acks=1 and a fault hit the partition's leader")
               for reason in recipe.permitted().values())
    acks_all = replace(recipe.spec, producer=replace(recipe.spec.producer, acks="all"))
    assert all(reason.startswith("unclean.leader.election.enable=true")
               for reason in recipe.permitted(acks_all).values())
    assert recipe.permitted(acks_all).keys() == recipe.permitted().keys()
    clean = replace(acks_all, topic=replace(recipe.spec.topic, unclean_leader_election_enable=False))
    assert recipe.permitted(clean) == {}


def test_the_lost_committed_write_recipe_is_permitted_by_destroyed_data_alone() -> None:
    (recipe,) = [r for r in RECIPES if r.name == "txn-lost-committed-write"]
    for anomaly in recipe.anomalies:
        assert "data was destroyed (wipe / lose-unflushed)" in recipe.permitted()[anomaly]
    safe = replace(recipe.spec, topic=replace(recipe.spec.topic, min_insync_replicas=2))
    assert not set(recipe.anomalies) & set(recipe.permitted(safe))


def test_the_processed_twice_recipe_is_permitted_by_the_groups_offsets_destroyed_alone() -> None:
    """Its one node's lost data permits nothing on the topic (min.insync=2 of 3 replicas):
    only the group's __consumer_offsets partition, whose one replica it destroyed, does; with
    the default three replicas of that partition, the same fault permits nothing."""
    (recipe,) = [r for r in RECIPES if r.name == "txn-processed-twice"]
    assert "replication.factor=1 and data was destroyed" in recipe.permitted()["processed-twice"]
    assert "lost-write" not in recipe.permitted()
    three = replace(recipe.spec, kafka=replace(recipe.spec.kafka, broker_config={}))
    assert "processed-twice" not in recipe.permitted(three)
    assert "processed-twice" not in replace(recipe, offsets_faults=None).permitted()


def test_a_recipe_that_claims_an_anomaly_of_reads_reads() -> None:
    """Found by review: the rule permits G1c and processed-twice by the faults alone, but
    only a run whose transactions read (read-process-write) can show them: the checker
    infers a write-read edge, and a record processed twice, from a transaction's reads."""
    for recipe in RECIPES:
        if {"G1c", "processed-twice"} & set(recipe.anomalies):
            assert recipe.spec.transactions.reads > 0, recipe.name


def test_the_late_end_recipe_is_permitted_by_protocol_version_1_alone() -> None:
    """Its delaying fault (the held ends, family toxics) permits its anomalies under
    transaction protocol version 1 only (KAFKA-17754); on version 2 the same faults permit
    none of them, and no fault of the partition's own data does either way."""
    (recipe,) = [r for r in RECIPES if r.name == "txn-late-end"]
    for anomaly in recipe.anomalies:
        assert recipe.permitted()[anomaly].startswith("transaction protocol version 1 and toxics")
    v2 = replace(recipe.spec, kafka=replace(recipe.spec.kafka, transaction_version=2))
    assert not set(recipe.anomalies) & set(recipe.permitted(v2))
