"""``faultline model``: replay a scenario, list them, or explore the guarantee table.

Forms::

    faultline model --list
    faultline model SCENARIO [--json]
    faultline model --explore [--acks all] [--min-insync 2] [--unclean] [--elr]
                    [--faults kill,leader-fault] [--depth 5] [--walks 1500] [--seed 1] [--json] [--write]

``--explore`` without ``--acks`` explores the default matrix, both without and with
KIP-966 eligible leader replicas (a few minutes);
``--write`` stores that table in the package (``table.json``), which the agreement
tests hold the checker's rules to.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click
from click.core import ParameterSource

from faultline.checkers.model.explore import LEADER_FAULT, Bound
from faultline.checkers.model.outcome import MODEL_ANOMALIES
from faultline.checkers.model.scenarios import SCENARIOS, Row, ScenarioResult, run_scenario
from faultline.checkers.model.steps import ModelStep
from faultline.checkers.model.table import (
    TABLE_BOUND,
    TABLE_PATH,
    Cell,
    default_matrix,
    explore_cell,
    table_to_json,
)
from faultline.faults import FAMILIES
from faultline.rundir import write_atomic


def _log_cell(log: list[list[int]]) -> str:
    """Records grouped by epoch: ``e0:1,2 e1:3``."""
    parts: list[str] = []
    for _, epoch, value in log:
        if parts and parts[-1].startswith(f"e{epoch}:"):
            parts[-1] += f",{value}"
        else:
            parts.append(f"e{epoch}:{value}")
    return " ".join(parts) or "-"


_ROLE = {"leader": "L", "follower": "F", "down": "x", "paused": "z"}


def render_table(res: ScenarioResult) -> str:
    """The step table as text: one line per step, one column per replica."""
    sc = res.scenario
    ids = sorted(res.rows[0].snapshot["replicas"], key=int)
    elr = sc.config.elr
    head = ["#", "step", *[f"r{i} [role log] LEO/HW" for i in ids], "ISR", *(["ELR"] if elr else []),
            "ldr/ep", "what happened"]
    lines: list[list[str]] = []
    for row in res.rows:
        snap = row.snapshot
        cells = [str(row.index), ("~ " if row.phase == "heal" else "") + (str(row.step) if row.step else "-")]
        for i in ids:
            r = snap["replicas"][i]
            cells.append(f"{_ROLE[r['role']]} {_log_cell(r['log'])} {r['leo']}/{r['hw']}")
        c = snap["controller"]
        cells += [_fmt_ids(c["isr"]), *([_fmt_ids(c["elr"])] if elr else []),
                  f"{c['leader'] if c['leader'] is not None else '-'}/{c['epoch']}", row.note]
        lines.append(cells)
    widths = [max(len(x[k]) for x in [head, *lines]) for k in range(len(head) - 1)]
    out = [f"{sc.name}: {sc.title}", "", sc.description, "",
           f"config: {_config_text(res)}", ""]
    for cells in [head, *lines]:
        out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + cells[-1])
    v = res.verdict
    drain = " ".join(f"{o}:{val}" for o, val in v.drain) if v.drain is not None else "none (no leader)"
    out += ["", "L leader, F follower, x down, z paused; log as e<epoch>:<values>; ~ marks the heal phase",
            f"drain (offset:value): {drain}",
            "anomalies: " + (", ".join(f"{n} ({'; '.join(ex)})" for n, ex in sorted(v.anomalies.items()))
                             or "none"),
            "invariants violated: " + (", ".join(sorted({*v.invariants, *res.invariants_during})) or "none")]
    return "\n".join(out)


def _fmt_ids(ids: list[int]) -> str:
    return "{" + ",".join(map(str, ids)) + "}"


def _config_text(res: ScenarioResult) -> str:
    c = res.scenario.config
    return (f"rf={c.replication_factor} acks={c.acks} min.insync={c.min_insync} "
            f"unclean={str(c.unclean).lower()} elr={str(c.elr).lower()} truncation={c.truncation} "
            f"lag={c.lag_ticks} ticks")


def _row_json(row: Row) -> dict[str, Any]:
    return {"index": row.index, "phase": row.phase, "step": str(row.step) if row.step else None,
            "note": row.note, **row.snapshot}


def scenario_json(res: ScenarioResult) -> dict[str, Any]:
    sc, v = res.scenario, res.verdict
    return {"scenario": sc.name, "title": sc.title, "description": sc.description,
            "config": {"replication_factor": sc.config.replication_factor, "acks": sc.config.acks,
                       "min_insync_replicas": sc.config.min_insync, "unclean": sc.config.unclean,
                       "eligible_leader_replicas": sc.config.elr,
                       "truncation": sc.config.truncation, "lag_ticks": sc.config.lag_ticks},
            "steps": [_row_json(r) for r in res.rows],
            "drain": [list(x) for x in v.drain] if v.drain is not None else None,
            "anomalies": {n: list(ex) for n, ex in sorted(v.anomalies.items())},
            "invariants": sorted({*v.invariants, *res.invariants_during})}


def _parse_faults(text: str) -> frozenset[str]:
    names = frozenset(f.strip() for f in text.split(",") if f.strip())
    bad = names - set(FAMILIES) - {LEADER_FAULT}
    if bad or not names:
        what = f"unknown fault kind(s) {', '.join(sorted(bad))}" if bad else "no fault kind given"
        raise click.BadParameter(f"{what}; choose from {', '.join(FAMILIES)}, {LEADER_FAULT}",
                                 param_hint="--faults")
    return names


def _explore(acks: str | None, min_insync: int, unclean: bool, elr: bool, faults: str | None, rf: int,
             bound: Bound, as_json: bool, write: bool) -> None:
    if acks is None:
        if faults is not None:
            raise click.UsageError("--faults needs --acks (without --acks the default matrix is explored)")
        cells = list(default_matrix())
    else:
        fs = _parse_faults("kill,leader-fault" if faults is None else faults)
        cells = [Cell(acks, min_insync, unclean, fs, None, rf, elr)]  # type: ignore[arg-type]
    if write and acks is not None:
        raise click.UsageError("--write stores the default matrix: use it without --acks")
    started = time.perf_counter()
    rows: dict[Cell, dict[str, tuple[ModelStep, ...]]] = {}
    for i, cell in enumerate(cells, 1):
        if len(cells) > 1:
            click.echo(f"\r[{i}/{len(cells)}] exploring {cell.key}\x1b[K", err=True, nl=i == len(cells))
        rows[cell] = explore_cell(cell, bound)
    elapsed = time.perf_counter() - started
    data = {"bound": {"depth": bound.depth, "walks": bound.walks, "walk_length": bound.walk_length,
                      "seed": bound.seed},
            "anomalies": list(MODEL_ANOMALIES),
            "cells": table_to_json(rows)["cells"]}
    if write:
        write_atomic(TABLE_PATH, (json.dumps(data, indent=1) + "\n").encode())
        click.echo(f"wrote {TABLE_PATH}", err=True)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(format_explore_table(rows))
    click.echo(f"\n{len(cells)} cell(s) in {elapsed:.1f}s; bound: exhaustive to {bound.depth} steps, then "
               f"{bound.walks} random walks of {bound.walk_length} (seed {bound.seed})")


def format_explore_table(rows: dict[Cell, dict[str, tuple[ModelStep, ...]]]) -> str:
    """One line per cell: a mark per anomaly (X possible, . not found), then the shortest schedules."""
    abbrev = {"lost-write": "LW", "phantom-read": "PR", "inconsistent-offsets": "IO", "aborted-read": "AR"}
    head = (f"{'elr':5} {'acks':4} {'misr':4} {'uncl':5} {'faults':34} "
            + " ".join(abbrev[a] for a in MODEL_ANOMALIES))
    out = [head, "-" * len(head)]
    for c, found in rows.items():
        fs = ("+".join(sorted(c.faults)) + (f" dl<={c.data_loss}" if c.data_loss is not None else "")
              + (f" f<={c.faulted}" if c.faulted is not None else ""))
        marks = " ".join(("X " if a in found else ". ") for a in MODEL_ANOMALIES)
        out.append(f"{str(c.elr).lower():5} {c.acks:4} {c.min_insync:<4} {str(c.unclean).lower():5} "
                   f"{fs:34} {marks}")
        for name, sched in found.items():
            out.append(f"{'':56}{abbrev[name]}: {' '.join(map(str, sched))}")
    out.append("LW lost-write, PR phantom-read, IO inconsistent-offsets, AR aborted-read; "
               "dl<=N: wipe/lose-unflushed on at most N replicas; f<=N: faults on at most N replicas")
    return "\n".join(out)


@click.command("model")
@click.argument("scenario", required=False)
@click.option("--list", "list_", is_flag=True, help="List the scenarios.")
@click.option("--json", "as_json", is_flag=True, help="Print data instead of a table.")
@click.option("--explore", "explore_", is_flag=True,
              help="Explore fault schedules (the default matrix without --acks).")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default=None,
              help="With --explore: one config.")
@click.option("--min-insync", type=click.IntRange(1, 5), default=2, show_default=True)
@click.option("--unclean/--no-unclean", default=False, show_default=True)
@click.option("--elr/--no-elr", default=False, show_default=True,
              help="With --explore and --acks: KIP-966 eligible leader replicas on.")
@click.option("--faults", default=None, help="Comma-separated fault kinds, e.g. kill,leader-fault.")
@click.option("--rf", type=click.IntRange(1, 5), default=3, show_default=True, help="Replication factor.")
@click.option("--depth", type=click.IntRange(0, 8), default=TABLE_BOUND.depth, show_default=True)
@click.option("--walks", type=click.IntRange(0), default=TABLE_BOUND.walks, show_default=True)
@click.option("--walk-length", type=click.IntRange(1, 40), default=TABLE_BOUND.walk_length, show_default=True)
@click.option("--seed", type=int, default=TABLE_BOUND.seed, show_default=True)
@click.option("--write", is_flag=True, help="With --explore: store the default matrix's table.")
def model(scenario: str | None, list_: bool, as_json: bool, explore_: bool, acks: str | None,
          min_insync: int, unclean: bool, elr: bool, faults: str | None, rf: int, depth: int, walks: int,
          walk_length: int, seed: int, write: bool) -> None:
    """Replay a reference-model SCENARIO as a step table, list scenarios, or --explore."""
    if sum((list_, explore_, scenario is not None)) != 1:
        raise click.UsageError("give one of: SCENARIO, --list, --explore")
    given = [name for name in ("acks", "min_insync", "unclean", "elr", "faults", "rf", "depth", "walks",
                               "walk_length", "seed", "write")
             if click.get_current_context().get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if given and not explore_:
        raise click.UsageError(f"--{given[0].replace('_', '-')} goes with --explore")
    config = [n for n in given if n in ("min_insync", "unclean", "elr", "rf")]
    if config and acks is None:
        raise click.UsageError(f"--{config[0].replace('_', '-')} needs --acks "
                               "(without --acks the default matrix is explored)")
    if acks is not None and min_insync > rf:
        raise click.UsageError(f"--min-insync {min_insync} is above the replication factor (--rf {rf})")
    if list_:
        if as_json:
            click.echo(json.dumps({n: s.title for n, s in SCENARIOS.items()}, indent=2))
        else:
            width = max(map(len, SCENARIOS))
            for name, sc in SCENARIOS.items():
                click.echo(f"{name:{width}}  {sc.title}")
        return
    if explore_:
        bound = Bound(depth, walks, walk_length, seed)
        _explore(acks, min_insync, unclean, elr, faults, rf, bound, as_json, write)
        return
    assert scenario is not None
    found = SCENARIOS.get(scenario)
    if found is None:
        raise click.BadParameter(f"unknown scenario {scenario!r}; see `faultline model --list`",
                                 param_hint="SCENARIO")
    res = run_scenario(found)
    click.echo(json.dumps(scenario_json(res), indent=2) if as_json else render_table(res))
