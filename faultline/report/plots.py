"""The report's bokeh plots: faults as shaded bands over throughput, latency, errors,
availability and (when observed) leader / ISR / HW traces.

Every figure shares one x range, in seconds since the run started, so zooming one
zooms all. Inputs are plain data (see :class:`PlotData`), bounded by the caller
(buckets, a downsampled scatter). :func:`render` returns the HTML fragments to embed: bokeh's
own JavaScript inline (core only, no widgets) and the plots' script and div.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from bokeh.embed import components
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool, Range1d, SingleIntervalTicker
from bokeh.models.annotations import Legend
from bokeh.palettes import Category10_10, Category20_20
from bokeh.plotting import figure
from bokeh.resources import Resources

FAULT_COLORS: Mapping[str, str] = {
    "kill": "#d62728", "stop": "#e377c2", "pause": "#9467bd", "partition": "#ff7f0e",
    "toxic": "#8c564b", "toxics": "#8c564b", "wipe": "#7f0000", "lose-unflushed": "#b8860b",
    "clock": "#17becf", "degrade": "#bcbd22", "crash-client": "#393b79", "pause-client": "#6b6ecf",
}
OUTCOME_COLORS: Mapping[str, str] = {"ok": "#1f77b4", "fail": "#d62728", "info": "#ff7f0e",
                                     "open": "#7f7f7f"}
_TOOLS = "xpan,xwheel_zoom,box_zoom,reset,save"


@dataclass(frozen=True, slots=True)
class Band:
    """A fault drawn from ``start`` to ``end`` seconds."""

    f: str
    start: float
    end: float
    label: str
    open: bool = False


@dataclass(frozen=True, slots=True)
class StaleHW:
    """A HW a deposed leader answered at ``time`` (seconds), under leader ``epoch``,
    older than the ``newest`` epoch seen before: drawn as a mark off the HW line."""

    time: float
    hw: int
    epoch: int
    newest: int


@dataclass(frozen=True, slots=True)
class Trace:
    """One partition's observed leader, ISR size and HW over time (seconds). ``hw`` is
    None where it was not read, or was a deposed leader's stale answer (``stale``): a
    gap in the line, never a dip that would read as the HW going back."""

    time: list[float]
    leader: list[float]
    isr: list[float]
    hw: list[float | None]
    stale: list[StaleHW] = field(default_factory=list)


@dataclass(slots=True)
class PlotData:
    """Everything the plots draw; series are aligned with ``bucket_starts`` (seconds)."""

    duration: float
    bucket_width: float
    bucket_starts: list[float]
    bands: list[Band]
    throughput: dict[str, list[float]]
    scatter_t: list[float]
    scatter_ms: list[float]
    scatter_outcome: list[str]
    scatter_total: int
    percentiles: dict[str, list[float | None]]
    errors: dict[str, list[int]]
    unavailable: dict[str, list[tuple[float, float]]]
    traces: dict[str, Trace] = field(default_factory=dict)


def _a(xs: Sequence[float | None]) -> Any:
    """A float array (None as NaN): bokeh sends numpy arrays as binary, lists as JSON
    numbers, which for a long run is several times slower and larger."""
    return np.array([np.nan if x is None else x for x in xs], dtype=np.float64)


def fault_color(f: str) -> str:
    """The color a fault kind is drawn in (grey for kinds without one)."""
    return FAULT_COLORS.get(f, "#7f7f7f")


def _figure(title: str, x: Range1d, height: int, **kw: Any) -> Any:
    p = figure(title=title, x_range=x, height=height, sizing_mode="stretch_width", tools=_TOOLS,
               active_drag="xpan", active_scroll="xwheel_zoom", **kw)
    p.toolbar.logo = None  # the logo links to bokeh.org: the report references nothing outside itself
    p.xaxis.axis_label = "seconds since the run started"
    p.title.text_font_size = "13px"  # type: ignore[union-attr]
    p.min_border_left = 70
    return p


def _legend(p: Any, items: list[tuple[str, list[Any]]], per_row: int = 8) -> None:
    """A horizontal legend above the plot: legends beside plots would make the frames
    differ in width, and the time axes would no longer line up."""
    if items:
        p.add_layout(Legend(items=items, click_policy="hide", label_text_font_size="10px",
                            orientation="horizontal", nrows=-(-len(items) // per_row), spacing=12,
                            margin=2, border_line_alpha=0), "above")


def _shade(p: Any, bands: Sequence[Band]) -> None:
    """Shade every fault's time span across the plot's full height (one glyph renderer
    for all of them: a BoxAnnotation per band costs bokeh seconds on a long run)."""
    if not bands:
        return
    src = ColumnDataSource({"x0": _a([b.start for b in bands]), "x1": _a([b.end for b in bands]),
                            "color": [fault_color(b.f) for b in bands]})
    p.vstrip(x0="x0", x1="x1", source=src, fill_color="color", fill_alpha=0.13, line_alpha=0,
             level="underlay")


def _faults(d: PlotData, x: Range1d) -> Any:
    kinds = sorted({b.f for b in d.bands}) or ["(no faults)"]
    p = _figure("Faults (shaded in every plot below)", x, 60 + 26 * len(kinds), y_range=kinds)
    src = ColumnDataSource({
        "f": [b.f for b in d.bands], "left": [b.start for b in d.bands],
        "right": [b.end for b in d.bands], "label": [b.label for b in d.bands],
        "color": [fault_color(b.f) for b in d.bands],
        "span": [f"{b.start:.2f}-{b.end:.2f} s" + (" (never healed)" if b.open else "") for b in d.bands],
    })
    bars = p.hbar(y="f", left="left", right="right", height=0.7, color="color", alpha=0.75, source=src)
    p.text(x="left", y="f", text="label", source=src, text_font_size="10px", text_baseline="middle",
           x_offset=3)
    p.add_tools(HoverTool(renderers=[bars], tooltips=[("fault", "@label"), ("when", "@span")]))
    p.xaxis.visible = False
    return p


def _throughput(d: PlotData, x: Range1d) -> Any:
    p = _figure(f"Acknowledged sends per second ({d.bucket_width:g} s buckets)", x, 240)
    _shade(p, d.bands)
    items = []
    parts = [k for k in d.throughput if k != "all"]
    for i, name in enumerate(parts):
        r = p.step(_a(d.bucket_starts), _a(d.throughput[name]), mode="after", line_width=1.3,
                   color=Category10_10[i % 10], alpha=0.8)
        items.append((name, [r]))
    if "all" in d.throughput:
        r = p.step(_a(d.bucket_starts), _a(d.throughput["all"]), mode="after", line_width=2.2,
                   color="#222222")
        items.insert(0, ("all partitions", [r]))
    _legend(p, items)
    p.yaxis.axis_label = "acks/s"
    return p


def _latency(d: PlotData, x: Range1d) -> Any:
    shown = "" if len(d.scatter_t) == d.scatter_total else (
        f", {len(d.scatter_t)} of {d.scatter_total} sends drawn")
    # the checker's percentiles are per bucket of completion time: a send that took 30 s
    # is a point at its invoke but in the lines 30 s later, so the title says which is which
    p = _figure(f"Send latency (each send at its invoke time{shown}; lines: percentiles of the ok "
                f"sends acknowledged in each {d.bucket_width:g} s bucket)", x, 300, y_axis_type="log")
    _shade(p, d.bands)
    items = []
    for outcome in ("ok", "fail", "info", "open"):
        idx = [i for i, o in enumerate(d.scatter_outcome) if o == outcome]
        if not idx:
            continue
        src = ColumnDataSource({"t": _a([d.scatter_t[i] for i in idx]),
                                "ms": _a([d.scatter_ms[i] for i in idx])})
        marker = "circle" if outcome == "ok" else "x"
        r = p.scatter("t", "ms", source=src, size=3 if outcome == "ok" else 6, marker=marker,
                      color=OUTCOME_COLORS[outcome], alpha=0.35 if outcome == "ok" else 0.8)
        items.append((f"{outcome} send", [r]))
    mids = [s + d.bucket_width / 2 for s in d.bucket_starts]
    styles = {"p50": ("#2ca02c", "solid"), "p95": ("#bcbd22", "solid"), "p99": ("#9467bd", "solid"),
              "max": ("#555555", "dashed")}
    for name, values in d.percentiles.items():
        color, dash = styles.get(name, ("#000000", "solid"))
        r = p.line(_a(mids), _a(values), color=color, line_dash=dash, line_width=1.8)
        items.append((name, [r]))
    _legend(p, items)
    p.yaxis.axis_label = "latency (ms)"
    return p


def _errors(d: PlotData, x: Range1d) -> Any:
    p = _figure(f"Errors and indeterminate results by kind ({d.bucket_width:g} s buckets)", x, 240)
    _shade(p, d.bands)
    kinds = list(d.errors)
    if kinds:
        data: dict[str, Any] = {"t": _a([s + d.bucket_width / 2 for s in d.bucket_starts])}
        keys = [f"k{i}" for i in range(len(kinds))]
        for key, kind in zip(keys, kinds, strict=True):
            data[key] = np.array(d.errors[kind], dtype=np.int32)
        colors = [Category20_20[(2 * i) % 20] if i < 10 else Category20_20[(2 * i + 1) % 20]
                  for i in range(len(kinds))]
        rs = p.vbar_stack(keys, x="t", width=d.bucket_width * 0.9, fill_color=colors, line_color=None,
                          source=ColumnDataSource(data))
        _legend(p, [(k, [r]) for k, r in zip(kinds, rs, strict=True)], per_row=4)
    else:
        p.text(x=[d.duration / 2], y=[0.5], text=["no errors"], text_align="center")
    p.yaxis.axis_label = "ops per bucket"
    return p


def _availability(d: PlotData, x: Range1d) -> Any:
    names = sorted(d.unavailable) or ["(none)"]
    p = _figure("Unavailability per partition (red: no acknowledged send for longer than the threshold)",
                x, 60 + 28 * len(names), y_range=list(reversed(names)))
    _shade(p, d.bands)
    rows = [(n, a, b) for n in d.unavailable for a, b in d.unavailable[n]]
    src = ColumnDataSource({"p": [r[0] for r in rows], "a": [r[1] for r in rows], "b": [r[2] for r in rows],
                            "len": [f"{r[2] - r[1]:.2f} s" for r in rows]})
    bars = p.hbar(y="p", left="a", right="b", height=0.6, color="#d62728", alpha=0.8, source=src)
    p.add_tools(HoverTool(renderers=[bars],
                          tooltips=[("partition", "@p"), ("unavailable", "@a{0.00}-@b{0.00} s (@len)")]))
    return p


def _traces(d: PlotData, x: Range1d) -> list[Any]:
    figs = []
    for what, title in (("leader", "Leader (node id) per partition"), ("isr", "ISR size per partition"),
                        ("hw", "High watermark per partition")):
        p = _figure(title, x, 200)
        _shade(p, d.bands)
        items, marks = [], []
        for i, (name, tr) in enumerate(sorted(d.traces.items())):
            r = p.step(_a(tr.time), _a(getattr(tr, what)), mode="after", line_width=1.8,
                       color=Category10_10[i % 10])
            items.append((name, [r]))
            if what == "hw" and tr.stale:
                marks.append(p.scatter("t", "hw", source=ColumnDataSource({
                    "t": _a([s.time for s in tr.stale]), "hw": _a([s.hw for s in tr.stale]),
                    "epoch": [s.epoch for s in tr.stale], "newest": [s.newest for s in tr.stale],
                    "p": [name] * len(tr.stale)}), marker="x", size=8, color=Category10_10[i % 10]))
        if marks:
            items.append(("a deposed leader's stale HW (older epoch), not a dip", marks))
            p.add_tools(HoverTool(renderers=marks, tooltips=[
                ("partition", "@p"), ("at", "@t{0.000} s"),
                ("stale HW", "@hw under leader epoch @epoch, older than epoch @newest seen before: a "
                             "deposed leader's answer, judged only against its own and older epochs")]))
        _legend(p, items)
        if what != "hw":
            p.yaxis.ticker = SingleIntervalTicker(interval=1)
        figs.append(p)
    return figs


@dataclass(frozen=True, slots=True)
class Rendered:
    """HTML fragments to place in the page: ``js`` in the head, ``script`` and ``divs`` in the body."""

    js: str
    script: str
    divs: dict[str, str]


def render(d: PlotData) -> Rendered:
    """Build every figure and return bokeh's inline JS plus the plots' script and divs.

    ``divs`` has keys ``main`` (faults, throughput, latency, errors, availability) and,
    when ``d.traces`` is non-empty, ``traces`` (leader, ISR size, HW).
    """
    x = Range1d(start=0, end=max(d.duration, 1e-3), bounds=(0, max(d.duration, 1e-3)))
    layouts: dict[str, Any] = {
        "main": column(_faults(d, x), _throughput(d, x), _latency(d, x), _errors(d, x),
                       _availability(d, x), sizing_mode="stretch_width"),
    }
    if d.traces:
        layouts["traces"] = column(*_traces(d, x), sizing_mode="stretch_width")
    script, divs = components(layouts)
    js = Resources(mode="inline", components=["bokeh"]).render_js()
    return Rendered(js=js, script=script, divs=dict(divs))
