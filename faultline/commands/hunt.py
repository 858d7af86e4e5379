"""``faultline hunt``: show on real Kafka each loss the reference model permits for a
config, and its absence on the safe config (:mod:`faultline.hunt`), each try a
:func:`faultline.run.runner.run_test` into ``<results>/hunt-<UTC time>/``."""

from __future__ import annotations

import io
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console

from faultline.commands.options import check_kafka_version
from faultline.errors import FaultlineError
from faultline.hunt.page import render_page, render_table
from faultline.hunt.recipes import RECIPES, HuntConfig
from faultline.hunt.runs import RunFn, hunt, unhunted
from faultline.rundir import write_atomic
from faultline.spec import ACKS, DEFAULT_KAFKA_VERSION, TestSpec


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
