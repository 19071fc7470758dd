"""A live cluster's rebalances, told as `kctl rebalance explain` tells a simulated one.

Every worker writes what it saw of each generation it completed into the status topic
(`kctl.group.history.GenerationRecord`): why it joined, what it started and stopped, what it
runs now and, on the leader, the members, the assignor's sets, the delay and everything the
assignor was given (`AssignorInputs`). This module merges those records, one round per
generation, into the document `rebalance explain -o json` writes (`rounds[]`, `summary`), so
one renderer, one HTML timeline and one set of scripts serve both; names each round's
cause from the membership, the protocol and the reasons the workers gave; and replays a
recorded round through the same assignor to show that it reproduces the recorded answer.

Each round also says where its facts came from (`sources`): a worker's own record, the
leader's assignment when that worker wrote none (it died, or has not caught up yet), or
`not received` when it wrote none but recorded a later generation (it never completed this
one, so the leader's answer to it moved nothing and is not counted). A worker that is gone
(it left, or was killed) recorded nothing of what it stopped: the round that notices it
counts that from its departure note, or else from the leader's last assignment to it, and
says which. When every worker of the group stopped, a `shutdown` round (with no generation)
stands between the last generation before and the first after.

The history is a record: each departure note is kept under its own key
(`departure-<worker>-<generation>`) and matched to the round by generation, so nothing
written later changes what an earlier round says of its members.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kctl.errors import NotFoundError
from kctl.group.assignors.connect import EMPTY, ConnectorsAndTasks, connect_assignor, union_all
from kctl.group.history import AssignorInputs

__all__ = [
    "cluster_history",
    "duration",
    "filter_rounds",
    "parse_since",
    "replay",
    "round_of",
]

Doc = Mapping[str, Any]

# The reasons a worker gives when it (re)joins (kctl.runtime.distributed, kctl.group.protocol)
_CONNECTOR = re.compile(
    r"^connector (?P<name>.+) (?P<what>created|deleted|reconfigured)(?: to (?P<tasks>\d+) task)?")
_DELAY = ("scheduled rebalance delay expired", "scheduled rebalance")
_FOLLOW_UP = ("rejoin after revocation",)
_QUIET = ("", "join", "rebalance started by the group")


# --------------------------------------------------------------------------- names


def _worker_of_url(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def _names(records: Sequence[Doc]) -> dict[str, str]:
    """member id -> worker, from every record (each names its own member id) and the URLs
    the leaders saw in JoinGroup metadata."""
    names: dict[str, str] = {}
    by_url = {str(r.get("url")): str(r["worker"]) for r in records if r.get("url")}
    for r in records:
        for member, meta in (r.get("inputs") or {}).get("members", {}).items():
            url = str(meta.get("url", ""))
            names.setdefault(member, by_url.get(url) or _worker_of_url(url) or member)
    for r in records:
        names[str(r["member_id"])] = str(r["worker"])
    return names


def _time(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- rounds


def _work(value: Any) -> ConnectorsAndTasks:
    return ConnectorsAndTasks.from_json(value) if isinstance(value, Mapping) else EMPTY


def _round(generation: int, records: Sequence[Doc], names: Mapping[str, str],
           last_recorded: Mapping[str, int]) -> dict[str, Any]:
    """One generation from the records its workers wrote (the leader's first).

    A member without a record of its own is told from the leader's answer to it only if it
    recorded no later generation (it died, or its record is not read yet). One that did
    record a later one did not complete this generation (its SyncGroup was answered with
    REBALANCE_IN_PROGRESS, as the tests' broker does when the leader rejoins first): it
    never got that answer and kept running what it had, and the work the answer moved is
    moved again, and counted, in a later round."""
    leader_id = next((str(r["leader"]) for r in records if r.get("leader")), "")
    leader = next((r for r in records if r["member_id"] == leader_id), None)
    inputs = (leader or {}).get("inputs") or {}
    mine = {str(r["worker"]): r for r in records}
    member_ids = list((leader or {}).get("members") or ()) or [r["member_id"] for r in records]
    members = sorted({names.get(m, m) for m in member_ids} | set(mine))
    answers = {names.get(m, m): a for m, a in inputs.get("assignments", {}).items()}
    metadata = {names.get(m, m): meta for m, meta in inputs.get("members", {}).items()}

    assignments: dict[str, Any] = {}
    assigned: dict[str, Any] = {}
    revoked: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for worker in members:
        own = mine.get(worker)
        if own is not None:
            assignments[worker] = _work(own.get("owned")).to_json()
            plus, minus = _work(own.get("assigned")), _work(own.get("revoked"))
            sources[worker] = "worker record"
        elif worker in answers and last_recorded.get(worker, -1) > generation:
            assignments[worker] = _work(metadata.get(worker, {}).get("owned")).to_json()
            plus = minus = EMPTY
            sources[worker] = "not received"
        elif worker in answers:
            answer = answers[worker]
            before = _work(metadata.get(worker, {}).get("owned"))
            plus, minus = _work(answer.get("assigned")), _work(answer.get("revoked"))
            if int(answer.get("version", 2)) == 0:
                assignments[worker] = plus.to_json()
            else:
                assignments[worker] = ((before - minus) | plus).to_json()
            sources[worker] = "leader's assignment"
        else:
            assignments[worker] = EMPTY.to_json()
            plus = minus = EMPTY
            sources[worker] = "no record"
        if not plus.is_empty:
            assigned[worker] = plus.to_json()
        if not minus.is_empty:
            revoked[worker] = minus.to_json()

    at_ms = int(leader["at_ms"]) if leader else min(int(r["at_ms"]) for r in records)
    started = [int(r["started_ms"]) for r in records if r.get("started_ms")]
    delay = int(leader.get("delay_ms", 0)) if leader else max(
        int(r.get("delay_ms", 0)) for r in records)
    reasons = {str(r["worker"]): str(r.get("trigger", "")) for r in records}
    member_of = {names.get(m, m): m for m in member_ids}
    member_of.update({str(r["worker"]): str(r["member_id"]) for r in records})
    return {
        "generation": generation,
        "at_ms": at_ms,
        "time": _time(at_ms),
        "started_ms": min(started) if started else at_ms,
        "trigger": "",
        "causes": [],
        "leader": names.get(leader_id, leader_id),
        "members": members,
        "assignments": assignments,
        "assigned": dict(sorted(assigned.items())),
        "revoked": dict(sorted(revoked.items())),
        "delay_ms": delay,
        "sets": dict((leader or {}).get("sets") or {}),
        "protocol": str((leader or records[0]).get("protocol", "")),
        "config_offset": inputs.get("config_offset"),
        "reasons": dict(sorted(reasons.items())),
        "sources": sources,
        "replayable": bool(inputs),
        "member_ids": dict(sorted(member_of.items())),
        "trace": [],
    }


@dataclass(frozen=True)
class _Departure:
    """A worker's note that it left cleanly after completing `generation`."""

    worker: str
    at_ms: int
    generation: int | None  # None: an older kctl's note, placed by its time
    stopped: ConnectorsAndTasks | None  # None: an older kctl's note, without what it stopped

    @classmethod
    def of(cls, doc: Doc) -> _Departure:
        stopped = doc.get("stopped")
        return cls(worker=str(doc["worker"]), at_ms=int(doc.get("at_ms", 0)),
                   generation=None if doc.get("generation") is None
                   else int(doc["generation"]),
                   stopped=ConnectorsAndTasks.from_json(stopped)
                   if isinstance(stopped, Mapping) else None)


@dataclass(frozen=True)
class _Gone:
    """A member of the previous round whose process did not go on into this one."""

    worker: str
    stopped: ConnectorsAndTasks
    source: str  # "departure note" or "gone (leader's assignment)"
    note: _Departure | None
    back: bool  # a new process (or member) of the same name is in this round


class _Ledger:
    """What the records say of each worker across generations: the generations it recorded
    itself and the departure notes it left, to tell, for a pair of rounds, who went away."""

    def __init__(self, records: Sequence[Doc], departures: Iterable[Doc]):
        self.own: dict[str, list[int]] = {}
        for r in records:
            self.own.setdefault(str(r["worker"]), []).append(int(r["generation"]))
        self.notes: dict[str, list[_Departure]] = {}
        for d in departures:
            if isinstance(d, Mapping) and "worker" in d:
                note = _Departure.of(d)
                self.notes.setdefault(note.worker, []).append(note)

    def last_own(self, worker: str, before: float) -> int:
        return max((g for g in self.own.get(worker, ()) if g < before), default=-1)

    def note(self, worker: str, before: float, after_ms: int = 0,
             until_ms: float = float("inf")) -> _Departure | None:
        """The note the worker left after the last generation it recorded before `before`
        (a note of an older departure belongs to an earlier round). A note that names no
        generation is placed by its time alone."""
        last = self.last_own(worker, before)
        notes = [n for n in self.notes.get(worker, ())
                 if (n.generation == last if n.generation is not None else
                     after_ms <= n.at_ms <= until_ms)]
        return max(notes, key=lambda n: n.at_ms, default=None)


def _gone(round_: Doc, previous: Doc, ledger: _Ledger) -> list[_Gone]:
    """The previous round's members that are not in this round, or are back as another
    process (a departure note between the rounds, or a new member id)."""
    out: list[_Gone] = []
    before_ids, now_ids = previous.get("member_ids") or {}, round_.get("member_ids") or {}
    for worker in previous["members"]:
        back = worker in round_["members"]
        note = ledger.note(worker, round_["generation"], int(previous.get("at_ms") or 0),
                           int(round_["at_ms"]))
        renewed = (back and bool(before_ids.get(worker)) and bool(now_ids.get(worker))
                   and before_ids[worker] != now_ids[worker])
        if back and note is None and not renewed:
            continue
        if note is not None and note.stopped is not None:
            stopped, source = note.stopped, "departure note"
        else:
            stopped = _work(previous["assignments"].get(worker))
            source = "gone (leader's assignment)"
        if back:  # the process in this round may have recorded stopping it itself
            stopped = stopped - _work(round_["revoked"].get(worker))
        out.append(_Gone(worker, stopped, source, note, back))
    return out


def _count_gone(round_: dict[str, Any], gone: Sequence[_Gone]) -> None:
    """The gone processes' stops as rows of this round, as the simulator shows them
    (keyed "w2 (gone)" when a process of that name is in the round again)."""
    for g in gone:
        key = f"{g.worker} (gone)" if g.back else g.worker
        if not g.stopped.is_empty:
            round_["revoked"][key] = g.stopped.to_json()
        round_["sources"][key] = g.source
    round_["revoked"] = dict(sorted(round_["revoked"].items()))


def _shutdown(previous: Doc, gone: Sequence[_Gone]) -> dict[str, Any]:
    """A round with no generation for a group whose every worker stopped: what each
    stopped, and when (the departure notes' times)."""
    times = [g.note.at_ms for g in gone if g.note is not None]
    at_ms = max(times) if times else int(previous["at_ms"])
    workers = sorted(g.worker for g in gone)
    return {
        "generation": None,
        "event": "shutdown",
        "at_ms": at_ms,
        "time": _time(at_ms),
        "started_ms": min(times) if times else at_ms,
        "trigger": "",
        "causes": [{"cause": "group stopped", "workers": workers,
                    "left": sorted(g.worker for g in gone if g.note is not None)}],
        "leader": "",
        "members": [],
        "assignments": {},
        "assigned": {},
        "revoked": {g.worker: g.stopped.to_json() for g in sorted(gone, key=lambda g: g.worker)
                    if not g.stopped.is_empty},
        "delay_ms": 0,
        "sets": {},
        "protocol": str(previous.get("protocol", "")),
        "config_offset": None,
        "reasons": {},
        "sources": {g.worker: g.source for g in gone},
        "replayable": False,
        "member_ids": {},
        "trace": [],
    }


def _causes(round_: dict[str, Any], previous: dict[str, Any] | None,
            gone: Sequence[_Gone]) -> list[dict[str, Any]]:
    """Why this generation happened: membership and protocol changes seen against the
    previous round, then the reasons the workers gave when they joined."""
    causes: list[dict[str, Any]] = []
    if previous is None:
        causes.append({"cause": "group formed", "workers": list(round_["members"])})
    elif previous.get("event") == "shutdown":
        down = int(round_["started_ms"]) - int(previous["at_ms"])
        causes.append({"cause": "group formed again", "workers": list(round_["members"]),
                       "down_ms": max(0, down)})
    else:
        now, before = set(round_["members"]), set(previous["members"])
        for worker in sorted(now - before):
            causes.append({"cause": "worker joined", "worker": worker})
        for g in gone:
            if g.back:
                what = "worker restarted" if g.note is not None else "worker rejoined as new"
            else:
                what = "worker left" if g.note is not None else "worker lost its session"
            causes.append({"cause": what, "worker": g.worker})
        if previous.get("protocol") and round_["protocol"] != previous["protocol"]:
            causes.append({"cause": "protocol change", "from": previous["protocol"],
                           "to": round_["protocol"]})
    seen: set[tuple[str, str]] = set()
    for worker, reason in round_["reasons"].items():
        cause = _reason_cause(reason, worker, round_)
        key = (cause["cause"], str(cause.get("connector", cause.get("reason", ""))))
        if cause["cause"] == "quiet" or key in seen:
            continue
        seen.add(key)
        causes.append(cause)
    if previous is not None and previous.get("event") != "shutdown":
        causes += _config_causes(round_, previous, causes)
    if not causes:
        causes.append({"cause": "rebalance started by the group"})
    return causes


def _config_causes(round_: Doc, previous: Doc, named: Sequence[Doc]) -> list[dict[str, Any]]:
    """Connectors deleted or created by config records the leader read for this round that
    no worker gave as its reason (it was joining already, for a follow-up round say), told
    from the incremental assignor's sets: without them such a round's revocations have no
    cause. (Eager rounds revoke everything; their sets say nothing about config.)"""
    offset, before = round_.get("config_offset"), previous.get("config_offset")
    if round_.get("protocol") == "default" or offset is None or before is None \
            or int(offset) <= int(before):
        return []
    sets = round_.get("sets") or {}
    ran_before = {c for work in previous.get("assignments", {}).values()
                  for c in work.get("connectors", ())}
    mentioned = {(c["cause"], c.get("connector")) for c in [*named, *previous.get("causes", ())]}
    out: list[dict[str, Any]] = []
    for kind, cause in (("deleted", "connector deleted"), ("new", "connector created")):
        for name in sorted((sets.get(kind) or {}).get("connectors", ())):
            if (cause, name) in mentioned or (name in ran_before) != (kind == "deleted"):
                continue  # named already; or lost work handed out again, not a creation
            out.append({"cause": cause, "connector": name, "worker": round_["leader"],
                        "config_offset": offset})
    return out


def _reason_cause(reason: str, worker: str, round_: Doc) -> dict[str, Any]:
    match = _CONNECTOR.match(reason)
    if match:
        cause: dict[str, Any] = {"cause": f"connector {match['what']}",
                                 "connector": match["name"], "worker": worker}
        if match["tasks"]:
            cause["tasks"] = int(match["tasks"])
        if round_.get("config_offset") is not None:
            cause["config_offset"] = round_["config_offset"]
        return cause
    if reason in _DELAY:
        return {"cause": "scheduled delay expired", "worker": worker}
    if reason in _FOLLOW_UP:
        return {"cause": "follow-up round", "worker": worker}
    if reason in _QUIET:
        return {"cause": "quiet"}
    return {"cause": "worker rejoined", "worker": worker, "reason": reason}


def _describe(cause: Doc) -> str:
    kind = cause["cause"]
    if kind == "group formed":
        return f"group formed by {', '.join(cause['workers'])}"
    if kind in ("worker joined", "worker left", "worker lost its session"):
        return f"{kind}: {cause['worker']}"
    if kind == "protocol change":
        return f"protocol change {cause['from']} -> {cause['to']}"
    if kind.startswith("connector "):
        text = f"{kind}: {cause['connector']}"
        if "tasks" in cause:
            text += f" ({cause['tasks']} tasks)"
        if "config_offset" in cause:
            text += f" at config offset {cause['config_offset']}"
        return text
    if kind == "scheduled delay expired":
        return "scheduled delay expired: lost work is reassigned"
    if kind == "follow-up round":
        return "follow-up round: revoked work is handed out"
    if kind == "group stopped":
        left = cause.get("left") or []
        lost = [w for w in cause["workers"] if w not in left]
        if len(cause["workers"]) == 1 == len(left):
            return f"group stopped: its last worker left ({left[0]})"
        text = f"group stopped: every worker left ({', '.join(left)})" if left else \
            "group stopped"
        if lost:
            text += f"; lost: {', '.join(lost)}"
        return text
    if kind == "group formed again":
        return (f"group formed again by {', '.join(cause['workers'])} after a full restart "
                f"(down {duration(int(cause['down_ms']))})")
    if kind == "worker restarted":
        return f"worker restarted: {cause['worker']} (it left and joined again)"
    if kind == "worker rejoined as new":
        return (f"worker rejoined as a new member: {cause['worker']} (its earlier session "
                "was lost: killed and restarted, or stalled past its session)")
    if kind == "worker rejoined":
        return f"{cause['worker']} rejoined ({cause['reason']})"
    return kind


# --------------------------------------------------------------------------- the document


def cluster_history(records: Iterable[Doc], departures: Iterable[Doc] = ()) -> dict[str, Any]:
    """Every generation the records tell of, oldest first, as an explain document."""
    records = [r for r in records if isinstance(r, Mapping) and "member_id" in r]
    names = _names(records)
    by_generation: dict[int, list[Doc]] = {}
    last_recorded: dict[str, int] = {}
    for r in records:
        by_generation.setdefault(int(r["generation"]), []).append(r)
        worker = str(r["worker"])
        last_recorded[worker] = max(last_recorded.get(worker, -1), int(r["generation"]))
    ledger = _Ledger(records, departures)
    rounds: list[dict[str, Any]] = []
    for generation in sorted(by_generation):
        round_ = _round(generation, by_generation[generation], names, last_recorded)
        previous = rounds[-1] if rounds else None
        gone = _gone(round_, previous, ledger) if previous else []
        if gone and len(gone) == len(previous["members"]) and any(g.note for g in gone):
            previous = _shutdown(previous, gone)  # every worker stopped: a full restart
            rounds.append(previous)
            gone = []
        _count_gone(round_, gone)
        round_["causes"] = _causes(round_, previous, gone)
        rounds.append(round_)
    if rounds and rounds[-1]["members"]:
        last = rounds[-1]
        notes = [ledger.note(w, float("inf"), int(last.get("at_ms") or 0))
                 for w in last["members"]]
        if all(notes):  # every worker has stopped since: the group is down
            rounds.append(_shutdown(last, [
                _Gone(w, n.stopped if n.stopped is not None else _work(last["assignments"].get(w)),
                      "departure note" if n.stopped is not None else "gone (leader's assignment)",
                      n, False) for w, n in zip(last["members"], notes, strict=True) if n]))
    for round_ in rounds:
        round_["trigger"] = "; ".join(_describe(c) for c in round_["causes"])
    _lost_work(rounds)
    return document(rounds)


def _lost_work(rounds: Sequence[dict[str, Any]]) -> None:
    """Each round that holds lost work back says when it is due; the round that hands it
    out says when it was lost, when it was due and when it was reassigned."""
    waiting: dict[str, tuple[int, int]] = {}  # item -> (lost at, due at)
    for round_ in rounds:
        sets = round_.get("sets") or {}
        if not sets:
            continue
        at_ms = int(round_["at_ms"])
        lost, handed = _work(sets.get("lost")), _work(sets.get("lost_reassigned"))
        items = {*lost.connectors, *map(str, lost.tasks)}
        out = {*handed.connectors, *map(str, handed.tasks)}
        held = items - out
        due = at_ms + int(round_.get("delay_ms") or 0)
        for item in held:
            lost_at = waiting.get(item, (at_ms, due))[0]
            waiting[item] = (lost_at, due)
        note: dict[str, Any] = {}
        if held and round_.get("delay_ms"):
            note.update(waiting=sorted(held), lost_at_ms=min(waiting[i][0] for i in held),
                        due_ms=due, due=_time(due))
        if out:
            was = [waiting.pop(i) for i in out if i in waiting]
            note.update(reassigned=sorted(out), reassigned_ms=at_ms, reassigned_at=_time(at_ms))
            if was:
                lost_at, was_due = min(w[0] for w in was), max(w[1] for w in was)
                note.update(reassigned_lost_at_ms=lost_at, reassigned_due_ms=was_due,
                            late_ms=at_ms - was_due)
        if note:
            round_["lost_work"] = note


def duration(ms: int) -> str:
    """17m03s, 4.2s, 1h05m: how long a gap was, for people."""
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def document(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The explain document over these rounds (after filtering too)."""
    final = rounds[-1]["assignments"] if rounds else {}
    return {
        "kind": "connect",
        "protocol": rounds[-1]["protocol"] if rounds else "",
        "scenario": None,
        "source": "cluster",
        "rounds": list(rounds),
        "final": dict(sorted(final.items())),
        "summary": _summary(rounds),
    }


def _summary(rounds: Sequence[Doc]) -> dict[str, int]:
    def total(field: str, part: str) -> int:
        return sum(len(_work(w).connectors if part == "connectors" else _work(w).tasks)
                   for r in rounds for w in r.get(field, {}).values())

    return {
        "rounds": len(rounds),
        "tasks_stopped": total("revoked", "tasks"),
        "tasks_started": total("assigned", "tasks"),
        "connectors_stopped": total("revoked", "connectors"),
        "connectors_started": total("assigned", "connectors"),
        "stable_at_ms": int(rounds[-1]["at_ms"]) - int(rounds[0]["at_ms"]) if rounds else 0,
    }


def _touches(round_: Doc, connector: str) -> bool:
    values = [*round_.get("assigned", {}).values(), *round_.get("revoked", {}).values()]
    values += [v for k, v in round_.get("sets", {}).items()
               if k in ("lost", "new", "deleted", "duplicated")]
    work = union_all(_work(v) for v in values)
    if connector in work.connectors or any(t.connector == connector for t in work.tasks):
        return True
    return any(c.get("connector") == connector for c in round_.get("causes", ()))


def filter_rounds(doc: Doc, *, last: int | None = None, connector: str | None = None,
                  since_ms: int | None = None, generation: int | None = None) -> dict[str, Any]:
    """The rounds a user asked for, as a document of its own (summary over them)."""
    rounds = list(doc.get("rounds", ()))
    if generation is not None:
        rounds = [r for r in rounds if r["generation"] == generation]
        if not rounds:
            known = [r["generation"] for r in doc.get("rounds", ())
                     if r["generation"] is not None]
            span = f" (recorded: {known[0]}..{known[-1]})" if known else " (none recorded yet)"
            raise NotFoundError(f"no record of generation {generation}{span}")
    if since_ms is not None:
        rounds = [r for r in rounds if int(r["at_ms"]) >= since_ms]
    if connector is not None:
        rounds = [r for r in rounds if _touches(r, connector)]
    if last is not None:
        rounds = rounds[-last:] if last > 0 else []
    return document(rounds)


def round_of(doc: Doc, generation: int) -> dict[str, Any]:
    return filter_rounds(doc, generation=generation)["rounds"][0]


_SINCE = re.compile(r"^(?P<n>\d+) ?(?P<unit>ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_since(text: str, now_ms: int) -> int:
    """`--since`: a duration back from now (90s, 15m, 2h, 1d), an ISO-8601 time, or epoch
    milliseconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)  # epoch milliseconds
    match = _SINCE.match(text)
    if match:
        return now_ms - int(match["n"]) * _UNIT_MS[match["unit"]]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        from kctl.errors import ConfigError

        raise ConfigError(f"--since {text!r}: expected a duration such as 90s, 15m, 2h, 1d "
                          "or an ISO-8601 time such as 2026-11-26T17:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


# --------------------------------------------------------------------------- replay


def replay(records: Iterable[Doc], generation: int) -> dict[str, Any]:
    """Run the recorded inputs of a generation through the same assignor again.

    `reproduced` is true when every member's answer (assigned, revoked, delay, error) is
    the one the leader recorded; otherwise `differences` says where, per member and field.
    """
    records = [r for r in records if isinstance(r, Mapping) and "member_id" in r]
    mine = [r for r in records if int(r["generation"]) == generation]
    if not mine:
        raise NotFoundError(f"no record of generation {generation}")
    leader = next((r for r in mine if r.get("inputs") and r["member_id"] == r.get("leader")),
                  None)
    if leader is None:
        raise NotFoundError(
            f"generation {generation} has no leader's record with the assignor's inputs (the "
            "leader died before writing it, or ran a kctl that did not record them)")
    inputs = AssignorInputs.from_json(leader["inputs"])
    names = _names(records)
    assignor = connect_assignor(inputs.protocol,
                                scheduled_rebalance_max_delay_ms=inputs.max_delay_ms)
    result = assignor.assign(
        leader=inputs.leader, leader_url=inputs.leader_url, generation=inputs.generation,
        members=inputs.members, configured=inputs.configured,
        config_offset=inputs.config_offset, now_ms=inputs.now_ms, memory=inputs.memory,
        last_completed_generation=inputs.last_completed_generation)
    differences: list[dict[str, Any]] = []
    for member in sorted(set(inputs.assignments) | set(result.assignments)):
        recorded, again = inputs.assignments.get(member), result.assignments.get(member)
        who = names.get(member, member)
        if recorded is None or again is None:
            differences.append({"member": who, "field": "member",
                                "recorded": recorded is not None, "replayed": again is not None})
            continue
        for field in ("assigned", "revoked", "delay_ms", "error"):
            a, b = getattr(recorded, field), getattr(again, field)
            if a != b:
                differences.append({
                    "member": who, "field": field,
                    "recorded": a.to_json() if isinstance(a, ConnectorsAndTasks) else a,
                    "replayed": b.to_json() if isinstance(b, ConnectorsAndTasks) else b,
                    **_delta(a, b)})
    return {
        "generation": generation,
        "protocol": inputs.protocol,
        "leader": names.get(inputs.leader, inputs.leader),
        "members": sorted(names.get(m, m) for m in inputs.members),
        "reproduced": not differences,
        "differences": differences,
        "sets": result.sets.to_json(),
        "delay_ms": result.delay_ms,
    }


def _delta(a: Any, b: Any) -> dict[str, Any]:
    if not isinstance(a, ConnectorsAndTasks):
        return {}
    return {"only_recorded": (a - b).to_json(), "only_replayed": (b - a).to_json()}
