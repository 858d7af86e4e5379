"""The hunt's results shown: the table printed (:func:`render_table`) and ``hunt.html``
(:func:`render_page`), every run linked."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from faultline.checkers.model.state import ModelConfig
from faultline.hunt.recipes import RECIPES
from faultline.hunt.runs import Row
from faultline.rundir import REPORT_FILE


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
