"""The hunt's bookkeeping with a fake run: which recipes run on which config, how many
tries, what counts as demonstrated, as a violation, and why nothing showed. The model
is the real one; only the cluster runs are fake (tests/integration/test_hunt.py has
real ones)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.history import HistoryWriter
from faultline.hunt import RECIPES, HuntConfig, Row, hunt, unhunted
from faultline.hunt.page import render_page, render_table
from faultline.spec import TestSpec


class FakeRuns:
    """Writes a run directory per call: results.json with ``lost`` lost writes for the
    n-th call of a spec name (``plan[name][n]``, 0 past its end), all of them on partition
    ``partition`` (the recipes' target is 0), and a history whose one nemesis op carries
    ``error`` when given."""

    def __init__(self, root: Path, plan: dict[str, list[int]], error: str | None = None,
                 valid: str | None = None, partition: int = 0) -> None:
        self.root, self.plan, self.error, self.valid = root, plan, error, valid
        self.partition = partition
        self.specs: list[TestSpec] = []

    def __call__(self, spec: TestSpec) -> tuple[Path | None, str | None]:
        n = sum(1 for s in self.specs if s.name == spec.name)
        self.specs.append(spec)
        run_dir = self.root / spec.name / str(n)
        run_dir.mkdir(parents=True)
        plan = self.plan.get(spec.name, [])
        lost = plan[n] if n < len(plan) else 0
        counts = {"lost-write": lost, "phantom-read": 0, "inconsistent-offsets": lost}
        valid: bool | str = self.valid or lost == 0 or spec.producer.acks == "1"
        partitions = [{"topic": spec.topic.name, "partition": p, "complete": True, "drained": 10,
                       "anomaly_counts": {a: n for a, n in counts.items() if n and p == self.partition}}
                      for p in range(spec.topic.partitions)]
        (run_dir / "results.json").write_bytes(orjson.dumps({"valid": valid, "anomaly_counts": counts,
                                                             "partitions": partitions}))
        history = HistoryWriter(run_dir / "history.jsonl")
        history.append("nemesis", "info", "wait", {"step": "wait until 0 has a new leader"})
        history.append("nemesis", "info", "wait", {"step": "wait until 0 has a new leader", "result": "x"},
                       error=self.error)
        history.close()
        return run_dir, None


ACKS1 = HuntConfig("1", 2, False)
FOLLOWERS_HELD = [r for r in RECIPES if r.name == "leader-crash-followers-held"]
LOSSY = "leader-crash-followers-held-acks1-misr2"
SAFE = "leader-crash-followers-held-acksall-misr2"


def test_acks1_hunts_the_followers_held_recipe_until_it_shows(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {LOSSY: [0, 0, 12]})
    rows = hunt(ACKS1, tries=5, every_try=False, safe_tries=1, run=runs, recipes=FOLLOWERS_HELD)
    assert [(r.recipe.name, r.config.acks, r.hunted) for r in rows] == [
        ("leader-crash-followers-held", "1", ("lost-write", "inconsistent-offsets")),
        ("leader-crash-followers-held", "all", ())]
    assert [s.name for s in runs.specs] == [LOSSY] * 3 + [SAFE], "stops at the first try that shows it"
    assert rows[0].demonstrated and rows[0].first_try("lost-write") == 3
    assert rows[0].outcome_text().startswith("demonstrated (lost-write on try 3")
    assert rows[1].outcome_text() == "stays valid in 1 of 1 run(s)"
    assert not any(r.violations for r in rows)
    spec = runs.specs[0]
    assert spec.nemesis.schedule == RECIPES[0].schedule and not spec.producer.enable_idempotence
    assert runs.specs[-1].producer.enable_idempotence and runs.specs[-1].topic.min_insync_replicas == 2


def test_an_anomaly_on_another_partition_demonstrates_nothing(tmp_path: Path) -> None:
    """The recipe's schedule faults partition 0's replicas (the model's one partition):
    a loss on another partition, which the same broker faults may cause some other way,
    is no demonstration of the recipe; it still counts against the safe config."""
    runs = FakeRuns(tmp_path, {LOSSY: [5, 5], SAFE: [2]}, partition=1)
    rows = hunt(ACKS1, tries=2, every_try=False, safe_tries=1, run=runs, recipes=FOLLOWERS_HELD)
    assert [s.name for s in runs.specs] == [LOSSY, LOSSY, SAFE]
    assert not rows[0].demonstrated and rows[0].first_try("lost-write") is None
    assert rows[0].outcome_text().startswith("not reproduced in 2 tries")
    assert rows[1].violations == ["try 1: inconsistent-offsets, lost-write seen, which the model forbids",
                                  "try 1: the checker found the run invalid"]


def test_every_try_runs_them_all(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {LOSSY: [5, 0, 7]})
    rows = hunt(ACKS1, tries=3, every_try=True, safe_tries=0, run=runs)
    assert len(rows[0].tries) == 3 and "shown in 2 of 3" in rows[0].outcome_text()


def test_a_loss_on_the_safe_config_is_a_violation(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {LOSSY: [3], SAFE: [2]})
    rows = hunt(ACKS1, tries=1, every_try=False, safe_tries=1, run=runs, recipes=FOLLOWERS_HELD)
    assert rows[1].violations == ["try 1: inconsistent-offsets, lost-write seen, which the model forbids",
                                  "try 1: the checker found the run invalid"]
    assert rows[1].outcome_text().startswith("VIOLATION")
    assert "class=bad" in render_page(rows, tmp_path)


def test_an_unknown_run_neither_demonstrates_nor_violates(tmp_path: Path) -> None:
    """An unknown verdict (history and broker state disagree, a drain cut short) decides
    nothing: the anomalies it counted show no loss of real Kafka, nor a model's mistake."""
    runs = FakeRuns(tmp_path, {LOSSY: [4, 4], SAFE: [2]}, valid="unknown")
    rows = hunt(ACKS1, tries=2, every_try=False, safe_tries=1, run=runs, recipes=FOLLOWERS_HELD)
    assert [s.name for s in runs.specs] == [LOSSY, LOSSY, SAFE], "an unknown try is no demonstration"
    assert not rows[0].demonstrated and rows[0].first_try("lost-write") is None
    assert rows[0].outcome_text() == ("not reproduced in 2 tries (the checker could not decide "
                                      "2 of them: valid unknown)")
    assert rows[1].violations == []
    assert rows[1].outcome_text() == "stays valid in 0 of 1 run(s) (the checker could not decide 1)"
    assert "class=miss" in render_page(rows[1:], tmp_path), "not shown as a safe config that held"


def test_the_safe_config_runs_only_the_recipes_the_model_forbids_there(tmp_path: Path) -> None:
    """The ELR-limit recipe loses on the safe config too (one wipe, unclean restarts):
    a safe row for it would "must stay valid" where the model predicts a loss, and read
    "stays valid in 0 of 1" of a run that was valid. The safe config's own hunt shows it."""
    runs = FakeRuns(tmp_path, {})
    rows = hunt(ACKS1, tries=1, every_try=False, safe_tries=1, run=runs)
    assert [(r.recipe.name, r.config.acks) for r in rows] == [
        ("leader-crash-followers-held", "1"), ("elr-limit-unclean-restarts", "1"),
        ("leader-crash-followers-held", "all")]
    assert all(not r.predicted for r in rows if not r.hunted)


def test_not_reproduced_says_why_from_the_journal(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {}, error="not met within 20 s")
    rows = hunt(ACKS1, tries=2, every_try=False, safe_tries=0, run=runs)
    assert rows[0].outcome_text() == ("not reproduced in 2 tries (the schedule stopped at "
                                      "'wait until 0 has a new leader': not met within 20 s)")


def test_the_safe_config_hunts_only_the_elr_limit(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {})
    rows = hunt(HuntConfig("all", 2, False), tries=1, every_try=False, safe_tries=1, run=runs)
    assert [(r.recipe.name, r.hunted) for r in rows] == [
        ("elr-limit-unclean-restarts", ("lost-write", "phantom-read", "inconsistent-offsets"))], \
        "one wipe, unclean restarts"
    assert hunt(HuntConfig("all", 2, False), tries=1, every_try=False, safe_tries=1, run=runs,
                recipes=FOLLOWERS_HELD) == []
    assert len(runs.specs) == 1


def test_unclean_election_is_hunted_on_three_nodes_with_the_followers_held(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {})
    rows = hunt(HuntConfig("all", 1, True), tries=1, every_try=False, safe_tries=0, run=runs)
    assert [(r.recipe.name, r.hunted) for r in rows] == [
        ("unclean-election-stale-follower", ("lost-write", "phantom-read", "inconsistent-offsets"))]
    assert runs.specs[0].kafka.nodes == 3 and runs.specs[0].topic.unclean_leader_election_enable
    assert "hold followers of 0 as held" in runs.specs[0].nemesis.schedule, \
        "two paused followers of three would take the KRaft quorum down: replication is cut instead"
    assert runs.specs[0].kafka.broker_config == {"unclean.leader.election.interval.ms": "1000"}


def test_the_page_links_each_try_and_stands_alone(tmp_path: Path) -> None:
    rows: list[Row] = hunt(ACKS1, tries=2, every_try=True, safe_tries=1,
                           run=FakeRuns(tmp_path, {LOSSY: [1, 1]}))
    page = render_page(rows, tmp_path)
    assert f'href="{LOSSY}/0/report.html"' in page and f'href="{SAFE}/0/report.html"' in page
    assert "http" not in page and "<script" not in page
    assert "demonstrated" in render_table(rows)


def test_a_wipe_of_the_last_isr_member_is_hunted_without_elr_and_checked_with_it(tmp_path: Path) -> None:
    runs = FakeRuns(tmp_path, {})
    rows = hunt(HuntConfig("all", 2, False, "3.9.1"), tries=1, every_try=False, safe_tries=1, run=runs,
                safe_version="4.3.1")
    assert [(r.recipe.name, r.config.kafka_version, r.hunted, sorted(r.predicted)) for r in rows] == [
        ("wipe-last-isr-member", "3.9.1", ("lost-write", "phantom-read", "inconsistent-offsets"),
         ["inconsistent-offsets", "lost-write", "phantom-read"]),
        ("wipe-last-isr-member", "4.3.1", (), [])]
    assert [s.kafka.version for s in runs.specs] == ["3.9.1", "4.3.1"]


def test_what_no_recipe_shows_is_listed_as_not_hunted(tmp_path: Path) -> None:
    rows = hunt(ACKS1, tries=1, every_try=False, safe_tries=0, run=FakeRuns(tmp_path, {LOSSY: [1]}),
                recipes=FOLLOWERS_HELD)
    missing = unhunted(ACKS1, rows)
    assert list(missing) == ["phantom-read"], "acks=1 permits it through a wipe (the ELR's limit)"
    assert "phantom-read: permitted by the model" in render_table(rows, missing)


def test_acks1_with_the_whole_table_hunts_phantom_reads_with_the_elr_limit(tmp_path: Path) -> None:
    rows = hunt(ACKS1, tries=1, every_try=False, safe_tries=0, run=FakeRuns(tmp_path, {}))
    assert [(r.recipe.name, r.hunted) for r in rows] == [
        ("leader-crash-followers-held", ("lost-write", "inconsistent-offsets")),
        ("elr-limit-unclean-restarts", ("phantom-read",))]
    assert unhunted(ACKS1, rows) == {}


def test_a_hunt_whose_runs_errored_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2 on an error, as the command says: a hunt none of whose runs could run (a
    Kafka version that does not exist, no cluster) demonstrated nothing, and says why."""
    import faultline.commands.hunt as hunt_mod

    monkeypatch.setattr(hunt_mod, "_run_one", lambda _root: lambda _spec: (
        None, "mvn could not resolve org.apache.kafka:kafka_2.13:9.9.9"))
    result = CliRunner().invoke(main, ["hunt", "--acks", "1", "--tries", "2", "--safe-tries", "0",
                                       "--kafka-version", "9.9.9", "--results", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert ("not reproduced in 2 tries (mvn could not resolve org.apache.kafka:kafka_2.13:9.9.9)"
            in result.output)
