"""Histories to draw: a full restart with a 20-minute outage (records and departure notes
as workers write them) and a storm of 90 tasks (the simulator), for the timeline tests."""

from __future__ import annotations

import re
from typing import Any

from kctl.rebalance import explain as ex
from kctl.rebalance.history import cluster_history
from support.generations import T0, record, work

OUTAGE_S = 20 * 60


def outage_history() -> dict[str, Any]:
    """w1 and w2 run ct1 (4 tasks); w3 joins; everyone stops; 20 minutes later all start."""
    ran = {"w1": ["ct1", "ct1-0", "ct1-3"], "w2": ["ct1-1"], "w3": ["ct1-2"]}
    back = OUTAGE_S + 40

    def again(worker: str, generation: int, at_s: float, **kw: Any) -> dict[str, Any]:
        return {**record(worker, generation, at_s, **kw), "member_id": f"{worker}-id2",
                "leader": "w1-id2"}

    records = [
        record("w1", 1, 0, trigger="join", members=["w1"]),
        record("w1", 2, 4, members=["w1", "w2"]),
        record("w2", 2, 4, trigger="join"),
        record("w1", 3, 9, trigger="connector ct1 created", members=["w1", "w2"],
               owned=["ct1", "ct1-0", "ct1-2", "ct1-3"], assigned=["ct1", "ct1-0", "ct1-2",
                                                                   "ct1-3"]),
        record("w2", 3, 9, owned=["ct1-1"], assigned=["ct1-1"]),
        record("w1", 4, 20, members=["w1", "w2", "w3"], owned=ran["w1"], revoked=["ct1-2"]),
        record("w2", 4, 20, owned=ran["w2"]),
        record("w3", 4, 20, trigger="join"),
        record("w1", 5, 21, members=["w1", "w2", "w3"], owned=ran["w1"],
               trigger="rejoin after revocation"),
        record("w2", 5, 21, owned=ran["w2"]),
        record("w3", 5, 21, owned=ran["w3"], assigned=ran["w3"]),
        again("w1", 6, back, members=["w1", "w2", "w3"], trigger="join",
              owned=ran["w1"], assigned=ran["w1"]),
        again("w2", 6, back, owned=ran["w2"], assigned=ran["w2"]),
        again("w3", 6, back, owned=ran["w3"], assigned=ran["w3"]),
    ]
    notes = [{"worker": w, "generation": 5, "at_ms": T0 + 30_000 + 300 * i,
              "stopped": work(*items).to_json()} for i, (w, items) in enumerate(ran.items())]
    return cluster_history(records, notes)


def storm(connectors: int = 9, tasks: int = 10) -> tuple[dict[str, Any], dict[str, Any]]:
    """Connectors of `tasks` tasks created one a second on three workers, then deleted one
    a second: eager and sessioned."""
    names = [f"storm{i}" for i in range(1, connectors + 1)]
    events: list[dict[str, Any]] = [{"at_ms": 1000 * (i + 1), "connector_add": {n: tasks}}
                                    for i, n in enumerate(names)]
    events += [{"at_ms": 1000 * (connectors + i + 2), "connector_remove": n}
               for i, n in enumerate(names)]
    scenario = {"kind": "connect", "protocol": "sessioned", "name": "storm",
                "workers": ["w1", "w2", "w3"], "connectors": {}, "events": events}
    return ex.simulate_compare(scenario)


# ---------------------------------------------------------------- reading a drawn page


def chart(shown: str, i: int) -> str:
    """The markup of panel i's chart in a page's DOM."""
    start = shown.index(f'id="chart-{i}"')
    end = shown.find('id="chart-', start + 10)
    return shown[start:end if end > 0 else len(shown)]


def texts(markup: str) -> list[tuple[float, str]]:
    """Every text a chart's SVG shows, with its font size in px."""
    return [(float(size), text) for size, text in
            re.findall(r'<text[^>]*font-size="([\d.]+)px"[^>]*>([^<]*)</text>', markup)]


def lanes(markup: str) -> list[str]:
    """The lane names a chart shows (its 14 px headings)."""
    return [t for size, t in texts(markup) if size >= 14]


def bars(markup: str) -> list[dict[str, str]]:
    """Each drawn bar's description, which Vega writes from the tooltip's fields."""
    out = []
    for label in re.findall(r'aria-label="([^"]*)"[^>]*aria-roledescription="bar"', markup):
        fields = dict(part.split(": ", 1) for part in label.split("; ") if ": " in part)
        if fields.get("task"):
            out.append(fields)
    return out
