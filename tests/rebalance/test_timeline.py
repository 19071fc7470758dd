"""The rebalance timeline, to scale: a full restart with a 20-minute outage and a storm of
90 tasks, drawn by the page Vega-Lite builds in headless Chromium at 1600 px, and what
that page shows a person: a chart as wide as the window, labels one can read, the outage
cut and its length written on it, a gap in every lane, both `--compare` panels on one
scale, and the story of each bar (task, worker, start, end, why it stopped) in its
tooltip. Screenshots are kept as test artifacts (build/test-artifacts/).
"""

from __future__ import annotations

import re

import pytest
from support.browser import dom, screenshot
from support.generations import T0
from support.timelines import OUTAGE_S, bars, chart, lanes, outage_history, storm, texts

from kctl.rebalance.timeline import TimeScale, render_html, timeline_data

WIDTH = 1600


def rendered(tmp_path, name: str, docs, title: str) -> tuple[str, str]:
    """The page written, then its DOM once its scripts drew it, at 1600 px."""
    page = tmp_path / f"{name}.html"
    page.write_text(render_html(docs, title=title))
    shown = dom(page.as_uri(), size=f"{WIDTH},1000")
    assert not re.search(r'<body[^>]*data-error', shown)
    assert re.search(r'<body[^>]*data-rendered="\d+"', shown), "the charts were not drawn"
    return page.as_uri(), shown


# ---------------------------------------------------------------- the scale, as computed


def test_time_is_linear_but_for_a_long_outage_which_is_cut():
    doc = outage_history()
    scale = TimeScale([doc])
    [cut] = scale.cuts
    assert cut.t1 - cut.t0 > 19 * 60_000  # the outage
    # the same px per ms before and after the cut
    before = scale(T0 + 11_000) - scale(T0 + 10_000)
    after = scale(cut.t1 + 1_000) - scale(cut.t1)
    assert before > 0 and before == pytest.approx(after)
    # the cut is drawn as a few seconds of the rest, not as 20 minutes
    assert cut.d1 - cut.d0 < before * 5


def test_no_bar_crosses_the_outage_in_any_lane():
    data = timeline_data([outage_history()])
    [panel] = data["panels"]
    rows = panel["spec"]["data"]["values"]
    down = next(r for r in rows if r["k"] == "down")
    drawn = [r for r in rows if r["k"] == "bar" and r["a"] > 0]
    assert {r["lane"] for r in drawn} == {"w1", "w2", "w3"}
    assert all(r["x2"] <= down["x"] or r["x"] >= down["x2"] for r in drawn)
    # every lane shows the outage
    assert {r["lane"] for r in rows if r["k"] == "down"} == {"rebalances", "w1", "w2", "w3"}


def test_compare_panels_share_one_scale():
    eager, cooperative = storm()
    data = timeline_data([eager, cooperative])
    x = [p["spec"]["spec"]["layer"][4]["encoding"]["x"] for p in data["panels"]]
    assert x[0]["scale"]["domain"] == x[1]["scale"]["domain"] == data["domain"]
    assert x[0]["axis"]["values"] == x[1]["axis"]["values"]


# ---------------------------------------------------------------- the page, as shown


def test_a_20_minute_outage_is_cut_labelled_and_a_gap_in_every_lane(tmp_path):
    url, shown = rendered(tmp_path, "outage", [outage_history()], "a full restart")
    markup = chart(shown, 0)

    # the chart fills the width the window gives it
    room = int(re.search(r'data-room="(\d+)"', markup)[1])
    width = int(re.search(r'data-chart-width="(\d+)"', markup)[1])
    assert room >= WIDTH - 80 and abs(width - room) <= 2, (room, width)

    # labels one can read at 1600 px: nothing under 12 px, lane names larger
    shown_texts = texts(markup)
    assert shown_texts and min(size for size, _ in shown_texts) >= 12
    assert lanes(markup) == ["rebalances", "w1", "w2", "w3"]

    # the outage: cut, its length written on it
    down_s = OUTAGE_S + 40 - 30.6
    minutes, seconds = divmod(round(down_s), 60)
    assert f"// down {minutes}m{seconds:02d}s //" in [t for _, t in shown_texts]
    assert "shutdown" in [t for _, t in shown_texts]

    # hovering a bar tells its story: task, worker, start, end, why it stopped
    stopped = [b for b in bars(markup) if b["why it stopped"].startswith("the shutdown")]
    assert {b["worker"] for b in stopped} == {"w1", "w2", "w3"}
    ct1_0 = next(b for b in stopped if b["task"] == "ct1-0")
    assert ct1_0["start"].startswith("2025-11-24T16:00:09")
    assert ct1_0["end"].startswith("2025-11-24T16:00:30")
    assert "every worker left" in ct1_0["why it stopped"]

    png = screenshot(url, "timeline-outage-20min", size=f"{WIDTH},1000")
    assert png.stat().st_size > 20_000


def test_a_storm_of_90_tasks_compared_on_one_scale(tmp_path):
    eager, cooperative = storm()
    url, shown = rendered(tmp_path, "storm", [eager, cooperative], "a storm of 90 tasks")
    left, right = chart(shown, 0), chart(shown, 1)

    widths = [int(re.search(r'data-chart-width="(\d+)"', m)[1]) for m in (left, right)]
    assert widths[0] == widths[1] >= WIDTH - 80

    def ticks(markup: str) -> list[tuple[str, str]]:
        return re.findall(r'<text text-anchor="\w+" transform="translate\(([\d.]+),-\d+\)"'
                          r'[^>]*>([^<]*s)</text>', markup)

    assert ticks(left) and ticks(left) == ticks(right)  # one time axis, the same px

    # eager stops every running task at each change; sessioned only the one that changed
    eager_bars, coop_bars = bars(left), bars(right)
    assert len(eager_bars) > 3 * len(coop_bars)
    assert min(size for size, _ in texts(left) + texts(right)) >= 12

    png = screenshot(url, "timeline-storm-90-tasks", size=f"{WIDTH},1400")
    assert png.stat().st_size > 20_000


def test_the_page_is_self_contained_and_small(tmp_path):
    eager, cooperative = storm()
    page = render_html([eager, cooperative], title="storm")
    outside = re.findall(r'(?:src|href)="(https?:[^"]+)"', page)
    assert outside == []  # nothing fetched: the libraries are inline
    assert "vega-embed" in page and len(page.encode()) < 2_000_000
