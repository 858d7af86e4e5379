"""``faultline hunt``: show on real Kafka each loss the reference model permits for a
config, and its absence on the safe config.

For the config (acks, min.insync, unclean, Kafka version) the model explores fault
schedules (:func:`faultline.checkers.model.table.explore_cell`, faults kill, pause and
a wipe of one replica, leaders included: :data:`HUNT_FAULTS`) and names each anomaly
it permits with its shortest schedule. Each of :data:`RECIPES` is a model schedule,
compiled into a targeted schedule (:mod:`faultline.targeted`) by
:func:`faultline.run.compile.compile_schedule`, whose per-step rule table derives each
wait from the model's replayed state. The model replays each recipe on the config; a
recipe is hunted for the anomalies that replay shows and the exploration permits.

Why the recipes, and not the exploration's shortest schedules, are what is compiled:
a shortest schedule leans on what the model leaves out. A follower there fetches only
on ``fetch(k)``, so ``produce crash(1)`` means "the followers did not fetch", which on
a real cluster must become a hold placed before the produce and kept shorter than
``replica.lag.time.max.ms`` (no ``tick`` between); the search also faults single
followers in any order before anything binds them and pauses or wipes whichever
replica is shortest; and its controller never fails, so it may crash both followers
and tick (``crash(3) crash(2) tick``), which on 3 combined KRaft nodes takes the quorum
down. A recipe states the hold (``cut(1,2) cut(1,3)``, ``pause(2) pause(3)``), faults
the leader, both followers, or one of them once both are bound, and keeps a quorum
wherever the controller acts, which the rule table covers; its replay on the config
shows the same anomalies as the shortest schedule (``predicted``, printed beside it in
the table).
All recipes run on 3 nodes: a follower is held by cutting replication only (the
``hold`` step), so it stays in the KRaft quorum.

Each recipe runs on a fresh cluster (a normal run directory: history, results.json,
report.html) up to ``tries`` times, until the checker's results show every anomaly it
hunts on the partition its schedule faults (:data:`TARGET_PARTITION`); then the same
recipe runs on the safe config (:func:`safe`: acks=all, min.insync=2, unclean off,
idempotence on), where the model forbids them, and must stay valid (a recipe whose
replay shows an anomaly there too is left to the safe config's own hunt). An anomaly
seen where the model forbids it, or a run the checker finds invalid, is a violation: a
finding about Kafka or about the model. The table is printed and written as
``hunt.html`` beside the runs (``<results>/hunt-<UTC time>/``).
"""

from __future__ import annotations

import functools
import html
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console

from faultline.checkers.guarantees import elr_enabled
from faultline.checkers.model.explore import LEADER_FAULT, replay
from faultline.checkers.model.outcome import MODEL_ANOMALIES, outcome
from faultline.checkers.model.state import Acks, ModelConfig
from faultline.checkers.model.steps import Step
from faultline.checkers.model.table import ON_DEMAND_BOUND, Cell, explore_cell
from faultline.cluster.cli import check_kafka_version
from faultline.errors import FaultlineError, HistoryError
from faultline.history import NEMESIS, read_history
from faultline.run.compile import compile_schedule
from faultline.rundir import REPORT_FILE, RESULTS_FILE, write_atomic
from faultline.spec import (
    ACKS,
    DEFAULT_KAFKA_VERSION,
    KafkaSpec,
    NemesisSpec,
    ProducerSpec,
    TestSpec,
    TopicSpec,
    WorkloadSpec,
)

#: The fault kinds the model explores for a hunt: what the recipes use, with data
#: destroyed on at most :data:`HUNT_DATA_LOSS` replica.
HUNT_FAULTS = frozenset({"kill", "pause", "wipe", LEADER_FAULT})
HUNT_DATA_LOSS = 1
#: The partition a compiled schedule faults (``leader of 0``, ``followers of 0``:
#: :func:`faultline.run.compile.compile_schedule`), the model's one partition: only an
#: anomaly there demonstrates a recipe.
TARGET_PARTITION = 0


@dataclass(frozen=True, slots=True)
class Recipe:
    """A model schedule that shows an anomaly, and the config it is compiled on.

    ``model`` is in the model's step syntax, replica 1 the first leader; it ends with a
    ``produce`` after the failover, as the real workload keeps writing. ``on`` is the
    model config whose replay the compiler reads its waits from (the one the recipe
    demonstrates); the compiled :attr:`schedule` runs unchanged on every config.
    ``time_limit_s`` covers the schedule. Every recipe runs on 3 nodes.
    """

    name: str
    model: str
    on: ModelConfig
    why: str
    time_limit_s: float = 20.0

    def model_steps(self) -> tuple[Step, ...]:
        return tuple(Step.parse(s) for s in self.model.split())

    @property
    def schedule(self) -> tuple[str, ...]:
        """The targeted schedule: :func:`faultline.run.compile.compile_schedule` of the model's."""
        return compile_schedule(self.model_steps(), self.on)


def _on(acks: Acks, min_insync: int, unclean: bool = False, elr: bool = True) -> ModelConfig:
    return ModelConfig(replication_factor=3, acks=acks, min_insync=min_insync, unclean=unclean, elr=elr)


#: The recipes: model schedules compiled into targeted ones (see the module docstring).
RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "leader-crash-followers-held",
        "pause(2) pause(3) produce crash(1) resume(2) resume(3) tick produce restart(1) fetch(1)",
        _on("1", 2),
        "The model's 'produce crash(1)' with no fetch between: a real follower fetches on its own, so "
        "both are paused while the leader acknowledges, then the leader is killed; a follower still in "
        "the ISR takes over and the old leader truncates what only it had."),
    Recipe(
        "unclean-election-stale-follower",
        "cut(1,2) cut(1,3) produce tick tick tick crash(1) tick heal produce restart(1) fetch(1)",
        _on("all", 1, unclean=True),
        "The followers are held (replication cut, still in the KRaft quorum) until the leader drops "
        "them from the ISR for lag (the model's ticks): the ISR is the leader alone, which acknowledges "
        "alone; it is killed and a stale follower, registered all along, is elected uncleanly.",
        time_limit_s=30.0),
    Recipe(
        "wipe-last-isr-member",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick wipe(1) heal "
        "tick fetch(2) fetch(3) produce",
        _on("all", 2, elr=False),
        "Committed writes on every replica; the followers are held until the leader drops them from "
        "the ISR for lag and the ISR is the leader alone; that last ISR member comes back empty. Without "
        "KIP-966 (Kafka before 4.1) it is the only electable replica and leads with an empty log; with "
        "it, a follower that left the ISR below min.insync is in the ELR and is elected instead.",
        time_limit_s=35.0),
    Recipe(
        "elr-limit-unclean-restarts",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick crash(2) "
        "tick restart(2) tick crash(3) tick restart(3) tick wipe(1) heal tick fetch(2) fetch(3) produce",
        _on("all", 2),
        "KIP-966's limit (the model's elr-unclean-restart-loss): as wipe-last-isr-member until the ISR "
        "is the leader alone, then each held follower in turn is killed, fenced (the model's tick: the "
        "session timeout) and restarted: back from an unclean shutdown, it leaves the ELR (one at a "
        "time, so that two of the three KRaft voters stay up). The leader is wiped: ISR and ELR are "
        "empty, and the controller elects the last known leader, empty: committed data lost with one "
        "wipe, no unclean setting.",
        time_limit_s=100.0),
    Recipe(
        "lose-unflushed-last-isr-member",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick "
        "lose-unflushed(1) heal tick fetch(2) fetch(3) produce",
        _on("all", 1),
        "As wipe-last-isr-member, but the last ISR member loses only what it had not flushed to disk (Kafka "
        "flushes on a segment roll, so in a short run nearly all of it): with min.insync=1 the ISR of the "
        "leader alone still acknowledges, nobody is in the ELR, and the leader comes back with its log "
        "cut and is elected again; the followers truncate to it.",
        time_limit_s=35.0),
)


@dataclass(frozen=True, slots=True)
class HuntConfig:
    """The settings a hunt varies."""

    acks: Acks
    min_insync: int
    unclean: bool
    kafka_version: str = DEFAULT_KAFKA_VERSION

    @property
    def label(self) -> str:
        return (f"acks={self.acks} min.insync={self.min_insync} unclean={str(self.unclean).lower()} "
                f"kafka={self.kafka_version}")

    @property
    def slug(self) -> str:
        return f"acks{self.acks}-misr{self.min_insync}{'-unclean' if self.unclean else ''}"

    def model_config(self) -> ModelConfig:
        return ModelConfig(replication_factor=3, acks=self.acks, min_insync=self.min_insync,
                           unclean=self.unclean, elr=elr_enabled(self.kafka_version))

    def permitted(self) -> dict[str, str]:
        """Anomaly -> the model's shortest schedule, for the hunt's fault kinds."""
        return dict(_permitted(Cell(self.acks, self.min_insync, self.unclean, HUNT_FAULTS,
                                    HUNT_DATA_LOSS, elr=self.model_config().elr)))

    def predicted(self, recipe: Recipe) -> frozenset[str]:
        """The anomalies the model shows when it replays ``recipe``'s model schedule."""
        return outcome(replay(self.model_config(), recipe.model_steps())).names


@functools.cache
def _permitted(cell: Cell) -> tuple[tuple[str, str], ...]:
    return tuple((name, " ".join(map(str, s))) for name, s in explore_cell(cell, ON_DEMAND_BOUND).items())


def safe(version: str) -> HuntConfig:
    """The safe config of the family: acks=all, min.insync=2, unclean off."""
    return HuntConfig("all", 2, False, version)


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
    # The KRaft controller looks for partitions to elect uncleanly every
    # unclean.leader.election.interval.ms (minutes by default): far longer than a short run.
    unclean = {"unclean.leader.election.interval.ms": "1000"} if config.unclean else {}
    return TestSpec(
        name=f"{recipe.name}-{config.slug}", seed=seed, time_limit_s=recipe.time_limit_s,
        kafka=KafkaSpec(version=config.kafka_version, nodes=3, heap_mb=384, broker_config=unclean),
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


def render_table(rows: Sequence[Row], missing: dict[str, str] | None = None) -> str:
    """The printed table: one line per recipe and config; then what no recipe hunts."""
    lines = [f"{'recipe':34} {'config':48} {'model predicts':34} result"]
    for r in rows:
        lines.append(f"{r.recipe.name:34} {r.config.label:48} "
                     f"{', '.join(sorted(r.predicted)) or 'nothing':34} {r.outcome_text()}")
    for a, s in (missing or {}).items():
        lines.append(f"{a}: permitted by the model ({s}), but no recipe shows it")
    return "\n".join(lines)


def render_page(rows: Sequence[Row], root: Path, missing: dict[str, str] | None = None) -> str:
    """``hunt.html``: the table with every run linked, the recipes' schedules, no assets."""
    e = html.escape
    body: list[str] = []
    for r in rows:
        runs = " ".join(
            f'<a href="{e(str((t.run_dir / REPORT_FILE).relative_to(root)))}">{i}</a>'
            if t.run_dir is not None and t.run_dir.is_relative_to(root) else str(i)
            for i, t in enumerate(r.tries, 1))
        held = not r.hunted and all(t.valid is True and not any(t.seen.values()) for t in r.tries)
        cls = "bad" if r.violations else "ok" if r.demonstrated or held else "miss"
        shortest = "<br>".join(f"{e(a)}: <code>{e(s)}</code>" for a, s in sorted(r.shortest.items()))
        body.append(f"<tr class={cls}><td>{e(r.recipe.name)}</td><td>{e(r.config.label)}</td>"
                    f"<td>{e(', '.join(r.hunted) or 'none (must stay valid)')}</td>"
                    f"<td>{e(', '.join(sorted(r.predicted)) or 'nothing')}</td><td>{shortest or '-'}</td>"
                    f"<td>{e(r.outcome_text())}</td><td>{runs}</td></tr>")
    recipes = "".join(
        f"<h3>{e(rec.name)}</h3><p>{e(rec.why)}</p><p>model: <code>{e(rec.model)}</code>, compiled "
        f"with the waits of its replay on {e(_label(rec.on))}:</p>"
        f"<pre>{e(chr(10).join(rec.schedule))}</pre>"
        for rec in RECIPES if any(r.recipe == rec for r in rows))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>faultline hunt</title>
<style>body{{font:14px sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top}} tr.ok td:nth-child(6){{color:#070}}
tr.bad td{{background:#fdd}} tr.miss td:nth-child(6){{color:#a60}} code,pre{{background:#f4f4f4}}</style>
</head><body><h1>faultline hunt</h1>
<p>Each row: a targeted schedule (a recipe's model schedule, compiled) on one config; what the reference
model predicts when it replays the recipe's model schedule, the model's shortest schedules for
the anomalies it permits there, and what real Kafka showed (links: each try's report).</p>
<table><tr><th>recipe</th><th>config</th><th>hunted</th><th>model predicts</th>
<th>model's shortest schedules</th><th>real Kafka</th><th>tries</th></tr>{"".join(body)}</table>
{"".join(f"<p>{e(a)}: permitted by the model (<code>{e(sched)}</code>), but no recipe shows it: "
         f"not hunted.</p>" for a, sched in (missing or {}).items())}
<h2>Recipes</h2>{recipes}</body></html>
"""


def _label(cfg: ModelConfig) -> str:
    return (f"acks={cfg.acks} min.insync={cfg.min_insync} unclean={str(cfg.unclean).lower()} "
            f"elr={str(cfg.elr).lower()}")


def _run_one(results: Path) -> RunFn:
    def run(spec: TestSpec) -> tuple[Path | None, str | None]:
        from faultline.run.runner import run_test

        before = set(results.glob(f"{spec.name}/2*"))
        try:
            outcome = run_test(spec, results=results, console=Console(file=io.StringIO()))
        except FaultlineError as e:
            return None, str(e)
        except Exception as e:  # e.g. a fatal client error the workload let through: one try lost
            made = sorted(set(results.glob(f"{spec.name}/2*")) - before)
            return (made[-1] if made else None), f"the run crashed: {type(e).__name__}: {e}".splitlines()[0]
        return outcome.run_dir, outcome.error
    return run


@click.command("hunt")
@click.option("--acks", type=click.Choice(ACKS), default="all", show_default=True)
@click.option("--min-insync", type=click.IntRange(1, 3), default=2, show_default=True)
@click.option("--unclean/--no-unclean", default=False, show_default=True,
              help="unclean.leader.election.enable")
@click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True,
              callback=check_kafka_version)
@click.option("--tries", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Runs per recipe at most, until real Kafka shows what the model permits.")
@click.option("--every-try", is_flag=True,
              help="Run all --tries even after the anomaly showed (to measure how often it does).")
@click.option("--safe-tries", type=click.IntRange(0, 100), default=1, show_default=True,
              help="Runs of each recipe on the safe config (acks=all, min.insync=2, unclean off).")
@click.option("--recipe", "recipe_names", multiple=True, type=click.Choice([r.name for r in RECIPES]),
              help="Only this recipe (repeatable).  [default: all]")
@click.option("--safe-version", default=None, callback=check_kafka_version,
              help="Kafka version of the safe-config runs.  [default: --kafka-version]")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Results directory; the hunt goes to RESULTS/hunt-<time>/.")
def hunt_command(acks: str, min_insync: int, unclean: bool, kafka_version: str, tries: int,
                 every_try: bool, safe_tries: int, recipe_names: tuple[str, ...], safe_version: str | None,
                 results: Path) -> None:
    """Show on real Kafka the losses the reference model permits for a config, and their
    absence on the safe config. Exit 0: no violation; 1: a violation; 2: an error (a run
    that left no verdict)."""
    config = HuntConfig(acks, min_insync, unclean, kafka_version)  # type: ignore[arg-type]
    root = results / f"hunt-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    chosen = [r for r in RECIPES if r.name in recipe_names] if recipe_names else list(RECIPES)
    rows = hunt(config, tries, every_try, safe_tries, _run_one(root), lambda s: click.echo(s, err=True),
                safe_version, chosen)
    missing = unhunted(config, rows)
    if not rows:
        click.echo(f"the model permits none of the anomalies a recipe hunts on {config.label}; "
                   f"permitted: {', '.join(config.permitted()) or 'none'}")
        return
    click.echo(render_table(rows, missing))
    root.mkdir(parents=True, exist_ok=True)
    page = write_atomic(root / "hunt.html", render_page(rows, root, missing).encode())
    click.echo(f"page: {page}")
    errored = any(t.valid is None for r in rows for t in r.tries)
    sys.exit(1 if any(r.violations for r in rows) else 2 if errored else 0)


__all__ = ["RECIPES", "HuntConfig", "Recipe", "Row", "Try", "hunt", "hunt_command", "unhunted"]
