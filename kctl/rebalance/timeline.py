"""Rebalances as a picture: one self-contained HTML page drawn by Vega-Lite.

A lane per worker; in each lane a row per task or connector it ever ran (a row per
connector, with merged bars, when a lane would hold too many), and a bar for each stretch it
ran there. Each rebalance is a band across every lane: what it stopped ends where the band
starts, what it handed out starts where the band ends, and what a cooperative round lets
keep running crosses it, so eager's stop-the-world shows as a gap through every lane. A
scheduled delay (lost work waiting for its worker) is shaded, lost work gets a lane of its
own until it is reassigned, and a full restart's outage is a shaded gap in every lane.

Time is linear across the whole history. A gap longer than a minute that takes more than
`BREAK_SHARE` of the span (an outage, a quiet night) is cut to a fixed width, drawn as a
break in every lane, and its duration written on it; within the rest one pixel is the same
time everywhere. Rounds at the same instant (simulated rounds take no time) are nudged a
small step apart. `--compare` panels share one scale.

Python decides every position (`timeline_data`, which tests read); the page only lays it
out: Vega-Lite (vega, vega-lite and vega-embed, BSD-3-Clause, vendored in `vendor/` and
inlined) draws it as SVG at the width of the window, and its tooltip gives a bar's task,
worker, start, end and why it stopped. Chosen over hand-drawn SVG for its axes, scales,
text layout and tooltips, which are what the hand-drawn chart got wrong; over a CDN link
because the page must open offline (a worker serves it, and files get mailed around).
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from kctl.group.assignors.connect import ConnectorsAndTasks

__all__ = ["TimeScale", "render_html", "timeline_data"]

Doc = Mapping[str, Any]

LABELS_PX = 170  # the row labels' column, the same in every panel so they line up
MAX_ROWS = 28  # past this many items a lane shows one row per connector
BREAK_MIN_MS = 60_000  # a gap is cut only if it is longer than this...
BREAK_SHARE = 0.15  # ...and takes more than this share of the whole span
BREAK_WIDTH = 0.08  # the width a cut gap keeps, as a share of the uncut time
MIN_BAND = 0.004  # the narrowest band, as a share of the axis
LABEL_GAP = 0.022  # the closest two round labels may stand, as a share of the axis
LOST = "lost (unassigned)"
ROUNDS = "rebalances"
_HEADER_ROWS = ("rounds", "delays, gaps")
_GOOD_STEPS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000,
                  60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000,
                  21_600_000, 43_200_000, 86_400_000)


def _items(work: Any) -> set[str]:
    if isinstance(work, Mapping):
        cat = ConnectorsAndTasks.from_json(work)
        return set(cat.connectors) | {str(t) for t in cat.tasks}
    return {str(x) for x in work or ()}


def _connector(item: str) -> str:
    head, dash, tail = item.rpartition("-")
    return head if dash and tail.isdigit() else item


# Tableau's 20 colours (as Vega's "tableau20" scheme), handed to connectors in name order
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
            "#9d755d", "#ff9da6", "#bab0ac", "#9ecae9", "#ffbf79", "#88d27a", "#ff9d98",
            "#79706e", "#d67195", "#fcbfd2", "#439894", "#b6992d", "#d6a5c9")


def _colours(docs: Sequence[Doc]) -> dict[str, str]:
    """Each connector's colour, the same in every panel of a page."""
    names: set[str] = set()
    for doc in docs:
        for r in doc.get("rounds", ()):
            for part in ("assignments", "revoked"):
                for work in (r.get(part) or {}).values():
                    names |= {_connector(i) for i in _items(work)}
    return {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(sorted(names, key=_sort_key))}


def _sort_key(item: str) -> tuple[str, int, str]:
    head, dash, tail = item.rpartition("-")
    if dash and tail.isdigit():
        return (head, int(tail), item)
    return (item, -1, item)


def duration(ms: float) -> str:
    from kctl.rebalance.history import duration as text

    return text(int(ms))


# --------------------------------------------------------------------------- the time axis


def _start(r: Doc) -> int:
    return int(r.get("started_ms") or r.get("at_ms") or 0)


def _is_live(docs: Sequence[Doc]) -> bool:
    return any(r.get("time") for d in docs for r in d.get("rounds", ()))


@dataclass(frozen=True)
class Segment:
    t0: int
    t1: int
    d0: float
    d1: float
    cut: bool  # a long gap, drawn at a fixed width


class TimeScale:
    """Wall-clock (or simulated) ms -> a position on the axis, linear but for long gaps,
    which are cut to a fixed width. One scale serves every panel of a page."""

    def __init__(self, docs: Sequence[Doc]):
        moments: set[int] = set()
        for doc in docs:
            rounds = list(doc.get("rounds", ()))
            for i, r in enumerate(rounds):
                moments |= {_start(r), int(r.get("at_ms", 0))}
                delay = int(r.get("delay_ms") or 0)
                if delay:
                    end = int(r["at_ms"]) + delay
                    if i + 1 < len(rounds):
                        end = min(end, _start(rounds[i + 1]))
                    moments.add(end)
        times = sorted(moments) or [0]
        span = times[-1] - times[0]
        gaps = [(a, b) for a, b in itertools.pairwise(times)
                if b - a > BREAK_MIN_MS and b - a > BREAK_SHARE * span]
        uncut = span - sum(b - a for a, b in gaps)
        times.append(times[-1] + max(1000, uncut // 12))  # room for what still runs
        uncut += times[-1] - times[-2]
        width = max(1.0, BREAK_WIDTH * uncut)
        self.segments: list[Segment] = []
        t, d = times[0], 0.0
        for a, b in gaps:
            if a > t:
                self.segments.append(Segment(t, a, d, d + (a - t), False))
                d += a - t
            self.segments.append(Segment(a, b, d, d + width, True))
            d += width
            t = b
        self.segments.append(Segment(t, times[-1], d, d + (times[-1] - t), False))
        # a little room before the first round, so its label is not cut off
        self.domain = (-0.015 * self.segments[-1].d1, self.segments[-1].d1)
        self.live = _is_live(docs)

    @property
    def cuts(self) -> list[Segment]:
        return [s for s in self.segments if s.cut]

    def __call__(self, ms: float) -> float:
        for s in self.segments:
            if ms <= s.t1:
                if ms <= s.t0:
                    return s.d0
                share = (ms - s.t0) / max(1, s.t1 - s.t0)
                return s.d0 + share * (s.d1 - s.d0)
        return self.domain[1]

    def label(self, ms: float) -> str:
        if self.live:
            return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")
        return f"{ms / 1000:g} s"

    def ticks(self, count: int = 12) -> list[tuple[float, str]]:
        """Round times in each uncut stretch, about `count` over the axis, none crowding
        another or a cut."""
        total = self.domain[1] or 1.0
        out: list[tuple[float, str]] = []
        for s in self.segments:
            if s.cut:
                continue
            share = (s.d1 - s.d0) / total
            want = max(1, int(count * share))
            raw = max(1, (s.t1 - s.t0) // want)
            step = next((g for g in _GOOD_STEPS_MS if g >= raw), _GOOD_STEPS_MS[-1])
            t = math.ceil(s.t0 / step) * step
            while t <= s.t1:
                x = self(t)
                if not out or x - out[-1][0] >= total * 0.05:
                    out.append((round(x, 3), self.label(t)))
                t += step
        return out

    def stamp(self, ms: float) -> str:
        """A moment for the tooltip."""
        if self.live:
            return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
        return f"{int(ms)} ms"


# --------------------------------------------------------------------------- what is drawn


@dataclass
class _Bar:
    lane: str
    item: str
    x: float
    x2: float
    start: str
    end: str
    why: str


def _bands(rounds: Sequence[Doc], scale: TimeScale) -> list[tuple[float, float]]:
    """Each round's band on the axis, at least MIN_BAND wide and after the one before."""
    total = scale.domain[1] or 1.0
    out: list[tuple[float, float]] = []
    for r in rounds:
        x, x2 = scale(_start(r)), scale(int(r.get("at_ms", 0)))
        if out:
            x = max(x, out[-1][1] + total * MIN_BAND / 2)
        out.append((x, max(x2, x + total * MIN_BAND)))
    return out


def _what(r: Doc) -> str:
    if r.get("event") == "shutdown":
        return "the shutdown"
    return f"generation {r.get('generation')}"


def _bars(doc: Doc, scale: TimeScale, bands: Sequence[tuple[float, float]]) -> list[_Bar]:
    rounds = list(doc.get("rounds", ()))
    bars: list[_Bar] = []
    open_: dict[tuple[str, str], tuple[float, str]] = {}
    for i, r in enumerate(rounds):
        now = {(w, item) for w, work in (r.get("assignments") or {}).items()
               for item in _items(work)}
        lost = _items((r.get("sets") or {}).get("lost") or {}) if r.get("delay_ms") else set()
        placed = {item for _, item in now}
        now |= {(LOST, item) for item in lost - placed}
        revoked = {(w.removesuffix(" (gone)"), item) for w, work in (r.get("revoked") or {}).items()
                   for item in _items(work)}
        why = f"{_what(r)}: {r.get('trigger', '')}"
        for key in list(open_):
            if key not in now or key in revoked:  # eager stops what it hands back at once
                x, since = open_.pop(key)
                bars.append(_Bar(key[0], key[1], x, bands[i][0], since,
                                 scale.stamp(_start(r)), why))
        for key in now:
            if key not in open_:
                open_[key] = (bands[i][1], scale.stamp(int(r.get("at_ms", 0))))
    for (lane, item), (x, since) in open_.items():
        bars.append(_Bar(lane, item, x, scale.domain[1], since, "—", "still running"))
    return bars


def _lanes(doc: Doc, bars: Sequence[_Bar]) -> list[str]:
    names: set[str] = set()
    for r in doc.get("rounds", ()):
        names |= set(r.get("members") or ()) | set(r.get("assignments") or {})
    names |= {b.lane for b in bars}
    workers = sorted(n for n in names if n != LOST)
    return workers + ([LOST] if LOST in names else [])


def _merge(bars: Sequence[_Bar]) -> list[_Bar]:
    """Overlapping bars of one connector's tasks become one bar per covered stretch."""
    out: list[_Bar] = []
    for bar in sorted(bars, key=lambda b: (b.x, b.x2)):
        if out and bar.x <= out[-1].x2:
            last = out[-1]
            if bar.x2 > last.x2:
                out[-1] = _Bar(last.lane, last.item, last.x, bar.x2, last.start, bar.end,
                               bar.why)
        else:
            out.append(_Bar(bar.lane, bar.item, bar.x, bar.x2, bar.start, bar.end, bar.why))
    return out


def _panel_rows(doc: Doc, scale: TimeScale,
                colours: Mapping[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every mark of one panel as a row of data (Vega-Lite facets them by lane)."""
    rounds = list(doc.get("rounds", ()))
    bands = _bands(rounds, scale)
    bars = _bars(doc, scale, bands)
    lanes = _lanes(doc, bars)
    rows: list[dict[str, Any]] = []
    shown = 0
    for lane in lanes:
        mine = [b for b in bars if b.lane == lane]
        items = sorted({b.item for b in mine}, key=_sort_key)
        grouped = len(items) > MAX_ROWS
        names = sorted({_connector(i) for i in items}) if grouped else items
        for order, name in enumerate(names or ["—"]):
            members = [b for b in mine if (_connector(b.item) if grouped else b.item) == name]
            for bar in _merge(members) if grouped else members:
                shown += 1
                rows.append({"k": "bar", "lane": lane, "row": name, "o": order,
                             "task": (f"{name} ({len(members)} bars, by connector)"
                                      if grouped else bar.item),
                             "worker": lane, "c": colours.get(_connector(bar.item), "#888"),
                             "x": round(bar.x, 3),
                             "x2": round(max(bar.x2, bar.x), 3),
                             "a": 0.35 if lane == LOST else 0.9,
                             "start": bar.start, "end": bar.end, "why": bar.why})
            if not members:  # a worker that ran nothing still gets its lane
                rows.append({"k": "bar", "lane": lane, "row": name, "o": order, "x": 0,
                             "x2": 0, "a": 0.0, "c": "", "task": "", "worker": lane,
                             "start": "", "end": "", "why": ""})
    every = [ROUNDS, *lanes]
    rows += [{"k": "bar", "lane": ROUNDS, "row": name, "o": o, "x": 0, "x2": 0, "a": 0.0,
              "c": "", "task": "", "worker": "", "start": "", "end": "", "why": ""}
             for o, name in enumerate(_HEADER_ROWS)]
    total = scale.domain[1] or 1.0
    last_label = -math.inf
    for i, r in enumerate(rounds):
        x, x2 = bands[i]
        stopped = sum(len(_items(w)) for w in (r.get("revoked") or {}).values())
        started = sum(len(_items(w)) for w in (r.get("assigned") or {}).values())
        name = "shutdown" if r.get("event") == "shutdown" else f"g{r.get('generation')}"
        band = {"k": "band", "x": round(x, 3), "x2": round(x2, 3),
                "c": "#ef9a9a" if stopped else "#c5cae9",
                "round": name, "trigger": str(r.get("trigger", "")),
                "when": scale.stamp(int(r.get("at_ms", 0))),
                "moved": f"{stopped} stopped, {started} started"}
        rows += [{**band, "lane": lane} for lane in every]
        if x - last_label >= total * LABEL_GAP:
            rows.append({"k": "text", "lane": ROUNDS, "x": round((x + x2) / 2, 3),
                         "text": name, "row": _HEADER_ROWS[0], "o": 0})
            last_label = x
        delay = int(r.get("delay_ms") or 0)
        if delay:
            end = int(r["at_ms"]) + delay
            if i + 1 < len(rounds):
                end = min(end, _start(rounds[i + 1]))
            d2 = max(scale(end), x2)
            rows += [{"k": "delay", "lane": lane, "x": round(x2, 3), "x2": round(d2, 3),
                      "what": f"lost work waits {delay} ms (scheduled.rebalance.max.delay.ms)"}
                     for lane in every]
            rows.append({"k": "text", "lane": ROUNDS, "x": round(x2, 3), "text":
                         f"delay {duration(delay)}", "row": _HEADER_ROWS[1], "o": 1,
                         "align": "left"})
        if r.get("event") == "shutdown" and i + 1 < len(rounds):
            down_ms = _start(rounds[i + 1]) - int(r["at_ms"])
            rows += [{"k": "down", "lane": lane, "x": round(x2, 3),
                      "x2": round(bands[i + 1][0], 3),
                      "what": f"the group was down for {duration(down_ms)}"} for lane in every]
            rows.append({"k": "text", "lane": ROUNDS, "x": round((x2 + bands[i + 1][0]) / 2, 3),
                         "text": f"// down {duration(down_ms)} //", "row": _HEADER_ROWS[1],
                         "o": 1})
    downs = [r for r in rows if r["k"] == "down" and r["lane"] == ROUNDS]
    for cut in scale.cuts:
        rows += [{"k": "cut", "lane": lane, "x": round(cut.d0, 3), "x2": round(cut.d1, 3),
                  "what": f"{duration(cut.t1 - cut.t0)} not drawn to scale"} for lane in every]
        if any(d["x"] <= cut.d0 and cut.d1 <= d["x2"] for d in downs):
            continue  # an outage: its own label says how long
        rows.append({"k": "text", "lane": ROUNDS, "x": round((cut.d0 + cut.d1) / 2, 3),
                     "text": f"// {duration(cut.t1 - cut.t0)} //", "row": _HEADER_ROWS[1],
                     "o": 1})
    order = {lane: i for i, lane in enumerate(every)}
    return rows, {"lanes": every, "order": order, "bars": shown, "rounds": len(rounds)}


def _spec(rows: list[dict[str, Any]], lanes: list[str], scale: TimeScale) -> dict[str, Any]:
    """The Vega-Lite spec of one panel: a facet row per lane, layers for cuts, outages,
    delays, bands, bars and labels. The page sets `spec.width` from the window."""
    ticks = scale.ticks()
    x = {"field": "x", "type": "quantitative",
         "scale": {"domain": list(scale.domain), "nice": False, "zero": False},
         "axis": {"values": [t for t, _ in ticks], "labelExpr": "kctlLabel(datum.value)",
                  "title": ("time (UTC); long gaps cut, their length written on them"
                            if scale.live else "simulated time"),
                  "orient": "top", "labelFontSize": 12, "titleFontSize": 13,
                  "grid": True, "gridOpacity": 0.35}}
    x2 = {"field": "x2"}
    y = {"field": "row", "type": "nominal", "title": None, "sort": {"field": "o", "op": "min"},
         "scale": {"paddingInner": 0.22},
         "axis": {"labelFontSize": 12, "labelLimit": LABELS_PX - 10, "ticks": False,
                  "domain": False, "minExtent": LABELS_PX, "maxExtent": LABELS_PX}}

    def only(kind: str) -> list[dict[str, Any]]:
        return [{"filter": f"datum.k === '{kind}'"}]

    def shade(kind: str, fill: str, opacity: float) -> dict[str, Any]:
        return {"transform": only(kind),
                "mark": {"type": "rect", "fill": fill, "opacity": opacity},
                "encoding": {"x": x, "x2": x2,
                             "tooltip": [{"field": "what", "title": kind}]}}

    follow = {"name": "follow", "select": {"type": "point", "on": "mouseover",
                                           "fields": ["task"], "clear": "mouseout"}}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "facet": {"row": {"field": "lane", "type": "nominal", "sort": lanes,
                          "header": {"title": None, "labelAngle": 0, "labelOrient": "top",
                                     "labelAnchor": "start", "labelAlign": "left",
                                     "labelFontSize": 14, "labelFontWeight": "bold",
                                     "labelPadding": 3}}},
        "spacing": 4,
        "resolve": {"scale": {"y": "independent"}},
        "config": {"view": {"stroke": "#ccd"}, "axis": {"labelFontSize": 12},
                   "font": "system-ui, sans-serif"},
        "spec": {
            "width": 1000,
            "height": {"step": 17},
            "layer": [
                shade("down", "#eceff1", 0.9),
                shade("cut", "#b0bec5", 0.55),  # over an outage: the cut shows through
                shade("delay", "#ce93d8", 0.35),
                {"transform": only("band"),
                 "mark": {"type": "rect", "opacity": 0.75},
                 "encoding": {"x": x, "x2": x2,
                              "fill": {"field": "c", "type": "nominal", "scale": None},
                              "tooltip": [{"field": "round", "title": "round"},
                                          {"field": "when", "title": "completed"},
                                          {"field": "trigger", "title": "why"},
                                          {"field": "moved", "title": "work"}]}},
                {"transform": only("bar"),
                 "params": [follow],
                 "mark": {"type": "bar", "cornerRadius": 1, "stroke": "#000"},
                 "encoding": {
                     "x": x, "x2": x2,
                     "y": y,
                     "fill": {"field": "c", "type": "nominal", "scale": None},
                     "fillOpacity": {"field": "a", "type": "quantitative", "scale": None},
                     "strokeWidth": {"condition": {"param": "follow", "empty": False,
                                                   "value": 1.5}, "value": 0},
                     "tooltip": [{"field": "task", "title": "task"},
                                 {"field": "worker", "title": "worker"},
                                 {"field": "start", "title": "start"},
                                 {"field": "end", "title": "end"},
                                 {"field": "why", "title": "why it stopped"}]}},
                *({"transform": [{"filter": f"datum.k === 'text' && datum.align === '{a}'"}],
                   "mark": {"type": "text", "fontSize": 12, "baseline": "middle",
                            "align": a, "dx": 3 if a == "left" else 0, "fill": "#263238"},
                   "encoding": {"x": x, "y": y, "text": {"field": "text"}}}
                  for a in ("center", "left")),
            ],
        },
    }


def timeline_data(docs: Sequence[Doc]) -> dict[str, Any]:
    """What the page draws: one scale for every panel, and each panel's spec and counts."""
    scale = TimeScale(docs)
    colours = _colours(docs)
    panels = []
    for doc in docs:
        rows, info = _panel_rows(doc, scale, colours)
        for row in rows:  # a label is centred on its moment unless told otherwise
            if row["k"] == "text":
                row.setdefault("align", "center")
        panels.append({"spec": _spec(rows, info["lanes"], scale), "lanes": info["lanes"],
                       "bars": info["bars"], "rounds": info["rounds"]})
    return {"domain": list(scale.domain), "ticks": scale.ticks(),
            "cuts": [{"from_ms": c.t0, "to_ms": c.t1, "x": c.d0, "x2": c.d1,
                      "label": f"// {duration(c.t1 - c.t0)} //"} for c in scale.cuts],
            "panels": panels}


# --------------------------------------------------------------------------- the page


def _summary_table(docs: Sequence[Doc]) -> str:
    keys: list[str] = []
    for d in docs:
        keys += [k for k in d.get("summary", {}) if k not in keys]
    head = "".join(f"<th>{html.escape(str(d.get('protocol', '')))}</th>" for d in docs)
    rows = "".join(
        f"<tr><td>{html.escape(k.replace('_', ' '))}</td>"
        + "".join(f"<td>{html.escape(str(d.get('summary', {}).get(k, '—')))}</td>" for d in docs)
        + "</tr>" for k in keys)
    return f'<table class="summary"><tr><th></th>{head}</tr>{rows}</table>'


def _rounds_table(doc: Doc) -> str:
    rows = []
    for r in doc.get("rounds", ()):
        stopped = sum(len(_items(w)) for w in (r.get("revoked") or {}).values())
        started = sum(len(_items(w)) for w in (r.get("assigned") or {}).values())
        when = r.get("time") or f"{r.get('at_ms', 0)} ms"
        name = "shutdown" if r.get("event") == "shutdown" else f"g{r.get('generation')}"
        rows.append(
            f"<tr><td>{name}</td><td>{html.escape(str(when))}</td>"
            f"<td>{html.escape(str(r.get('trigger', '')))}</td>"
            f"<td>{html.escape(str(r.get('leader', '')))}</td>"
            f"<td class='minus'>{-stopped or 0}</td><td class='plus'>+{started}</td>"
            f"<td>{r.get('delay_ms', 0) or ''}</td></tr>")
    return (f"<details><summary>{len(rows)} round(s)</summary>"
            "<table class='rounds'><tr><th>round</th><th>time</th><th>trigger</th>"
            "<th>leader</th><th>stopped</th><th>started</th><th>delay ms</th></tr>"
            + "".join(rows) + "</table></details>")


_STYLE = """
body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:16px 0 6px}
.panel{width:100%} .chart{width:100%;min-height:60px}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;font-size:13px} .minus{color:#c62828} .plus{color:#2e7d32}
.legend span{display:inline-block;margin-right:16px} .sw{display:inline-block;width:14px;
height:12px;vertical-align:middle;margin-right:5px}
#vg-tooltip-element{font-size:13px}
"""

_SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('timeline-data').textContent);
  var labels = {};
  data.ticks.forEach(function(t){ labels[String(t[0])] = t[1]; });
  vega.expressionFunction('kctlLabel', function(v){
    var l = labels[String(v)]; return l === undefined ? '' : l; });
  var options = {renderer: 'svg', actions: false};
  function embed(el, panel, width){
    var spec = JSON.parse(JSON.stringify(panel.spec));
    spec.spec.width = Math.max(200, Math.floor(width));
    return vegaEmbed(el, spec, options).then(function(){ return spec.spec.width; });
  }
  function draw(){
    var jobs = data.panels.map(function(panel, i){
      var el = document.getElementById('chart-' + i);
      var room = el.clientWidth;
      // a first guess for the lane labels' width, then exactly the room that is left
      return embed(el, panel, room - 200).then(function(inner){
        var svg = el.querySelector('svg');
        var drawn = svg ? svg.getBoundingClientRect().width : room;
        if (Math.abs(room - drawn) < 2) { return drawn; }
        return embed(el, panel, inner + room - drawn).then(function(){
          var s = el.querySelector('svg');
          return s ? s.getBoundingClientRect().width : 0; });
      }).then(function(drawn){ el.setAttribute('data-chart-width', String(Math.round(drawn)));
                               el.setAttribute('data-room', String(room)); });
    });
    Promise.all(jobs).then(function(){
      document.body.setAttribute('data-rendered', String(data.panels.reduce(
        function(n, p){ return n + p.bars; }, 0)));
    }, function(err){ document.body.setAttribute('data-error', String(err)); });
  }
  var timer = null;
  window.addEventListener('resize', function(){
    clearTimeout(timer); timer = setTimeout(draw, 150); });
  draw();
})();
"""

_LEGEND = (
    '<p class="legend"><span><i class="sw" style="background:#ef9a9a"></i>a rebalance that '
    'stopped work (stop-the-world when every lane has a gap)</span><span><i class="sw" '
    'style="background:#c5cae9"></i>a rebalance that stopped nothing</span><span><i class="sw" '
    'style="background:#ce93d8"></i>scheduled delay: lost work waits</span><span><i class="sw" '
    'style="background:#b0bec5"></i>a long gap, cut (its length written on it)</span><span>'
    'bars: a task or connector running on that worker (hover for its story)</span></p>')


@cache
def _library() -> str:
    """vega, vega-lite and vega-embed, inlined (without their source-map comments, which
    would make a browser's tools reach for files that are not there)."""
    folder = resources.files("kctl.rebalance") / "vendor"
    parts = []
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        text = (folder / name).read_text(encoding="utf-8")
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith("//# sourceMappingURL="))
        parts.append("<script>" + text.replace("</script", "<\\/script") + "</script>")
    return "".join(parts)


def _json_for_script(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def render_html(docs: Sequence[Doc], *, title: str = "kctl rebalance timeline") -> str:
    """The page for one document, or for several one above the other on one scale
    (`--compare`)."""
    data = timeline_data(docs)
    panels = []
    for i, doc in enumerate(docs):
        name = str(doc.get("protocol") or "")
        heading = f"{name} · {len(doc.get('rounds', ()))} round(s)"
        if doc.get("scenario"):
            heading = f"{doc['scenario']} · {heading}"
        panels.append(f'<section class="panel" data-protocol="{html.escape(name)}">'
                      f"<h2>{html.escape(heading)}</h2>"
                      f'<div class="chart" id="chart-{i}" role="img" '
                      f'aria-label="{html.escape(heading)}"></div>'
                      f"{_rounds_table(doc)}</section>")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>{_library()}</head><body>"
        f"<h1>{html.escape(title)}</h1>{_LEGEND}{_summary_table(docs)}"
        f'<div class="panels">{"".join(panels)}</div>'
        f'<script type="application/json" id="timeline-data">{_json_for_script(data)}</script>'
        f"<script>{_SCRIPT}</script></body></html>")
