"""Rebalances as a picture: one self-contained HTML page (inline SVG and a little JS).

A lane per worker; in each lane a row per task or connector it ever ran (a row per
connector, with a count, when a lane would hold too many), and bars for the time it ran
it. Each rebalance is a band: what it stopped ends where the band starts, what it handed
out starts where the band ends, and what a cooperative round lets keep running crosses
it, so eager's stop-the-world shows as a gap through every lane. A scheduled delay
(lost work waiting for its worker) is shaded across the lanes, and the lost work gets a
lane of its own until it is reassigned. The page reads the explain document and nothing
else (simulated, or a live cluster's history), never fetches anything, and works offline.
"""

from __future__ import annotations

import colorsys
import hashlib
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kctl.group.assignors.connect import ConnectorsAndTasks

__all__ = ["render_html"]

Doc = Mapping[str, Any]

LABEL_W = 170
PLOT_W = 900
RIGHT_PAD = 30
ROW_H = 9
ROW_GAP = 2
LANE_PAD = 8
MAX_ROWS = 28  # past this many items a lane shows one row per connector
MIN_BAND = 10.0  # px: a rebalance that took no time still shows as a gap
MIN_STEP = 46.0  # px between two rounds, however close in time
LOST = "lost (unassigned)"


@dataclass
class _Bar:
    lane: str
    item: str  # a task "ct1-0", a connector "ct1", or a partition
    start: float
    end: float
    since: str
    until: str


def _items(work: Any) -> set[str]:
    if isinstance(work, Mapping):
        cat = ConnectorsAndTasks.from_json(work)
        return set(cat.connectors) | {str(t) for t in cat.tasks}
    return {str(x) for x in work or ()}


def _connector(item: str) -> str:
    head, dash, tail = item.rpartition("-")
    return head if dash and tail.isdigit() else item


def _colour(name: str) -> str:
    digest = int(hashlib.sha1(name.encode()).hexdigest()[:6], 16)
    r, g, b = colorsys.hls_to_rgb((digest % 360) / 360, 0.45, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


class _Axis:
    """Round i's band is [start[i], end[i]] in px; time between rounds is to scale, with
    a minimum step so rounds at the same instant stay apart."""

    def __init__(self, rounds: Sequence[Doc]):
        self.rounds = rounds
        times = [(int(r.get("started_ms", r.get("at_ms", 0)) or r.get("at_ms", 0)),
                  int(r.get("at_ms", 0))) for r in rounds]
        self.t0 = times[0][0] if times else 0
        ends = [t for _, t in times] + [int(r.get("at_ms", 0)) + int(r.get("delay_ms", 0) or 0)
                                       for r in rounds]
        self.t1 = max(ends) if ends else 0
        span = max(1, self.t1 - self.t0)
        n = max(1, len(rounds))
        budget = PLOT_W * 0.85
        scale = max(0.0, budget - n * (MIN_STEP + MIN_BAND)) / span
        self.start: list[float] = []
        self.end: list[float] = []
        x = 20.0
        previous = None
        for started, done in times:
            if previous is not None:
                x += max(MIN_STEP, (started - previous) * scale)
            self.start.append(x)
            x += max(MIN_BAND, (done - started) * scale)
            self.end.append(x)
            previous = done
        self.scale = scale
        self.right = max(PLOT_W - 10.0, (self.end[-1] + MIN_STEP) if self.end else 0.0)

    def after(self, i: int, ms: int) -> float:
        """The x of `ms` after round i completed (clipped to the next round)."""
        x = self.end[i] + ms * self.scale
        if i + 1 < len(self.start):
            x = min(x, self.start[i + 1])
        return min(max(x, self.end[i] + 4), self.right)


def _bars(doc: Doc, axis: _Axis) -> list[_Bar]:
    rounds = list(doc.get("rounds", ()))
    bars: list[_Bar] = []
    open_: dict[tuple[str, str], tuple[float, str]] = {}
    for i, r in enumerate(rounds):
        label = f"generation {r.get('generation')}"
        now = {(w, item) for w, work in (r.get("assignments") or {}).items()
               for item in _items(work)}
        lost = _items((r.get("sets") or {}).get("lost") or {}) if r.get("delay_ms") else set()
        placed = {item for _, item in now}
        now |= {(LOST, item) for item in lost - placed}
        revoked = {(w, item) for w, work in (r.get("revoked") or {}).items()
                   for item in _items(work)}
        for key in list(open_):
            if key not in now or key in revoked:  # eager stops what it hands back at once
                start, since = open_.pop(key)
                bars.append(_Bar(key[0], key[1], start, axis.start[i], since, label))
        for key in now:
            if key not in open_:
                open_[key] = (axis.end[i], label)
    for (lane, item), (start, since) in open_.items():
        bars.append(_Bar(lane, item, start, axis.right, since, "now"))
    return bars


def _lanes(doc: Doc, bars: Sequence[_Bar]) -> list[str]:
    names: set[str] = set()
    for r in doc.get("rounds", ()):
        names |= set(r.get("members") or ()) | set(r.get("assignments") or {})
    names |= {b.lane for b in bars}
    workers = sorted(n for n in names if n != LOST)
    return workers + ([LOST] if LOST in names else [])


def _svg(doc: Doc, title: str) -> tuple[str, dict[str, int]]:
    rounds = list(doc.get("rounds", ()))
    axis = _Axis(rounds)
    bars = _bars(doc, axis)
    lanes = _lanes(doc, bars)
    width = LABEL_W + axis.right + RIGHT_PAD
    parts: list[str] = []
    y = 40.0
    lane_boxes: list[tuple[str, float, float]] = []
    bar_count = 0
    for lane in lanes:
        mine = [b for b in bars if b.lane == lane]
        items = sorted({b.item for b in mine}, key=_sort_key)
        grouped = len(items) > MAX_ROWS
        rows = sorted({_connector(i) for i in items}) if grouped else items
        height = max(1, len(rows)) * (ROW_H + ROW_GAP) + 2 * LANE_PAD
        lane_boxes.append((lane, y, height))
        css = "lane lost" if lane == LOST else "lane"
        parts.append(f'<g class="{css}" data-lane="{html.escape(lane)}">')
        parts.append(f'<rect class="lane-bg" x="{LABEL_W}" y="{y:.1f}" width="{axis.right:.1f}" '
                     f'height="{height:.1f}"/>')
        parts.append(f'<text class="lane-label" x="{LABEL_W - 8}" y="{y + 14:.1f}" '
                     f'text-anchor="end">{html.escape(lane)}</text>')
        parts.append(f'<text class="lane-sub" x="{LABEL_W - 8}" y="{y + 26:.1f}" '
                     f'text-anchor="end">{len(items)} item(s)'
                     f'{" · by connector" if grouped else ""}</text>')
        for row, name in enumerate(rows):
            ry = y + LANE_PAD + row * (ROW_H + ROW_GAP)
            members = [b for b in mine if (_connector(b.item) if grouped else b.item) == name]
            for bar in members if not grouped else _merge(members):
                colour = _colour(_connector(bar.item))
                item = name if grouped else bar.item
                what = (f"{name}: {sum(1 for b in members)} bar(s)" if grouped else bar.item)
                tip = f"{what} on {lane}, from {bar.since} to {bar.until}"
                klass = "bar lost-bar" if lane == LOST else "bar"
                parts.append(
                    f'<rect class="{klass}" data-item="{html.escape(item)}" '
                    f'x="{LABEL_W + bar.start:.1f}" y="{ry:.1f}" '
                    f'width="{max(1.0, bar.end - bar.start):.1f}" height="{ROW_H}" '
                    f'fill="{colour}"><title>{html.escape(tip)}</title></rect>')
                bar_count += 1
            if len(rows) <= 40:
                parts.append(f'<text class="row-label" x="{LABEL_W + 4}" y="{ry + ROW_H - 1:.1f}">'
                             f'{html.escape(name)}</text>')
        parts.append("</g>")
        y += height + 4
    total_h = y + 30
    bands: list[str] = []
    for i, r in enumerate(rounds):
        x0, x1 = LABEL_W + axis.start[i], LABEL_W + axis.end[i]
        stopped = sum(len(_items(w)) for w in (r.get("revoked") or {}).values())
        started = sum(len(_items(w)) for w in (r.get("assigned") or {}).values())
        tip = (f"generation {r.get('generation')}: {r.get('trigger', '')} — "
               f"{stopped} stopped, {started} started")
        klass = "band stop" if stopped else "band"
        bands.append(f'<rect class="{klass}" data-generation="{r.get("generation")}" '
                     f'x="{x0:.1f}" y="30" width="{x1 - x0:.1f}" height="{total_h - 50:.1f}">'
                     f'<title>{html.escape(tip)}</title></rect>')
        bands.append(f'<text class="band-label" x="{(x0 + x1) / 2:.1f}" y="24" '
                     f'text-anchor="middle">g{r.get("generation")}</text>')
        delay = int(r.get("delay_ms", 0) or 0)
        if delay:
            d1 = LABEL_W + axis.after(i, delay)
            bands.append(f'<rect class="delay" x="{x1:.1f}" y="30" width="{d1 - x1:.1f}" '
                         f'height="{total_h - 50:.1f}"><title>lost work waits {delay} ms '
                         f'(scheduled.rebalance.max.delay.ms) before it is reassigned</title>'
                         f'</rect>')
            bands.append(f'<text class="delay-label" x="{x1 + 3:.1f}" y="{total_h - 24:.1f}">'
                         f'delay {delay} ms</text>')
    summary = {"lanes": len(lanes), "bars": bar_count, "rounds": len(rounds)}
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" '
           f'viewBox="0 0 {width:.0f} {total_h:.0f}" width="{width:.0f}" '
           f'height="{total_h:.0f}" role="img" aria-label="{html.escape(title)}">'
           + "".join(bands) + "".join(parts)
           + f'<text class="axis" x="{LABEL_W}" y="{total_h - 6:.0f}">{html.escape(_span(doc))}'
             f'</text></svg>')
    return svg, summary


def _merge(bars: Sequence[_Bar]) -> list[_Bar]:
    """Overlapping bars of one connector's tasks become one bar per covered stretch."""
    out: list[_Bar] = []
    for bar in sorted(bars, key=lambda b: (b.start, b.end)):
        if out and bar.start <= out[-1].end:
            last = out[-1]
            if bar.end > last.end:
                out[-1] = _Bar(last.lane, last.item, last.start, bar.end, last.since, bar.until)
        else:
            out.append(_Bar(bar.lane, bar.item, bar.start, bar.end, bar.since, bar.until))
    return out


def _sort_key(item: str) -> tuple[str, int, str]:
    head, dash, tail = item.rpartition("-")
    if dash and tail.isdigit():
        return (head, int(tail), item)
    return (item, -1, item)


def _span(doc: Doc) -> str:
    rounds = list(doc.get("rounds", ()))
    if not rounds:
        return "no rebalance recorded"
    first, last = rounds[0], rounds[-1]
    if first.get("time"):
        return f"{first['time']} … {last.get('time', '')} (time to scale between rounds)"
    return f"{first.get('at_ms', 0)} ms … {last.get('at_ms', 0)} ms (simulated)"


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
        rows.append(
            f"<tr><td>g{r.get('generation')}</td><td>{html.escape(str(when))}</td>"
            f"<td>{html.escape(str(r.get('trigger', '')))}</td>"
            f"<td>{html.escape(str(r.get('leader', '')))}</td>"
            f"<td class='minus'>{-stopped or 0}</td><td class='plus'>+{started}</td>"
            f"<td>{r.get('delay_ms', 0) or ''}</td></tr>")
    return ("<table class='rounds'><tr><th>gen</th><th>time</th><th>trigger</th><th>leader</th>"
            "<th>stopped</th><th>started</th><th>delay ms</th></tr>" + "".join(rows) + "</table>")


_STYLE = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:14px 0 4px}
.panels{display:flex;gap:16px;flex-wrap:wrap} .panel{flex:1 1 560px;min-width:0;overflow-x:auto}
svg.timeline{max-width:100%;height:auto;display:block}
.lane-bg{fill:#f6f7f9;stroke:#dde} .lost .lane-bg{fill:#fff3f7}
.lane-label{font-weight:600;font-size:12px} .lane-sub,.row-label{font-size:8px;fill:#667}
.row-label{pointer-events:none;fill:#334;font-size:7px;opacity:.8}
.bar{opacity:.9} .bar.dim{opacity:.12} .bar.hot{stroke:#000;stroke-width:1}
.lost-bar{fill-opacity:.35;stroke:#c2185b;stroke-dasharray:3 2}
.band{fill:#e8eaf6} .band.stop{fill:#ffcdd2} .band-label{font-size:10px;fill:#455}
.delay{fill:#e1bee7;opacity:.45} .delay-label{font-size:10px;fill:#7b1fa2}
.axis{font-size:10px;fill:#667}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;font-size:12px} .minus{color:#c62828} .plus{color:#2e7d32}
.legend span{display:inline-block;margin-right:14px} .sw{display:inline-block;width:12px;
height:10px;vertical-align:middle;margin-right:4px}
"""

_SCRIPT = """
(function(){
  var bars=document.querySelectorAll('rect.bar');
  function mark(item){bars.forEach(function(b){
    var on=item===null||b.getAttribute('data-item')===item;
    b.classList.toggle('dim',!on);b.classList.toggle('hot',item!==null&&on);});}
  bars.forEach(function(b){
    b.addEventListener('mouseenter',function(){mark(b.getAttribute('data-item'));});
    b.addEventListener('mouseleave',function(){mark(null);});});
  document.body.setAttribute('data-rendered',String(bars.length));
  var c=document.getElementById('bar-count'); if(c){c.textContent=String(bars.length);}
})();
"""

_LEGEND = (
    '<p class="legend"><span><i class="sw" style="background:#ffcdd2"></i>a rebalance that '
    'stopped work (stop-the-world when every lane has a gap)</span><span><i class="sw" '
    'style="background:#e8eaf6"></i>a rebalance that stopped nothing</span><span><i class="sw" '
    'style="background:#e1bee7"></i>scheduled delay: lost work waits</span><span>bars: a task '
    'or connector running on that worker (hover to follow one)</span></p>')


def render_html(docs: Sequence[Doc], *, title: str = "kctl rebalance timeline") -> str:
    """The page for one document, or for several side by side (`--compare`)."""
    panels = []
    stats = []
    for doc in docs:
        name = str(doc.get("protocol") or "")
        heading = f"{name} · {len(doc.get('rounds', ()))} round(s)"
        if doc.get("scenario"):
            heading = f"{doc['scenario']} · {heading}"
        svg, summary = _svg(doc, heading)
        stats.append(summary)
        panels.append(f'<section class="panel" data-protocol="{html.escape(name)}">'
                      f"<h2>{html.escape(heading)}</h2>{svg}{_rounds_table(doc)}</section>")
    data = json.dumps({"panels": stats})
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{_LEGEND}{_summary_table(docs)}"
        f'<p><span id="bar-count"></span> bars drawn</p>'
        f'<div class="panels">{"".join(panels)}</div>'
        f'<script type="application/json" id="timeline-data">{html.escape(data)}</script>'
        f"<script>{_SCRIPT}</script></body></html>")
