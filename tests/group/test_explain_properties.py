"""Whatever the simulator produces, explain shows all of it and invents nothing.

Random join/leave/crash/connector sequences go through the real simulator; the rendered
rounds are parsed back and compared with the document, member by member.
"""

from __future__ import annotations

import io
import re

from group.explain_support import rendered
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from kctl.rebalance import explain


def expand(tokens: list[str]) -> set[str]:
    names: set[str] = set()
    for token in tokens:
        match = re.fullmatch(r"(.+)-(\d+)\.\.(\d+)", token)
        if match:
            names |= {f"{match[1]}-{n}" for n in range(int(match[2]), int(match[3]) + 1)}
        else:
            names.add(token)
    return names


def parse_row(row: str, load_tokens: int) -> tuple[str, set[str], set[str], str]:
    """member, what the + cell lists, what the - cell lists, the load figure."""
    tokens = row.split()
    member, rest = tokens[0], tokens[1:]
    if rest[:1] == ["(gone)"]:
        rest = rest[1:]
    load = " ".join(rest[len(rest) - load_tokens :])
    rest = rest[: len(rest) - load_tokens]
    cells: list[set[str]] = []
    for sign in ("+", "-"):
        if rest[0] == "—":
            cells.append(set())
            rest = rest[1:]
            continue
        assert rest[0] == sign, row
        end = (
            next((i for i, t in enumerate(rest[1:], 1) if t in ("-", "—")), len(rest))
            if sign == "+"
            else len(rest)
        )
        cells.append(expand(rest[1:end]))
        rest = rest[end:]
    return member, cells[0], cells[1], load


@st.composite
def connect_scenarios(draw) -> dict:
    protocol = draw(st.sampled_from(["eager", "compatible", "sessioned"]))
    workers = [f"w{i}" for i in range(1, draw(st.integers(1, 3)) + 1)]
    connectors = {f"ct{i}": draw(st.integers(0, 4)) for i in range(1, draw(st.integers(0, 3)) + 1)}
    live, known, configured = list(workers), set(workers), dict(connectors)
    events: list[dict] = []
    for _ in range(draw(st.integers(0, 5))):
        choices = ["join", "connector_add"]
        if len(live) > 1:
            choices += ["leave", "crash"]
        if configured:
            choices += ["connector_remove", "tasks_change"]
        action = draw(st.sampled_from(choices))
        if action == "join":
            name = f"w{len(known) + 1}"
            known.add(name)
            live.append(name)
            events.append({"join": name})
        elif action in ("leave", "crash"):
            name = draw(st.sampled_from(live))
            live.remove(name)
            events.append({action: name})
            if action == "crash":
                events.append({"advance_ms": 20_000})
        elif action == "connector_add":
            name = f"ct{10 + len(events)}"
            configured[name] = draw(st.integers(1, 4))
            events.append({"connector_add": {name: configured[name]}})
        elif action == "connector_remove":
            name = draw(st.sampled_from(sorted(configured)))
            del configured[name]
            events.append({"connector_remove": name})
        else:
            name = draw(st.sampled_from(sorted(configured)))
            configured[name] = draw(st.integers(1, 5))
            events.append({"tasks_change": {name: configured[name]}})
    return {
        "kind": "connect",
        "protocol": protocol,
        "scheduled_rebalance_max_delay_ms": draw(st.sampled_from([0, 5000])),
        "workers": workers,
        "connectors": connectors,
        "events": events,
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(connect_scenarios())
def test_every_round_is_rendered_with_exactly_what_each_member_gained_lost_and_runs(scenario):
    doc = explain.simulate_document(scenario)
    console = Console(
        width=400, color_system=None, record=True, highlight=False, file=io.StringIO()
    )
    explain.render(doc, console)
    text = console.export_text(styles=False)
    blocks = re.split(r"^round \d+ · ", text, flags=re.M)[1:]
    assert len(blocks) == len(doc["rounds"])
    for block, round_ in zip(blocks, doc["rounds"], strict=True):
        rows = block.split("\n")[4 : 4 + len(round_["members"])]
        for row, member in zip(rows, round_["members"], strict=True):
            name, plus, minus, load = parse_row(row, load_tokens=2)
            assert name == member
            for cell, field in ((plus, "assigned"), (minus, "revoked")):
                work = explain.Work.of(round_[field][member])
                assert cell == set(work.connectors) | set(work.items), (member, field)
            now = explain.Work.of(round_["assignments"][member])
            assert load == f"{len(now.connectors)}c {len(now.items)}t"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(connect_scenarios())
def test_compare_and_trace_render_within_the_width_for_any_story(scenario):
    doc = explain.simulate_document(scenario)
    eager, cooperative = explain.simulate_compare(scenario)
    for text in (
        rendered(lambda c: explain.render(doc, c, trace=True)),
        rendered(lambda c: explain.render_compare(eager, cooperative, c)),
    ):
        assert max(len(line) for line in text.splitlines()) <= 100
