"""``comparison.html``: what each config lost beside what its guarantees allow, and its price.

One self-contained page (bokeh's JS inline, no request leaves it), from the ``cells``
rows of :func:`faultline.analysis.pipeline.analyze`:

- per fault set, a grid of acks (rows) x min.insync.replicas (columns), one grid per
  unclean election and Kafka version swept; each cell shows what the guarantee table
  expects (loss forbidden or permitted, :func:`faultline.analysis.aggregate.expected_loss`)
  and its state (:mod:`faultline.analysis.evidence`: ``violation``, ``unknown``,
  ``demonstrated``, ``not-demonstrated``, ``held``), colored by it, with the run that
  shows it, each targeted run's outcome beside what the model predicts of it, and the
  random seeds' own figures (loss in k of n runs, its 95 % interval, how much: the
  chance a plain random night would have seen the loss); links to its runs' reports.
  Configs that differ in another swept axis share a grid cell, each labelled;
- the price of durability: acknowledged throughput, p99 latency and unavailability
  against the probability of loss, one point per config, and the same as a table;
- the trend: each cell's loss and verdict night by night.

The grid shows the newest night; the trend every night given. A config is a cell key
(what its sweep swept) and its config columns (the rest of its ``test.json``): two
sweeps that swept the same axes over other defaults have the same keys, and are told
apart by the columns that differ.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from bokeh.embed import components
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure
from bokeh.resources import Resources

from faultline.analysis.evidence import STATES, Evidence, evidence, model_loses, run_status, status
from faultline.analysis.tables import PER_RUN, config_columns
from faultline.rundir import write_atomic
from faultline.spec import TestSpec

COMPARISON_FILE = "comparison.html"
#: A color per state (:data:`faultline.analysis.evidence.STATES`).
COLORS = {"violation": "#b3261e", "unknown": "#6b7580", "demonstrated": "#d08c00",
          "not-demonstrated": "#7b3fa0", "held": "#1e7b34"}
ACKS_ORDER = ("0", "1", "all")


#: The config columns of a cells row (every test.json field but a run's own).
CONFIG = tuple(sorted(frozenset(config_columns(TestSpec())) - PER_RUN))
#: A config: its cell key and its config columns' values.
Config = tuple[str, tuple[Any, ...]]
#: Each cells row's :func:`~faultline.analysis.evidence.evidence`, by the row's ``id()``.
States = Mapping[int, Evidence]

def decided(cell: Mapping[str, Any]) -> int:
    """The runs of a cells row whose loss is decided: ``p_loss``'s denominator."""
    return int(cell.get("runs") or 0) - int(cell.get("runs_undecided") or 0)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.0f}%"


def _num(x: Any, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(float(x))


def _states_of(cells: Sequence[Mapping[str, Any]]) -> dict[int, Evidence]:
    """The :data:`States` of ``cells``: each row's evidence, computed once."""
    return {id(c): evidence(c) for c in cells}


def _link(report: Any, out: Path) -> str | None:
    if not report:
        return None
    try:
        return os.path.relpath(str(report), str(out))
    except ValueError:  # another drive
        return Path(str(report)).as_uri()


def config(cell: Mapping[str, Any]) -> Config:
    """The config of a cells row: two rows are of one config only when this is equal."""
    return str(cell["cell"]), tuple(cell.get(c) for c in CONFIG)


def apart(cells: Sequence[Mapping[str, Any]]) -> dict[Config, str]:
    """Per config of ``cells``: ``col=value, ...`` of the config columns that tell it apart
    from the others of its key ("" when its key is its own), unique among them: the
    columns whose values other than null differ (a row of runs without ``test.json`` has
    only its swept columns: it must not make every column one that differs), and while
    two configs look alike, the next column set in one and null in the other."""
    by_key: dict[str, set[Config]] = {}
    for c in cells:
        by_key.setdefault(str(c["cell"]), set()).add(config(c))
    out = {}
    for same in by_key.values():
        differ = [i for i, _ in enumerate(CONFIG) if len({v[i] for _, v in same} - {None}) > 1]
        for i, _ in enumerate(CONFIG):
            if len({tuple(v[j] for j in differ) for _, v in same}) == len(same):
                break
            if i not in differ and len({v[i] for _, v in same}) > 1:
                differ = sorted((*differ, i))
        for k, v in same:
            out[(k, v)] = ", ".join(f"{CONFIG[i]}={v[i]}" for i in differ)
    return out


def _name(key: str, also: str) -> str:
    return f"{key} ({also})" if also else key


def names(cells: Sequence[Mapping[str, Any]]) -> dict[Config, str]:
    """Per config of ``cells``: its name, unique among them: its cell key, and what tells it
    apart from another config of that key (:func:`apart`)."""
    return {conf: _name(conf[0], also) for conf, also in apart(cells).items()}


def _run_view(run: Mapping[str, Any], out: Path) -> dict[str, Any]:
    """What the template shows of any run: its violations, the link to its report, its error."""
    return {"violations": ", ".join(run.get("violations") or ()), "href": _link(run.get("report"), out),
            "error": run.get("error")}


def view(cell: Mapping[str, Any], ev: Evidence, out: Path, grid_axes: Sequence[str],
         also: str = "") -> dict[str, Any]:
    """What the template shows of one cells row, whose evidence is ``ev``; ``grid_axes`` are
    the config columns the grid places it by (its label names the other swept axes, and
    ``also``: what tells it apart from another config of its key, :func:`apart`)."""
    key = str(cell["cell"])
    label = ", ".join([p for p in key.split(",") if p.split("=")[0].replace(".", "_") not in grid_axes]
                      + ([also] if also else []))
    runs = [{"run": r["run"], "seed": r.get("seed"), "lost": r.get("n_lost_write"),
             "valid": r.get("valid") if r.get("status") == "done" else r.get("status"), **_run_view(r, out)}
            for r in cell.get("run_list") or ()]
    targeted = [{"recipe": r["recipe"], "status": run_status(r), "lost": r.get("n_lost_write") or 0,
                 "model": "loses data" if model_loses(r) else "keeps every write", **_run_view(r, out)}
                for r in cell.get("targeted") or ()]
    return {
        "key": key, "name": _name(key, also), "label": label, "status": status(cell),
        "state": ev.state, "why": ev.why, "shown_by": _link((ev.run or {}).get("report"), out),
        "targeted": targeted,
        "expected": cell.get("expected_loss") or "unknown",
        "expected_reason": cell.get("expected_reason") or "", "runs": runs,
        "n": decided(cell), "k": cell.get("runs_lost") or 0, "failed": cell.get("runs_failed") or 0,
        "undecided": cell.get("runs_undecided") or 0,
        "p": _pct(cell.get("p_loss")),
        "ci": "-" if cell.get("p_loss_low") is None else
              f"{_pct(cell.get('p_loss_low'))}-{_pct(cell.get('p_loss_high'))}",
        "lost_sum": cell.get("lost_sum") or 0, "lost_median": _num(cell.get("lost_median"), "{:g}"),
        "lost_max": cell.get("lost_max") or 0, "violations": ", ".join(cell.get("violations") or ()),
        "throughput": _num(cell.get("acked_per_s")), "p50": _num(cell.get("p50_ms")),
        "p99": _num(cell.get("p99_ms")), "unavailability": _pct(cell.get("unavailability")),
        "to_loss": _num(cell.get("fault_to_first_loss_s"), "{:.2f} s"),
    }


def grids(cells: Sequence[Mapping[str, Any]], out: Path,
          states: States | None = None) -> list[dict[str, Any]]:
    """Per fault set, per (unclean, version): acks x min.insync grids of :func:`view` lists;
    ``states``: the rows' evidence (default: computed here)."""
    states = states or _states_of(cells)
    placed = ("producer_acks", "topic_min_insync_replicas", "nemesis_faults",
              "topic_unclean_leader_election_enable", "kafka_version")
    names = apart(cells)
    out_grids: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in cells:
        key = (c.get("nemesis_faults") or "none", c.get("topic_unclean_leader_election_enable"),
               c.get("kafka_version"))
        unclean = key[1]
        g = out_grids.setdefault(key, {"faults": key[0], "unclean": None if unclean is None else
                                       "on" if unclean else "off",
                                       "version": key[2], "slots": {}})
        g["slots"].setdefault((str(c.get("producer_acks")), c.get("topic_min_insync_replicas")), []).append(
            view(c, states[id(c)], out, placed, names[config(c)]))
    result = []
    for key in sorted(out_grids, key=lambda k: tuple(map(str, k))):
        g = out_grids[key]
        acks = sorted({a for a, _ in g["slots"]}, key=lambda a: ACKS_ORDER.index(a) if a in ACKS_ORDER else 9)
        mins = sorted({m for _, m in g["slots"]}, key=lambda m: (m is None, m))
        g["rows"] = [{"acks": a, "cells": [g["slots"].get((a, m), []) for m in mins]} for a in acks]
        g["mins"] = mins
        result.append(g)
    return result


def price_plot(cells: Sequence[Mapping[str, Any]], states: States | None = None) -> tuple[str, str]:
    """Bokeh (script, div): throughput, p99 and unavailability against the probability of loss;
    ``states``: the rows' evidence (default: computed here)."""
    states = states or _states_of(cells)
    shown = [states[id(c)].state for c in cells]

    def num(x: Any, scale: float = 1.0) -> float:  # none: no point (not one at 0)
        return math.nan if x is None else scale * float(x)

    src = ColumnDataSource({
        "p": [num(c.get("p_loss")) for c in cells],
        "thr": [num(c.get("acked_per_s")) for c in cells],
        "p99": [num(c.get("p99_ms")) for c in cells],
        "unav": [num(c.get("unavailability"), 100) for c in cells],
        "cell": [str(c["cell"]) for c in cells],
        "color": [COLORS[s] for s in shown],
        "state": shown,
    })
    figs = []
    for col, title in (("thr", "acked sends/s"), ("p99", "p99 latency (ms)"), ("unav", "unavailable (%)")):
        f = figure(height=300, sizing_mode="stretch_width", title=f"{title} vs probability of loss",
                   x_axis_label="probability of loss (runs that lost an acked write)", y_axis_label=title,
                   x_range=Range1d(start=-0.05, end=1.05), toolbar_location=None)
        f.scatter("p", col, source=src, size=12, color="color", alpha=0.8, legend_field="state")
        f.add_tools(HoverTool(tooltips=[("cell", "@cell"), ("p(loss)", "@p{0.00}"),
                                        (title, f"@{col}{{0.0}}")]))
        f.legend.location = "top_left"
        figs.append(f)
    script, div = components(row(*figs, sizing_mode="stretch_width"))
    return script, div


def _worst(cells: Sequence[Mapping[str, Any]], states: States) -> dict[tuple[Config, str], Mapping[str, Any]]:
    """Per (config, night), its cells row; of several (sweeps of one night) the first by
    :data:`~faultline.analysis.evidence.STATES`, then the newest."""
    out: dict[tuple[Config, str], Mapping[str, Any]] = {}
    for c in sorted(cells, key=lambda c: (-STATES.index(states[id(c)].state), str(c["created"]))):
        out[(config(c), str(c["night"]))] = c
    return out


def trend(all_cells: Sequence[Mapping[str, Any]], states: States | None = None) -> dict[str, Any]:
    """Per config, its row per night (oldest first): state, the random seeds' status, k of
    n, lost writes; a night with several sweeps of the config shows the first by state
    (:func:`_worst`). A row is named by its cell key, and by what tells it apart from
    another config of that key (:func:`apart`). ``states``: the rows' evidence (default:
    computed here)."""
    states = states or _states_of(all_cells)
    nights = sorted({str(c["night"]) for c in all_cells})
    named = names(all_cells)
    per: dict[str, dict[str, Mapping[str, Any]]] = {}
    for (conf, when), c in _worst(all_cells, states).items():
        per.setdefault(named[conf], {})[when] = c
    rows = []
    for key in sorted(per):
        entries = []
        for n in nights:
            night = per[key].get(n)
            entries.append(None if night is None else {
                "state": states[id(night)].state, "status": status(night),
                "k": night.get("runs_lost") or 0, "n": decided(night),
                "lost": night.get("lost_sum") or 0})
        rows.append({"key": key, "nights": entries})
    return {"nights": nights, "rows": rows}


def render(all_cells: Sequence[Mapping[str, Any]], out: Path, sweeps: Sequence[str]) -> str:
    """The page's HTML; ``all_cells`` are the cells rows of every night (each with its
    ``targeted`` runs: :func:`faultline.analysis.evidence.with_targeted`), ``out`` the
    directory the page is written to (links to reports are relative to it)."""
    states = _states_of(all_cells)
    latest_night = max((str(c["night"]) for c in all_cells), default="")
    latest = [c for (_, night), c in _worst(all_cells, states).items() if night == latest_night]
    names = apart(latest)
    script, div = price_plot(latest, states)
    counts = {s: sum(1 for c in latest if states[id(c)].state == s) for s in STATES}
    env = jinja2.Environment(loader=jinja2.PackageLoader("faultline.analysis", "templates"),
                             autoescape=jinja2.select_autoescape(("html", "j2")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("comparison.html.j2").render(
        grids=grids(latest, out, states),
        price=[view(c, states[id(c)], out, (), names[config(c)]) for c in latest],
        trend=trend(all_cells, states),
        counts=counts, colors=COLORS, sweeps=sweeps, night=latest[0]["night"] if latest else "-",
        js=Resources(mode="inline", components=["bokeh"]).render_js(), script=script, div=div,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))


def write_comparison(all_cells: Sequence[Mapping[str, Any]], out: Path, sweeps: Sequence[str]) -> Path:
    """Write ``out/comparison.html`` (atomically); return its path."""
    out.mkdir(parents=True, exist_ok=True)
    return write_atomic(out / COMPARISON_FILE, render(all_cells, out, sweeps).encode())
