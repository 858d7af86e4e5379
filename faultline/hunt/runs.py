"""The hunt's runs: each recipe on a fresh cluster (a normal run directory: history,
results.json, report.html) up to ``tries`` times, until the checker's results show
every anomaly it hunts on the partition its schedule faults
(:data:`~faultline.hunt.recipes.TARGET_PARTITION`); then the same recipe on the safe
config (:func:`~faultline.hunt.recipes.safe`: acks=all, min.insync=2, unclean off,
idempotence on), where the model forbids them, where it must stay valid (a recipe whose
replay shows an anomaly there too is left to the safe config's own hunt). An anomaly
seen where the model forbids it, or a run the checker finds invalid, is a violation: a
finding about Kafka or about the model. Runs are made by the caller's :data:`RunFn`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from faultline.checkers.model.outcome import MODEL_ANOMALIES
from faultline.errors import HistoryError
from faultline.history import NEMESIS, read_history
from faultline.hunt.recipes import RECIPES, TARGET_PARTITION, HuntConfig, Recipe, safe, unclean_broker_config
from faultline.rundir import RESULTS_FILE
from faultline.spec import (
    KafkaSpec,
    NemesisSpec,
    ProducerSpec,
    TestSpec,
    TopicSpec,
    WorkloadSpec,
)


@dataclass(slots=True)
class Try:
    """One run of a recipe: where, the anomalies it showed (``seen``: on any partition;
    ``on_target``: on :data:`TARGET_PARTITION`, the one its schedule faults), the verdict,
    why nothing showed."""

    run_dir: Path | None
    seen: dict[str, int]
    valid: bool | str | None
    note: str = ""
    on_target: dict[str, int] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        """The checker gave a verdict, valid or invalid: only then are its counts facts
        (an unknown run's history and broker state may disagree on them)."""
        return self.valid is True or self.valid is False


@dataclass(slots=True)
class Row:
    """One recipe on one config: what the model says and what real Kafka did."""

    recipe: Recipe
    config: HuntConfig
    hunted: tuple[str, ...]  # the anomalies this row looks for (empty: must stay clean)
    predicted: frozenset[str]  # the model's replay of the recipe on this config
    shortest: dict[str, str]  # anomaly -> the model's shortest schedule (permitted ones)
    tries: list[Try] = field(default_factory=list)

    def first_try(self, anomaly: str) -> int | None:
        """1-based number of the first decided try that showed ``anomaly`` on the recipe's
        partition (:data:`TARGET_PARTITION`): one on another partition, which the same
        broker faults may cause some other way, demonstrates nothing of the recipe."""
        return next((i for i, t in enumerate(self.tries, 1) if t.decided and t.on_target.get(anomaly)),
                    None)

    @property
    def demonstrated(self) -> bool:
        return bool(self.hunted) and all(self.first_try(a) is not None for a in self.hunted)

    @property
    def violations(self) -> list[str]:
        """Findings: anomalies seen in a decided try that the model's replay of the recipe
        does not show on this config, and invalid verdicts."""
        out: list[str] = []
        for i, t in enumerate(self.tries, 1):
            extra = sorted(a for a, n in t.seen.items() if n and a not in self.predicted and t.decided)
            if extra:
                out.append(f"try {i}: {', '.join(extra)} seen, which the model forbids")
            if t.valid is False:
                out.append(f"try {i}: the checker found the run invalid")
        return out

    def outcome_text(self) -> str:
        """The row's result in words."""
        if self.violations:
            return "VIOLATION: " + "; ".join(self.violations)
        undecided = sum(1 for t in self.tries if t.valid == "unknown")
        if not self.hunted:
            clean = sum(1 for t in self.tries if t.valid is True and not any(t.seen.values()))
            return (f"stays valid in {clean} of {len(self.tries)} run(s)"
                    + (f" (the checker could not decide {undecided})" if undecided else ""))
        shown = sum(1 for t in self.tries if t.decided and all(t.on_target.get(a) for a in self.hunted))
        if self.demonstrated:
            firsts = ", ".join(f"{a} on try {self.first_try(a)}" for a in self.hunted)
            return f"demonstrated ({firsts}; shown in {shown} of {len(self.tries)})"
        whys = [next((t.note for t in self.tries if t.note), "")]
        if undecided:
            whys.append(f"the checker could not decide {undecided} of them: valid unknown")
        why = "; ".join(w for w in whys if w)
        return f"not reproduced in {len(self.tries)} tries" + (f" ({why})" if why else "")


#: Runs one spec on a fresh cluster: (its run directory or None, the run's error or None).
RunFn = Callable[[TestSpec], tuple[Path | None, str | None]]


def spec_for(recipe: Recipe, config: HuntConfig, seed: int, hunting: bool = True) -> TestSpec:
    """The run of ``recipe`` on ``config``: short, three partitions, the recipe's schedule.

    A run that hunts a loss has idempotence off: librdkafka's idempotent producer meets
    a partition that lost its acknowledged tail with a fatal OUT_OF_ORDER_SEQUENCE_NUMBER,
    which ends the workload before the drain. A run that must stay clean (``hunting``
    False) keeps it on with acks=all, the safe config as users run it.
    """
    idempotent = config.acks == "all" and not hunting
    return TestSpec(
        name=f"{recipe.name}-{config.slug}", seed=seed, time_limit_s=recipe.time_limit_s,
        kafka=KafkaSpec(version=config.kafka_version, nodes=3, heap_mb=384,
                        broker_config=unclean_broker_config(config.unclean)),
        topic=TopicSpec(min_insync_replicas=config.min_insync, unclean_leader_election_enable=config.unclean),
        producer=ProducerSpec(acks=config.acks, enable_idempotence=idempotent),
        workload=WorkloadSpec(rate=300.0),
        nemesis=NemesisSpec(schedule=recipe.schedule))


def read_try(run_dir: Path | None, error: str | None, topic: str) -> Try:
    """What a finished run showed: its results.json counts (the run's, and those of
    ``topic``'s :data:`TARGET_PARTITION`, none when results.json has no ``partitions``)
    and verdict, and why a schedule stopped early (the first nemesis op with an error),
    if it did."""
    if run_dir is None or not (run_dir / RESULTS_FILE).exists():
        return Try(run_dir, {}, None, error or "the run left no results")
    results: dict[str, Any] = orjson.loads((run_dir / RESULTS_FILE).read_bytes())
    seen = {a: int(n) for a, n in results.get("anomaly_counts", {}).items() if a in MODEL_ANOMALIES}
    target = next((p.get("anomaly_counts") or {} for p in results.get("partitions") or ()
                   if p.get("topic") == topic and p.get("partition") == TARGET_PARTITION), {})
    on_target = {a: int(n) for a, n in target.items() if a in MODEL_ANOMALIES}
    note = error or ""
    try:
        failed = [op for op in read_history(run_dir) if op.process == NEMESIS and op.error]
    except HistoryError as e:
        failed, note = [], note or str(e)
    if failed and not note:
        step = (failed[0].value or {}).get("step", failed[0].f)
        note = f"the schedule stopped at {step!r}: {failed[0].error}"
    return Try(run_dir, seen, results.get("valid"), note, on_target)


def hunt(config: HuntConfig, tries: int, every_try: bool, safe_tries: int,
         run: RunFn, echo: Callable[[str], None] = lambda _: None,
         safe_version: str | None = None, recipes: Sequence[Recipe] = RECIPES) -> list[Row]:
    """The hunt's rows: for each recipe the model says shows a permitted anomaly on
    ``config`` (one not already hunted by an earlier recipe), up to ``tries`` runs (all
    of them with ``every_try``) until each shows; then ``safe_tries`` runs of the same
    recipes on the safe config (on ``safe_version``, default the config's own), those
    whose replay there shows nothing (the others the safe config's own hunt shows). Only
    ``recipes`` are considered (default: all of :data:`RECIPES`)."""
    permitted = config.permitted()
    rows: list[Row] = []
    covered: set[str] = set()
    for recipe in recipes:  # each permitted anomaly is hunted with the first recipe that shows it
        predicted = config.predicted(recipe)
        hunted = tuple(a for a in MODEL_ANOMALIES if a in permitted and a in predicted and a not in covered)
        covered.update(hunted)
        if hunted:
            rows.append(Row(recipe, config, hunted, predicted, permitted))
    safe_config = safe(safe_version or config.kafka_version)
    safe_permitted = safe_config.permitted()
    if safe_config != config and safe_tries:  # where the model forbids every anomaly
        rows += [Row(r.recipe, safe_config, (), predicted, safe_permitted)
                 for r in list(rows) if not (predicted := safe_config.predicted(r.recipe))]
    for row in rows:
        limit = tries if row.hunted else safe_tries
        for i in range(1, limit + 1):
            spec = spec_for(row.recipe, row.config, seed=i, hunting=bool(row.hunted))
            run_dir, error = run(spec)
            t = read_try(run_dir, error, spec.topic.name)
            row.tries.append(t)
            shown = ", ".join(f"{a} {n}" for a, n in t.seen.items() if n) or "no anomaly"
            echo(f"{row.recipe.name} [{row.config.label}] try {i}/{limit}: {shown}, valid={t.valid}"
                 f"{' (' + t.note + ')' if t.note else ''}  {run_dir}")
            if row.hunted and row.demonstrated and not every_try:
                break
    return rows


def unhunted(config: HuntConfig, rows: Sequence[Row]) -> dict[str, str]:
    """Anomalies the model permits on ``config`` that no row hunts: no recipe of the
    recipe shows them (anomaly -> the model's shortest schedule)."""
    hunted = {a for r in rows if r.config == config for a in r.hunted}
    return {a: s for a, s in config.permitted().items() if a not in hunted}
