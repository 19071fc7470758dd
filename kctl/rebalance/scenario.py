"""Rebalance scenarios: the YAML contract of `kctl rebalance explain`, parsed and checked.

A scenario is validated completely before anything runs, so a typo in event 7 is
reported as "events[7]" instead of surfacing as an odd simulation. The contract is
documented in docs/rebalance.md; every error names the key (and event position) at fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kctl.errors import ConfigError, PluginError

__all__ = [
    "CONNECT_EVENTS",
    "CONNECT_PROTOCOLS",
    "CONSUMER_EVENTS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "Event",
    "Scenario",
    "load_scenario",
]

DEFAULT_SESSION_TIMEOUT_MS = 10_000
DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS = 300_000
CONNECT_PROTOCOLS = ("eager", "default", "compatible", "sessioned")
COMMON_EVENTS = ("join", "leave", "crash", "pause", "advance_ms")
CONNECT_EVENTS = (*COMMON_EVENTS, "connector_add", "connector_remove", "tasks_change")
CONSUMER_EVENTS = (*COMMON_EVENTS, "topic_add", "partitions_change")
TOP_KEYS = {
    "connect": {
        "kind",
        "name",
        "description",
        "protocol",
        "scheduled_rebalance_max_delay_ms",
        "session_timeout_ms",
        "workers",
        "connectors",
        "events",
    },
    "consumer": {
        "kind",
        "name",
        "description",
        "protocol",
        "session_timeout_ms",
        "topics",
        "members",
        "events",
    },
}


@dataclass(frozen=True)
class Event:
    """One scenario event.

    `value` is a member name (leave, crash), a tuple of names (connect join), a mapping
    (consumer join: member -> topics; pause: member -> ms; connector_add, tasks_change,
    topic_add, partitions_change), a connector name (connector_remove) or milliseconds
    (advance_ms).
    """

    action: str
    value: Any
    at_ms: int | None = None
    position: int = 0

    def describe(self) -> str:
        """How the event reads in a round's trigger ("join w3", "connector_add ct3")."""
        v = self.value
        if self.action == "join":
            names = list(v) if not isinstance(v, str) else [v]
            return f"join {', '.join(names)}"
        if isinstance(v, Mapping):
            body = ", ".join(f"{k}: {_short(x)}" for k, x in v.items())
            return f"{self.action} {body}"
        return f"{self.action} {v}"


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


@dataclass(frozen=True)
class Scenario:
    kind: str
    protocol: str
    name: str | None = None
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    scheduled_rebalance_max_delay_ms: int = DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS
    workers: tuple[str, ...] = ()  # connect
    connectors: Mapping[str, int] = field(default_factory=dict)  # connect
    topics: Mapping[str, int] = field(default_factory=dict)  # consumer
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # consumer
    events: tuple[Event, ...] = ()

    @property
    def initial_members(self) -> tuple[str, ...]:
        return self.workers if self.kind == "connect" else tuple(self.members)

    def with_protocol(self, protocol: str) -> Scenario:
        return Scenario.from_dict({**self.to_dict(), "protocol": protocol})

    def to_dict(self) -> dict[str, Any]:
        """The scenario document again (what load_scenario accepts)."""
        doc: dict[str, Any] = {"kind": self.kind, "protocol": self.protocol}
        if self.name:
            doc["name"] = self.name
        doc["session_timeout_ms"] = self.session_timeout_ms
        if self.kind == "connect":
            doc["scheduled_rebalance_max_delay_ms"] = self.scheduled_rebalance_max_delay_ms
            doc["workers"] = list(self.workers)
            doc["connectors"] = dict(self.connectors)
        else:
            doc["topics"] = dict(self.topics)
            doc["members"] = {m: list(t) for m, t in self.members.items()}
        events = []
        for e in self.events:
            item: dict[str, Any] = {}
            if e.at_ms is not None:
                item["at_ms"] = e.at_ms
            value = e.value
            if e.action == "join" and self.kind == "connect":
                value = value[0] if len(value) == 1 else list(value)
            elif e.action == "join":
                value = {m: list(t) for m, t in value.items()}
            elif isinstance(value, Mapping):
                value = dict(value)
            item[e.action] = value
            events.append(item)
        doc["events"] = events
        return doc

    @classmethod
    def from_dict(cls, doc: Any, *, source: str | None = None) -> Scenario:
        return _Parser(source).scenario(doc)

    @classmethod
    def from_flags(
        cls,
        kind: str = "connect",
        protocol: str | None = None,
        workers: int | Sequence[str] = 3,
        connectors: int = 2,
        tasks: int = 4,
        join: Sequence[str] = (),
        leave: Sequence[str] = (),
        crash: Sequence[str] = (),
        *,
        topics: int = 2,
        partitions: int = 3,
        advance_ms: int | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        scheduled_rebalance_max_delay_ms: int = DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ) -> Scenario:
        """The common cases without a file: N workers (w1..wN) or consumers (C0..), M
        connectors ct1..ctM of `tasks` tasks (or topics T0.. of `partitions`), then
        joins, leaves and crashes in that order; a crash is followed by enough time for
        the session to expire and the scheduled delay to pass."""
        if kind not in ("connect", "consumer"):
            raise ConfigError(f"kind must be connect or consumer, not {kind!r}", key="kind")
        if isinstance(workers, int):
            first, prefix = (1, "w") if kind == "connect" else (0, "C")
            names = [f"{prefix}{i}" for i in range(first, first + workers)]
        else:
            names = list(workers)
        doc: dict[str, Any] = {
            "kind": kind,
            "protocol": protocol or ("sessioned" if kind == "connect" else "range"),
            "session_timeout_ms": session_timeout_ms,
        }
        events: list[dict[str, Any]] = []
        if kind == "connect":
            doc["scheduled_rebalance_max_delay_ms"] = scheduled_rebalance_max_delay_ms
            doc["workers"] = names
            doc["connectors"] = {f"ct{i}": tasks for i in range(1, connectors + 1)}
            events += [{"join": n} for n in join]
        else:
            topic_names = [f"T{i}" for i in range(topics)]
            doc["topics"] = dict.fromkeys(topic_names, partitions)
            doc["members"] = {n: list(topic_names) for n in names}
            events += [{"join": {n: list(topic_names)}} for n in join]
        events += [{"leave": n} for n in leave]
        events += [{"crash": n} for n in crash]
        if advance_ms is None and crash:
            advance_ms = session_timeout_ms + (
                scheduled_rebalance_max_delay_ms if kind == "connect" else 0
            )
        if advance_ms:
            events.append({"advance_ms": advance_ms})
        doc["events"] = events
        return cls.from_dict(doc, source="flags")


def load_scenario(path_or_text: str | Path) -> Scenario:
    """A scenario from a YAML file path or from YAML text.

    Raises ConfigError for unreadable files, bad YAML and every contract violation.
    """
    source: str | None = None
    text: str
    if isinstance(path_or_text, Path) or (
        "\n" not in path_or_text and path_or_text.endswith((".yaml", ".yml"))
    ):
        path = Path(path_or_text)
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read scenario {path}: {exc.strerror or exc}", source=source
            ) from exc
    else:
        text = str(path_or_text)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario is not valid YAML: {exc}", source=source) from exc
    scenario = Scenario.from_dict(doc, source=source)
    if scenario.name is None and source is not None:
        scenario = Scenario.from_dict(
            {**scenario.to_dict(), "name": Path(source).stem}, source=source
        )
    return scenario


class _Parser:
    def __init__(self, source: str | None):
        self.source = source

    def fail(self, message: str, key: str) -> ConfigError:
        where = f"{self.source}: " if self.source else ""
        return ConfigError(f"{where}{key}: {message}", key=key, source=self.source)

    def int_(self, value: Any, key: str, *, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"expected an integer, got {value!r}", key)
        if value < minimum:
            raise self.fail(f"must be >= {minimum}, got {value}", key)
        return value

    def name(self, value: Any, key: str) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
            raise self.fail(f"expected a name, got {value!r}", key)
        return str(value)

    def names(self, value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(f"expected a list of names, got {value!r}", key)
        names = tuple(self.name(v, f"{key}[{i}]") for i, v in enumerate(value))
        if len(set(names)) != len(names):
            raise self.fail("names must be unique", key)
        return names

    def counts(self, value: Any, key: str, *, minimum: int = 0) -> dict[str, int]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"expected a mapping of name -> count, got {value!r}", key)
        return {
            self.name(k, key): self.int_(v, f"{key}.{k}", minimum=minimum) for k, v in value.items()
        }

    def subscriptions(self, value: Any, key: str) -> dict[str, tuple[str, ...]]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"expected a mapping of member -> topics, got {value!r}", key)
        result = {}
        for member, topics in value.items():
            topics_key = f"{key}.{member}"
            result[self.name(member, key)] = self.names(topics, topics_key)
        return result

    def scenario(self, doc: Any) -> Scenario:
        if not isinstance(doc, Mapping):
            raise self.fail("a scenario is a YAML mapping (kind, protocol, ...)", "scenario")
        kind = doc.get("kind", "connect")
        if kind not in TOP_KEYS:
            raise self.fail(f"must be connect or consumer, not {kind!r}", "kind")
        unknown = sorted(set(map(str, doc)) - TOP_KEYS[kind])
        if unknown:
            raise self.fail(
                f"unknown key for kind {kind} (allowed: {', '.join(sorted(TOP_KEYS[kind]))})",
                unknown[0],
            )
        protocol = self.protocol(kind, doc.get("protocol"))
        name = doc.get("name")
        session = self.int_(
            doc.get("session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS),
            "session_timeout_ms",
            minimum=1,
        )
        common: dict[str, Any] = {
            "kind": kind,
            "protocol": protocol,
            "name": None if name is None else str(name),
            "session_timeout_ms": session,
        }
        if kind == "connect":
            workers = self.names(doc.get("workers"), "workers")
            connectors = self.counts(doc.get("connectors"), "connectors")
            delay = self.int_(
                doc.get(
                    "scheduled_rebalance_max_delay_ms", DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS
                ),
                "scheduled_rebalance_max_delay_ms",
            )
            events = self.events(kind, doc.get("events"), set(workers), set(connectors), set())
            return Scenario(
                **common,
                scheduled_rebalance_max_delay_ms=delay,
                workers=workers,
                connectors=connectors,
                events=events,
            )
        topics = self.counts(doc.get("topics"), "topics")
        members = self.subscriptions(doc.get("members"), "members")
        events = self.events(kind, doc.get("events"), set(members), set(), set(topics))
        return Scenario(**common, topics=topics, members=members, events=events)

    def protocol(self, kind: str, value: Any) -> str:
        if value is None:
            return "sessioned" if kind == "connect" else "range"
        if not isinstance(value, str):
            raise self.fail(f"expected a protocol name, got {value!r}", "protocol")
        if kind == "connect":
            if value not in CONNECT_PROTOCOLS:
                raise self.fail(
                    f"unknown connect protocol {value!r} (known: eager, compatible, sessioned)",
                    "protocol",
                )
            return value
        from kctl.transport.assignor_plugins import consumer_assignor

        try:
            consumer_assignor(value)
        except PluginError as exc:
            raise self.fail(str(exc), "protocol") from exc
        return value

    def events(
        self,
        kind: str,
        value: Any,
        live: set[str],
        connectors: set[str],
        topics: set[str],
    ) -> tuple[Event, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail("expected a list of events", "events")
        allowed = CONNECT_EVENTS if kind == "connect" else CONSUMER_EVENTS
        events: list[Event] = []
        last_at = 0
        for i, raw in enumerate(value):
            key = f"events[{i}]"
            if not isinstance(raw, Mapping):
                raise self.fail(f"an event is a mapping like {{join: w3}}, got {raw!r}", key)
            at_ms = None
            if "at_ms" in raw:
                at_ms = self.int_(raw["at_ms"], f"{key}.at_ms")
                if at_ms < last_at:
                    raise self.fail(
                        f"at_ms {at_ms} is earlier than a previous event ({last_at})",
                        f"{key}.at_ms",
                    )
                last_at = at_ms
            actions = [k for k in raw if k != "at_ms"]
            if len(actions) != 1:
                raise self.fail(
                    f"needs exactly one action ({', '.join(allowed)}), got {actions or 'none'}", key
                )
            action = str(actions[0])
            if action not in allowed:
                raise self.fail(
                    f"unknown event {action!r} for kind {kind} (known: {', '.join(allowed)})", key
                )
            event = Event(
                action,
                self.event_value(
                    kind, action, raw[action], f"{key}.{action}", live, connectors, topics
                ),
                at_ms,
                i,
            )
            events.append(event)
        return tuple(events)

    def event_value(
        self,
        kind: str,
        action: str,
        value: Any,
        key: str,
        live: set[str],
        connectors: set[str],
        topics: set[str],
    ) -> Any:
        if action == "join":
            if kind == "connect":
                names = (
                    self.names(value, key) if isinstance(value, list) else (self.name(value, key),)
                )
                joined: Any = names
            else:
                subs = self.subscriptions(value, key)
                if not subs:
                    raise self.fail("names no member to join", key)
                names = tuple(subs)
                joined = subs
            for n in names:
                if n in live:
                    raise self.fail(f"{n!r} is already a member", key)
                live.add(n)
            return joined
        if action in ("leave", "crash"):
            n = self.name(value, key)
            if n not in live:
                raise self.fail(f"{n!r} is not a member at this point", key)
            live.discard(n)
            return n
        if action == "pause":
            paused = self.counts(value, key, minimum=1)
            if not paused:
                raise self.fail("names no member to pause (expected {member: ms})", key)
            for n in paused:
                if n not in live:
                    raise self.fail(f"{n!r} is not a member at this point", key)
            return paused
        if action == "advance_ms":
            return self.int_(value, key)
        if action == "connector_add":
            added = self.counts(value, key)
            for c in added:
                if c in connectors:
                    raise self.fail(f"connector {c!r} already exists", key)
            connectors |= set(added)
            return added
        if action == "connector_remove":
            c = self.name(value, key)
            if c not in connectors:
                raise self.fail(f"no connector {c!r} to remove", key)
            connectors.discard(c)
            return c
        if action == "tasks_change":
            changed = self.counts(value, key)
            for c in changed:
                if c not in connectors:
                    raise self.fail(f"no connector {c!r}", key)
            return changed
        if action == "topic_add":
            added = self.counts(value, key, minimum=1)
            for t in added:
                if t in topics:
                    raise self.fail(f"topic {t!r} already exists", key)
            topics |= set(added)
            return added
        if action == "partitions_change":
            changed = self.counts(value, key, minimum=1)
            for t in changed:
                if t not in topics:
                    raise self.fail(f"no topic {t!r}", key)
            return changed
        raise self.fail(f"unknown event {action!r}", key)  # pragma: no cover - checked above
