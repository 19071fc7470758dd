"""Render a rebalance simulation so a person can follow it round by round.

Everything here reads the simulator's stable JSON document (``SimulationResult.to_json()``)
and nothing else, so the rendering can be pinned by golden files and reused for documents
saved earlier (``kctl rebalance explain -o json > run.json``). Rendering writes to a
``rich.console.Console`` handed in by the caller: the CLI passes a terminal console, tests a
fixed-width console without colour.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from rich import box
from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

Doc = Mapping[str, Any]

EAGER_PROTOCOLS = frozenset({"eager", "default", "range", "roundrobin", "sticky"})
COOPERATIVE_PROTOCOLS = frozenset({"compatible", "sessioned", "cooperative-sticky"})

# The sets the leader of an incremental cooperative round computes, in the
# order Kafka's IncrementalCooperativeAssignor computes them.
HEADLINE_SETS = ("lost", "new", "deleted", "duplicated")
# The background sets, and the totals the member rows already show, stay out of the sets line.
BACKGROUND_SETS = ("configured", "previous", "active", "assigned", "revoked")

SUMMARY_LABELS = {
    "rounds": "rounds",
    "tasks_stopped": "tasks stopped",
    "tasks_started": "tasks started",
    "connectors_stopped": "connectors stopped",
    "connectors_started": "connectors started",
    "partitions_stopped": "partitions revoked",
    "partitions_started": "partitions assigned",
    "stable_at_ms": "stable at (ms)",
}

# A consumer document also carries the contract's tasks_* (counting partitions) and
# connectors_* (0) keys for scripts; people read the partitions_* rows instead.
CONSUMER_SUMMARY_ALIASES = frozenset(
    {"tasks_stopped", "tasks_started", "connectors_stopped", "connectors_started"}
)

ERROR_CODES = ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "ERROR")

_NUMBERED = re.compile(r"^(?P<prefix>.+)-(?P<number>\d+)$")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Work:
    """One member's work as explain sees it: connectors plus numbered items (tasks or partitions)."""

    connectors: tuple[str, ...] = ()
    items: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: Any) -> Work:
        """Accept both shapes of the contract: connect dicts and consumer partition lists."""
        if value is None:
            return cls()
        if isinstance(value, Mapping):
            return cls(tuple(value.get("connectors", ())), tuple(value.get("tasks", ())))
        return cls((), tuple(value))

    @property
    def is_empty(self) -> bool:
        return not self.connectors and not self.items

    @property
    def size(self) -> int:
        return len(self.connectors) + len(self.items)


def compact(names: Iterable[str]) -> str:
    """Collapse runs of numbered names ("ct1-0 ct1-1 ct1-2" -> "ct1-0..2") to keep rows short.

    Only runs of three or more collapse, so a pair stays readable as two names.
    """
    parts: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if len(run) >= 3:
            parts.append(f"{run[0][0]}-{run[0][1]}..{run[-1][1]}")
        else:
            parts.extend(f"{p}-{n}" for p, n in run)
        run.clear()

    for name in names:
        match = _NUMBERED.match(name)
        if match is None:
            flush()
            parts.append(name)
            continue
        prefix, number = match["prefix"], int(match["number"])
        if run and (run[-1][0] != prefix or run[-1][1] + 1 != number):
            flush()
        run.append((prefix, number))
    flush()
    return " ".join(parts)


def work_text(work: Work, *, style: str = "", empty: str = "—") -> Text:
    """Connectors (bold) then tasks or partitions, compacted."""
    if work.is_empty:
        return Text(empty, style="dim")
    text = Text()
    if work.connectors:
        text.append(" ".join(work.connectors), style=f"{style} bold".strip())
    if work.items:
        if work.connectors:
            text.append(" ")
        text.append(compact(work.items), style=style)
    return text


def load_text(work: Work, kind: str) -> str:
    """Short load figure for a member: "1c 4t" (connect) or "3p" (consumer)."""
    if kind == "consumer":
        return f"{len(work.items)}p"
    return f"{len(work.connectors)}c {len(work.items)}t"


# --------------------------------------------------------------------------- protocols


def compare_protocols(kind: str, protocol: str) -> tuple[str, str]:
    """The (eager, cooperative) pair ``--compare`` runs for a scenario.

    Connect: eager against sessioned (or compatible, when the scenario asks for it).
    Consumer: the scenario's eager assignor (sticky when it is already cooperative)
    against cooperative-sticky; sticky vs cooperative-sticky isolates the protocol's cost
    because both compute the same sticky assignment.
    """
    if kind == "consumer":
        eager = protocol if protocol in EAGER_PROTOCOLS else "sticky"
        return eager, "cooperative-sticky"
    eager = "eager"
    cooperative = protocol if protocol in ("compatible", "sessioned") else "sessioned"
    return eager, cooperative


# --------------------------------------------------------------------------- documents


def to_json(doc: Doc) -> str:
    """The stable document, key order as the simulator wrote it."""
    return json.dumps(doc, indent=2, sort_keys=False)


def to_yaml(doc: Doc) -> str:
    return yaml.safe_dump(_plain(doc), sort_keys=False, default_flow_style=False)


def compare_document(eager: Doc, cooperative: Doc) -> dict[str, Any]:
    """Both runs plus the difference explain highlights, for ``--compare -o json``."""
    return {
        "kind": eager.get("kind"),
        "protocols": [eager.get("protocol"), cooperative.get("protocol")],
        "difference": _difference(eager, cooperative),
        "results": {
            str(eager.get("protocol")): eager,
            str(cooperative.get("protocol")): cooperative,
        },
    }


def _plain(value: Any) -> Any:
    """Plain containers only, so yaml.safe_dump accepts mappings and tuples alike."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _difference(eager: Doc, cooperative: Doc) -> dict[str, int]:
    left, right = eager.get("summary", {}), cooperative.get("summary", {})
    return {
        key: int(left.get(key, 0)) - int(right.get(key, 0))
        for key in left
        if isinstance(left.get(key), int) and isinstance(right.get(key), int)
    }


def stopped_key(doc: Doc) -> str:
    """The summary field that measures the stop-the-world cost for this kind of group."""
    summary = doc.get("summary", {})
    for key in ("partitions_stopped", "tasks_stopped"):
        if key in summary:
            return key
    return "tasks_stopped"


def shown_summary(doc: Doc) -> dict[str, Any]:
    """The summary rows a person reads: a consumer's contract aliases stay in the JSON."""
    summary = dict(doc.get("summary", {}))
    if doc.get("kind") == "consumer" and "partitions_stopped" in summary:
        for key in CONSUMER_SUMMARY_ALIASES:
            summary.pop(key, None)
    return summary


# --------------------------------------------------------------------------- rounds


def render(doc: Doc, console: Console, *, trace: bool = False) -> None:
    """The default view: a header, one block per round, then the summary."""
    render_header(doc, console)
    for number, round_ in enumerate(doc.get("rounds", ()), start=1):
        render_round(round_, console, kind=str(doc.get("kind", "connect")), number=number)
        if trace:
            render_round_trace(round_, console)
    render_summary(doc, console)


def render_header(doc: Doc, console: Console) -> None:
    parts = [str(doc.get("kind", "connect")), f"protocol {doc.get('protocol', '?')}"]
    if doc.get("scenario"):
        parts.insert(0, f"scenario {doc['scenario']}")
    if "session_timeout_ms" in doc:
        parts.append(f"session timeout {doc['session_timeout_ms']} ms")
    console.print(Text(" · ".join(parts), style="bold"))


def render_round(round_: Doc, console: Console, *, kind: str = "connect", number: int = 0) -> None:
    """One round: who triggered it, who led, what each member gained and lost, and why."""
    when = round_.get("time") or f"{round_.get('at_ms')} ms"  # a live round has wall time
    what = ("shutdown" if round_.get("event") == "shutdown"
            else f"generation {round_.get('generation')}")
    title = f"round {number} · {what} · {when} · "
    header = Text(title, style="bold cyan") + Text(
        str(round_.get("trigger", "")), style="bold yellow"
    )
    console.print(Rule(header, align="left", style="cyan"))

    members = list(round_.get("members") or sorted(round_.get("assignments", {})))
    facts = Text()
    facts.append("leader ", style="bold")
    facts.append(str(round_.get("leader", "")) or "—")
    facts.append("  members ", style="bold")
    facts.append(" ".join(members) if members else "—")
    if round_.get("protocol"):
        facts.append("  protocol ", style="bold")
        facts.append(str(round_["protocol"]))
    delay = int(round_.get("delay_ms", 0) or 0)
    facts.append("  delay ", style="bold")
    if delay:
        facts.append(f"{delay} ms (lost work waits, then a rebalance)", style="magenta")
    else:
        facts.append("0 ms")
    console.print(facts)

    console.print(_member_table(round_, members, kind))

    sets_text = _sets_text(round_.get("sets") or {})
    if sets_text is not None:
        console.print(sets_text)
    lost_work = _lost_work_text(round_.get("lost_work") or {})
    if lost_work is not None:
        console.print(lost_work)
    sources = round_.get("sources") or {}
    gone = sorted(m for m, source in sources.items() if source == "gone (leader's assignment)")
    if gone:  # gone without a word: what they stopped is what the group last gave them
        console.print(Text("gone (killed, or lost their session); what they stopped is told "
                           "from the leader's last assignment to them: " + " ".join(gone),
                           style="dim"))
    noted = sorted(m for m, source in sources.items() if source == "departure note")
    if noted:
        console.print(Text("left cleanly; what they stopped is from their departure note: "
                           + " ".join(noted), style="dim"))
    borrowed = sorted(m for m, source in sources.items()
                      if source in ("leader's assignment", "no record"))
    if borrowed:  # a live round: members that wrote no record of it
        console.print(Text("from the leader's assignment (no record of their own): "
                           + " ".join(borrowed), style="dim"))
    missed = sorted(m for m, source in sources.items() if source == "not received")
    if missed:  # they recorded a later generation: this one's answer never reached them
        console.print(Text("did not complete this generation (the leader's answer did not "
                           "reach them; what it moved moves in a later round): "
                           + " ".join(missed), style="dim"))


def _lost_work_text(note: Mapping[str, Any]) -> Text | None:
    """A live round's lost work: when it is due, and once reassigned, when it was."""
    if not note:
        return None
    text = Text()
    if note.get("waiting"):
        text.append("lost work ", style="bold")
        text.append(compact(note["waiting"]), style="magenta")
        text.append(f" runs nowhere; due to be reassigned at {note.get('due', '')} "
                    "(when the delay expires, the next round hands it out)")
    if note.get("reassigned"):
        if text:
            text.append("\n")
        text.append("reassigned ", style="bold")
        text.append(compact(note["reassigned"]), style="green")
        text.append(f" at {note.get('reassigned_at', '')}")
        if "late_ms" in note:
            late = int(note["late_ms"]) / 1000
            text.append(f" ({late:.1f} s after it was due)")
    return text or None


def _member_table(round_: Doc, members: Sequence[str], kind: str) -> Table:
    assigned = round_.get("assigned", {})
    revoked = round_.get("revoked", {})
    assignments = round_.get("assignments", {})
    names = list(members) + sorted(set(revoked) - set(members))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=True, show_edge=False)
    table.add_column("member", no_wrap=True)
    table.add_column("+ assigned", ratio=1, overflow="fold")
    table.add_column("- revoked", ratio=1, overflow="fold")
    table.add_column("now", no_wrap=True, justify="right")
    for name in names:
        plus = Work.of(assigned.get(name))
        minus = Work.of(revoked.get(name))
        now = Work.of(assignments.get(name))
        table.add_row(
            name if name in members or name.endswith(" (gone)") else f"{name} (gone)",
            _signed(plus, "+", "green"),
            _signed(minus, "-", "red"),
            load_text(now, kind),
        )
    return table


def _signed(work: Work, sign: str, style: str) -> Text:
    if work.is_empty:
        return Text("—", style="dim")
    return Text(f"{sign} ", style=style) + work_text(work, style=style)


def _sets_text(sets: Mapping[str, Any]) -> Text | None:
    """The leader's set algebra: the headline sets always, the others only when non-empty."""
    if not sets:
        return None
    names = [n for n in HEADLINE_SETS if n in sets]
    names += [n for n in sets if n not in HEADLINE_SETS and n not in BACKGROUND_SETS]
    parts: list[Text] = []
    for name in names:
        work = Work.of(sets[name])
        if name not in HEADLINE_SETS and work.is_empty:
            continue
        style = "red" if name in ("lost", "duplicated") and not work.is_empty else ""
        parts.append(Text(f"{name} ", style="bold") + work_text(work, style=style))
    if not parts:
        return None
    return Text("sets: ", style="bold") + Text("   ").join(parts)


# --------------------------------------------------------------------------- summary


def render_summary(doc: Doc, console: Console) -> None:
    summary = shown_summary(doc)
    console.print(Rule(Text("summary", style="bold"), align="left"))
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(justify="right")
    for key, value in summary.items():
        table.add_row(SUMMARY_LABELS.get(key, key.replace("_", " ")), str(value))
    console.print(table)


# --------------------------------------------------------------------------- compare


def render_compare(eager: Doc, cooperative: Doc, console: Console) -> None:
    """Two runs of one scenario side by side, leading with what eager stops and restarts."""
    left, right = str(eager.get("protocol")), str(cooperative.get("protocol"))
    title = f"{eager.get('kind', 'connect')}: {left} vs {right}"
    if eager.get("scenario"):
        title = f"scenario {eager['scenario']} · {title}"
    console.print(Text(title, style="bold"))

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("", style="bold", no_wrap=True)
    table.add_column(left, justify="right")
    table.add_column(right, justify="right")
    table.add_column(f"{left} - {right}", justify="right")
    lsum, rsum = shown_summary(eager), shown_summary(cooperative)
    stop_key = stopped_key(eager)
    for key in [*lsum, *(k for k in rsum if k not in lsum)]:
        lv, rv = lsum.get(key, "—"), rsum.get(key, "—")
        diff = str(lv - rv) if isinstance(lv, int) and isinstance(rv, int) else ""
        style = "bold red" if key == stop_key else ""
        table.add_row(
            SUMMARY_LABELS.get(key, key.replace("_", " ")), str(lv), str(rv), diff, style=style
        )
    console.print(table)

    console.print(_stop_the_world_line(eager, cooperative, stop_key))

    side = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=True)
    side.add_column(f"{left} rounds", ratio=1, overflow="fold")
    side.add_column(f"{right} rounds", ratio=1, overflow="fold")
    side.add_row(_round_lines(eager), _round_lines(cooperative))
    console.print(side)


def _stop_the_world_line(eager: Doc, cooperative: Doc, key: str) -> Text:
    what = key.split("_")[0]
    lv = int(eager.get("summary", {}).get(key, 0))
    rv = int(cooperative.get("summary", {}).get(key, 0))
    text = Text("stop-the-world cost: ", style="bold")
    text.append(f"{eager.get('protocol')} stops {lv} {what}", style="red")
    text.append(", ")
    text.append(f"{cooperative.get('protocol')} stops {rv}", style="green")
    if lv > rv:
        text.append(f" ({lv - rv} fewer restarts)")
    elif lv == rv:
        text.append(" (no difference)")
    return text


def _round_lines(doc: Doc) -> Group:
    """One line per round: generation, time, trigger, and the churn it caused."""
    kind = str(doc.get("kind", "connect"))
    lines: list[Text] = []
    for round_ in doc.get("rounds", ()):
        plus = _total(round_.get("assigned", {}).values())
        minus = _total(round_.get("revoked", {}).values())
        running = _total(round_.get("assignments", {}).values())
        line = Text(f"g{round_.get('generation')} {round_.get('at_ms')}ms ")
        line.append(str(round_.get("trigger", "")), style="yellow")
        line.append(" ")
        line.append(f"+{load_text(plus, kind)}", style="green")
        line.append(" ")
        line.append(f"-{load_text(minus, kind)}", style="red")
        line.append(f" ={load_text(running, kind)}")
        if round_.get("delay_ms"):
            line.append(f" delay {round_['delay_ms']}ms", style="magenta")
        lines.append(line)
    return Group(*lines)


def _total(values: Iterable[Any]) -> Work:
    connectors: list[str] = []
    items: list[str] = []
    for value in values:
        work = Work.of(value)
        connectors += work.connectors
        items += work.items
    return Work(tuple(connectors), tuple(items))


# --------------------------------------------------------------------------- trace

_SHORT = {
    "JoinGroup": "Join",
    "JoinGroupResponse": "JoinResp",
    "SyncGroup": "Sync",
    "SyncGroupResponse": "SyncResp",
    "Heartbeat": "HB",
    "HeartbeatResponse": "HBResp",
    "LeaveGroup": "Leave",
}
COORDINATOR = "coordinator"
_FULL_LANE = 20  # room for "─JoinGroupResponse▶" between two lifelines
_SHORT_LANE = 11  # room for "─JoinResp▶"
_DETAIL_ROOM = 30


def render_trace(doc: Doc, console: Console) -> None:
    """The whole message sequence, round by round, as a sequence diagram."""
    render_header(doc, console)
    for number, round_ in enumerate(doc.get("rounds", ()), start=1):
        title = (
            f"round {number} · generation {round_.get('generation')} · {round_.get('trigger', '')}"
        )
        console.print(Rule(Text(title, style="bold cyan"), align="left", style="cyan"))
        render_round_trace(round_, console)


def render_round_trace(round_: Doc, console: Console) -> None:
    messages = list(round_.get("trace") or ())
    if not messages:
        console.print(Text("(no messages recorded)", style="dim"))
        return
    lanes = _lanes(messages, round_.get("members") or ())
    console.print(sequence_diagram(messages, lanes, width=console.width))


def _lanes(messages: Sequence[Mapping[str, Any]], members: Iterable[str]) -> list[str]:
    seen = set(members)
    for message in messages:
        seen.update((str(message.get("from")), str(message.get("to"))))
    seen.discard(COORDINATOR)
    return [COORDINATOR, *sorted(seen)]


def sequence_diagram(
    messages: Sequence[Mapping[str, Any]], lanes: Sequence[str], *, width: int
) -> Table:
    """Lifelines for the coordinator and each member, one arrow per message.

    Lanes narrow (and message names shorten) as members are added; past what the width
    can hold it falls back to one line per message.
    """
    time_width = max(5, *(len(str(m.get("at_ms", ""))) for m in messages))
    available = (width - time_width - 2 - _DETAIL_ROOM) // max(1, len(lanes))
    names = max(len(n) for n in lanes) + 2
    short = available < max(_FULL_LANE, names)
    lane = max(_SHORT_LANE if short else _FULL_LANE, names)
    if lane > available:
        lane = 0
    table = Table(box=None, show_header=True, pad_edge=False, padding=(0, 1), show_edge=False)
    table.add_column("at_ms", justify="right", no_wrap=True)
    if not lane:
        table.add_column("message", no_wrap=True)
        table.add_column("detail", overflow="fold")
        for message in messages:
            text = f"{message.get('from')} -> {message.get('to')}  {message.get('message')}"
            table.add_row(
                str(message.get("at_ms", "")), text, _detail(message), style=_style(message)
            )
        return table
    table.add_column(_lane_header(lanes, lane), no_wrap=True)
    table.add_column("detail", overflow="fold")
    for message in messages:
        label = str(message.get("message", ""))
        if short:
            label = _SHORT.get(label, label)
        line = _arrow(lanes, lane, str(message.get("from")), str(message.get("to")), label)
        table.add_row(str(message.get("at_ms", "")), line, _detail(message), style=_style(message))
    return table


def _lane_header(lanes: Sequence[str], lane: int) -> str:
    return "".join(name[: lane - 1].center(lane) for name in lanes).rstrip()


def _arrow(lanes: Sequence[str], lane: int, source: str, target: str, label: str) -> str:
    centre = {name: i * lane + lane // 2 for i, name in enumerate(lanes)}
    cells = [" "] * (len(lanes) * lane)
    for position in centre.values():
        cells[position] = "│"
    if source not in centre or target not in centre or source == target:
        return "".join(cells).rstrip()
    a, b = centre[source], centre[target]
    low, high = min(a, b), max(a, b)
    for i in range(low + 1, high):
        cells[i] = "─"
    if b > a:
        cells[high - 1] = "▶"
    else:
        cells[low + 1] = "◀"
    room = high - low - 3
    label = label[:room] if room > 0 else ""
    start = low + 2 + (room - len(label)) // 2
    for i, char in enumerate(label):
        cells[start + i] = char
    return "".join(cells).rstrip()


def _detail(message: Mapping[str, Any]) -> str:
    return str(message.get("detail", "") or "")


def _style(message: Mapping[str, Any]) -> str:
    detail = _detail(message)
    return "red" if any(code in detail for code in ERROR_CODES) else ""


# --------------------------------------------------------------------------- running


def scenario_from_flags(
    *,
    kind: str = "connect",
    protocol: str | None = None,
    workers: str = "3",
    connectors: int = 2,
    tasks: int = 4,
    topics: int = 2,
    partitions: int = 3,
    join: Sequence[str] = (),
    leave: Sequence[str] = (),
    crash: Sequence[str] = (),
    advance_ms: int | None = None,
    scheduled_rebalance_max_delay_ms: int | None = None,
    session_timeout_ms: int | None = None,
) -> dict[str, Any]:
    """The scenario document the common CLI flags stand for (``Scenario.from_flags``).

    ``workers`` is a count ("3" -> w1 w2 w3; consumers C0 C1 C2) or comma-separated names.
    """
    from kctl.rebalance.scenario import Scenario

    count = workers.strip()
    members: int | list[str] = (
        int(count) if count.isdigit() else [n.strip() for n in count.split(",") if n.strip()]
    )
    optional: dict[str, int] = {}
    if session_timeout_ms is not None:
        optional["session_timeout_ms"] = session_timeout_ms
    if scheduled_rebalance_max_delay_ms is not None:
        optional["scheduled_rebalance_max_delay_ms"] = scheduled_rebalance_max_delay_ms
    scenario = Scenario.from_flags(
        kind,
        protocol,
        members,
        connectors,
        tasks,
        tuple(join),
        tuple(leave),
        tuple(crash),
        topics=topics,
        partitions=partitions,
        advance_ms=advance_ms,
        **optional,
    )
    return scenario.to_dict()


def with_protocol(scenario: Mapping[str, Any], protocol: str) -> dict[str, Any]:
    """The same scenario under another protocol (what ``--compare`` runs twice)."""
    return {**scenario, "protocol": protocol}


def simulate_document(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a scenario document, run the simulator, return its stable JSON document."""
    from kctl.rebalance.scenario import Scenario
    from kctl.rebalance.simulator import simulate

    return simulate(Scenario.from_dict(_plain(scenario))).to_json()


def simulate_compare(scenario: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one scenario under its eager and its cooperative protocol."""
    kind = str(scenario.get("kind", "connect"))
    eager, cooperative = compare_protocols(kind, str(scenario.get("protocol", "")))
    return (
        simulate_document(with_protocol(scenario, eager)),
        simulate_document(with_protocol(scenario, cooperative)),
    )
