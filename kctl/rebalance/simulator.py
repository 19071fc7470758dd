"""A deterministic rebalance simulator: the real protocol core on a fake clock.

One in-memory `Coordinator` and one `GroupMember` per worker or consumer exchange
messages through a FIFO queue; nothing takes simulated time except timers (heartbeats,
session expiry, Connect's scheduled rebalance delay), so a rebalance that needs no timer
completes at the instant it started. Two modelling choices keep the story readable:

* members hear of a rebalance at once (as if their heartbeat were due right then);
* successful periodic heartbeats happen but stay out of the trace; only heartbeats
  answered with an error are shown.

The result is the stable JSON document of `kctl rebalance explain` (docs/rebalance.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kctl.errors import KctlError, ProtocolError
from kctl.group.assignors.connect import (
    EMPTY,
    ConnectorsAndTasks,
)
from kctl.group.connect_coordinator import ConnectHandler
from kctl.group.consumer_coordinator import ConsumerHandler
from kctl.group.coordinator import Coordinator, GroupState
from kctl.group.history import GenerationRecord, GenerationRecorder
from kctl.group.messages import (
    CoordinatorReply,
    ErrorCode,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    LeaveGroup,
    LeaveGroupResponse,
    SyncGroup,
    SyncGroupResponse,
)
from kctl.group.protocol import (
    GroupMember,
    HeartbeatDue,
    Leave,
    MemberFailed,
    MemberState,
    RequestRejoin,
    Send,
    Start,
    StartWork,
    StopWork,
)
from kctl.rebalance.scenario import Event, Scenario
from kctl.transport.assignor_plugins import assignment_strategy

__all__ = [
    "SimulationResult",
    "Simulator",
    "simulate",
]

COORDINATOR = "coordinator"
# A bound on message deliveries at one instant: a livelock is a bug, not a long story.
MAX_STEPS_PER_INSTANT = 1_000_000


# ----------------------------------------------------------------------------- world


@dataclass
class World:
    """What every member can read: the config topic (connect) or cluster metadata (consumer)."""

    connectors: dict[str, int] = field(default_factory=dict)
    config_offset: int = 0
    topics: dict[str, int] = field(default_factory=dict)


# ----------------------------------------------------------------------------- result


def _work_json(work: Any) -> Any:
    if isinstance(work, ConnectorsAndTasks):
        return work.to_json()
    return [str(tp) for tp in sorted(work)]


@dataclass(frozen=True)
class Round:
    """The group's view of one generation: what its coordinator saw (the trigger it folded,
    when it became Stable), every member's assignment, and the work moved. Each member's
    own record of the generation is a GenerationRecord (`SimulationResult.records`), the
    one a distributed worker writes."""

    generation: int
    at_ms: int
    trigger: str
    leader: str
    protocol: str
    members: tuple[str, ...]
    assignments: Mapping[str, Any]
    assigned: Mapping[str, Any]
    revoked: Mapping[str, Any]
    delay_ms: int
    sets: Mapping[str, Any]
    trace: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "at_ms": self.at_ms,
            "trigger": self.trigger,
            "leader": self.leader,
            "members": list(self.members),
            "assignments": {m: _work_json(self.assignments[m]) for m in self.members},
            "assigned": {m: _work_json(self.assigned[m]) for m in sorted(self.assigned)},
            "revoked": {m: _work_json(self.revoked[m]) for m in sorted(self.revoked)},
            "delay_ms": self.delay_ms,
            "sets": dict(self.sets),
            "protocol": self.protocol,
            "trace": [dict(t) for t in self.trace],
        }


def _size(work: Any, part: str) -> int:
    if isinstance(work, ConnectorsAndTasks):
        return len(work.connectors) if part == "connectors" else len(work.tasks)
    return len(work) if part == "partitions" else 0


@dataclass(frozen=True)
class SimulationResult:
    kind: str
    protocol: str
    scenario: str | None
    session_timeout_ms: int
    rounds: tuple[Round, ...]
    final: Mapping[str, Any]
    end_ms: int
    # every member's record of every generation it completed, in completion order: the
    # same GenerationRecords the group drivers hand a worker (at_ms is simulated time)
    records: tuple[GenerationRecord, ...] = ()

    def summary(self) -> dict[str, int]:
        """The contract's keys for both kinds. A consumer's unit of work is a partition, so
        its tasks_* count partitions (what a sink task stops and starts) and its
        connectors_* are 0; partitions_* say the same under their own name."""
        if self.kind == "connect":
            measures = {"tasks": "tasks", "connectors": "connectors"}
        else:
            measures = {"tasks": "partitions", "connectors": "none"}
        summary: dict[str, int] = {"rounds": len(self.rounds)}
        for key, part in measures.items():
            summary[f"{key}_stopped"] = self._total(part, "revoked")
            summary[f"{key}_started"] = self._total(part, "assigned")
        if self.kind != "connect":
            summary["partitions_stopped"] = summary["tasks_stopped"]
            summary["partitions_started"] = summary["tasks_started"]
        summary["stable_at_ms"] = self.rounds[-1].at_ms if self.rounds else 0
        return summary

    def _total(self, part: str, field: str) -> int:
        return sum(_size(w, part) for r in self.rounds for w in getattr(r, field).values())

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "protocol": self.protocol,
            "scenario": self.scenario,
            "session_timeout_ms": self.session_timeout_ms,
            "rounds": [r.to_json() for r in self.rounds],
            "final": {m: _work_json(self.final[m]) for m in sorted(self.final)},
            "summary": self.summary(),
        }


# ----------------------------------------------------------------------------- simulator


@dataclass(frozen=True)
class _Stable:
    """The coordinator's view of a generation at the moment it became Stable."""

    generation: int
    member_ids: tuple[str, ...]
    leader: str
    protocol: str
    trigger: str
    at_ms: int


@dataclass(eq=False)
class _Node:
    """One simulated process: a member, whether it still runs, and whether it is paused
    (until `paused_until`, holding what arrives meanwhile in `held`)."""

    name: str
    member: GroupMember[Any]
    alive: bool = True
    paused_until: int | None = None
    held: deque[Any] = field(default_factory=deque)
    recorder: GenerationRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.recorder = GenerationRecorder(self.member)


def _describe(message: Any, name_of: Callable[[str], str]) -> str:
    """The trace's one-line detail of a message, with member ids shown as names."""
    match message:
        case JoinGroup():
            return message.reason if message.reason not in ("", "join") else ""
        case JoinGroupResponse(error=ErrorCode.NONE):
            role = ", you lead" if message.members else ""
            leader = name_of(message.leader)
            return f"generation {message.generation}, protocol {message.protocol}, leader {leader}{role}"
        case JoinGroupResponse():
            return message.error.name
        case SyncGroup():
            if message.assignments is None:
                return f"generation {message.generation}"
            return f"generation {message.generation}, assignments for {len(message.assignments)}"
        case SyncGroupResponse(error=ErrorCode.NONE):
            return f"generation {message.generation}"
        case SyncGroupResponse() | HeartbeatResponse():
            return message.error.name
        case Heartbeat():
            return f"generation {message.generation}"
        case LeaveGroup():
            return message.reason
    return ""


class Simulator:
    """Drives one scenario; `run()` returns the SimulationResult."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.now = 0
        self.world = World(connectors=dict(scenario.connectors), topics=dict(scenario.topics))
        self.coordinator = Coordinator(f"{scenario.kind}-group")
        self.nodes: dict[str, _Node] = {}  # live processes by name
        self.by_id: dict[str, _Node] = {}
        self.queue: deque[tuple[_Node | None, _Node | None, Any]] = deque()
        self.trace: list[dict[str, Any]] = []
        self.rounds: list[Round] = []
        self.records: list[GenerationRecord] = []
        # Work stopped and started since the last round closed, by process: a process that
        # left or crashed keeps its entry until a round shows it as a "(gone)" row.
        self.stopped: dict[_Node, Any] = {}
        self.started: dict[_Node, Any] = {}
        self.recorded_generation = 0
        self.observers: list[Callable[[Round, Simulator], None]] = []
        self._stable: _Stable | None = None

    # -- building members

    def _handler(self, name: str, topics: Sequence[str] = ()) -> Any:
        s = self.scenario
        if s.kind == "connect":
            return ConnectHandler(name, self.world, s.protocol, s.scheduled_rebalance_max_delay_ms)
        world = self.world
        return ConsumerHandler(
            name, topics, assignment_strategy(s.protocol), cluster=lambda: world.topics
        )

    def _spawn(self, name: str, topics: Sequence[str] = ()) -> _Node:
        member = GroupMember(
            client_id=name,
            handler=self._handler(name, topics),
            session_timeout_ms=self.scenario.session_timeout_ms,
            rebalance_timeout_ms=60_000 if self.scenario.kind == "connect" else 300_000,
        )
        node = _Node(name, member)
        self.nodes[name] = node
        return node

    # -- message plumbing

    def _name_of(self, member_id: str) -> str:
        node = self.by_id.get(member_id)
        return node.name if node else member_id

    def _record(self, sender: str, receiver: str, message: Any) -> None:
        self.trace.append(
            {
                "at_ms": self.now,
                "from": sender,
                "to": receiver,
                "message": type(message).__name__,
                "detail": _describe(message, self._name_of),
            }
        )

    def _member_event(self, node: _Node, event: Any) -> None:
        if not node.alive:
            return
        if node.paused_until is not None:
            node.held.append(event)  # read once the process runs again
            return
        if isinstance(event, JoinGroupResponse):
            node.recorder.joined(tuple(m.member_id for m in event.members))
        completed = node.member.last_completed_generation
        actions = node.member.handle(event, self.now)
        self._act(node, actions)
        if node.member.last_completed_generation != completed:
            assignment = event.assignment if isinstance(event, SyncGroupResponse) else None
            self.records.append(node.recorder.completed(assignment, self.now))

    def _act(self, node: _Node, actions: Iterable[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                node.recorder.sent(action.request)
                self.queue.append((node, None, action.request))
            elif isinstance(action, StopWork):
                node.recorder.stopped(action.work)
                self._add_work(self.stopped, node, action.work)
            elif isinstance(action, StartWork):
                node.recorder.started(action.work)
                self._add_work(self.started, node, action.work)
            elif isinstance(action, MemberFailed):
                raise ProtocolError(
                    f"member {node.name} failed: {action.error.name} {action.detail}"
                )
        if node.member.member_id and node.alive:
            self.by_id[node.member.member_id] = node

    @staticmethod
    def _add_work(book: dict[_Node, Any], node: _Node, work: Any) -> None:
        prior = book.get(node)
        book[node] = work if prior is None else prior | work

    def _deliver_request(self, node: _Node, request: Any) -> None:
        c = self.coordinator
        replies = c.handle(request, self.now)
        if c.state is GroupState.STABLE and (
            self._stable is None or self._stable.generation < c.generation
        ):
            self._stable = _Stable(
                c.generation,
                tuple(c.members),
                c.leader or "",
                c.protocol or "",
                c.trigger,
                self.now,
            )
        quiet = isinstance(request, Heartbeat) and all(
            r.response.error is ErrorCode.NONE for r in replies
        )
        if not quiet:
            self._record(node.name, COORDINATOR, request)
        self._route(replies, node, quiet=quiet)

    def _route(
        self, replies: Sequence[CoordinatorReply], sender: _Node | None, *, quiet: bool = False
    ) -> None:
        for reply in replies:
            target = sender if reply.to == "" else self.by_id.get(reply.to)
            if target is None:
                continue
            if not quiet and not isinstance(reply.response, LeaveGroupResponse):
                self._record(COORDINATOR, target.name, reply.response)
            self.queue.append((None, target, reply.response))

    def _drain(self) -> None:
        steps = 0
        while self.queue:
            steps += 1
            if steps > MAX_STEPS_PER_INSTANT:
                raise ProtocolError(f"the group does not settle at {self.now} ms (livelock)")
            sender, target, message = self.queue.popleft()
            if target is None:
                assert sender is not None
                if sender.alive:
                    self._deliver_request(sender, message)
            elif target.alive:
                self._member_event(target, message)
            self._maybe_close_round()
        self._maybe_close_round()

    def _maybe_close_round(self) -> None:
        """A round ends once its generation reached Stable and every member has applied
        the SyncGroup answer queued for it."""
        snap = self._stable
        if snap is None or snap.generation <= self.recorded_generation:
            return
        pending = any(
            isinstance(m, SyncGroupResponse) and m.generation == snap.generation
            for _, _, m in self.queue
        )
        if not pending:
            self._close_round(snap)

    def _close_round(self, snap: _Stable) -> None:
        generation = snap.generation
        self.recorded_generation = generation
        members = [self.by_id[mid] for mid in snap.member_ids if mid in self.by_id]
        names = sorted(n.name for n in members)
        leader_node = self.by_id.get(snap.leader)
        leader = leader_node.name if leader_node else snap.leader
        handler = leader_node.member.handler if leader_node else None
        sets, delay = ({}, 0)
        if handler is not None:
            sets, delay = handler.reports.get(generation, ({}, 0))
        empty = members[0].member.handler.empty() if members else EMPTY
        by_name = {n.name: n for n in members}
        assigned = {n: self.started.pop(by_name[n], empty) for n in names}
        revoked = {n: self.stopped.pop(by_name[n], empty) for n in names}
        # What processes that left or crashed since the last round stopped: a "(gone)" row.
        # Live processes outside this generation (rejoining) keep theirs for the next round.
        for book, shown in ((self.started, assigned), (self.stopped, revoked)):
            for node in [n for n in book if not self._running(n)]:
                key = node.name if node.name not in by_name else f"{node.name} (gone)"
                shown[key] = book.pop(node)
        rnd = Round(
            generation=generation,
            at_ms=snap.at_ms,
            trigger=snap.trigger,
            leader=leader,
            protocol=snap.protocol,
            members=tuple(names),
            assignments={n: by_name[n].member.owned for n in names},
            assigned=assigned,
            revoked=revoked,
            delay_ms=delay,
            sets=sets,
            trace=tuple(self.trace),
        )
        self.rounds.append(rnd)
        self.trace = []
        for observer in self.observers:
            observer(rnd, self)

    # -- time

    def _instant(self) -> None:
        """Run everything that happens at `now` until nothing more does."""
        for _ in range(MAX_STEPS_PER_INSTANT):
            self._resume_due()
            self._drain()
            c = self.coordinator
            if c.state is GroupState.PREPARING_REBALANCE:
                prompted = [
                    n
                    for n in self._awake()
                    if n.member.state is MemberState.STABLE and n.member.member_id in c.members
                ]
                if prompted:
                    for node in prompted:
                        self._member_event(node, HeartbeatDue())
                    continue
            before = (c.state, c.generation, len(c.members))
            replies = c.poll(self.now)
            if replies or before != (c.state, c.generation, len(c.members)):
                self._route(replies, None)
                continue
            acted = False
            for node in self._awake():
                actions = node.member.poll(self.now)
                if actions:
                    self._act(node, actions)
                    acted = True
            if not acted and not self.queue:
                return
        raise ProtocolError(f"the group does not settle at {self.now} ms (livelock)")

    def _running(self, node: _Node) -> bool:
        """Still a process of the scenario (not left, not crashed)."""
        return node.alive and self.nodes.get(node.name) is node

    def _live(self) -> list[_Node]:
        return [self.nodes[n] for n in sorted(self.nodes)]

    def _awake(self) -> list[_Node]:
        """Live processes that are not paused: only they act and keep timers."""
        return [n for n in self._live() if n.paused_until is None]

    def _resume_due(self) -> None:
        """A paused process runs again: it reads what arrived, then its overdue timers fire
        (a heartbeat that may learn the group went on without it)."""
        for node in self._live():
            if node.paused_until is not None and node.paused_until <= self.now:
                node.paused_until = None
                while node.held:
                    self._member_event(node, node.held.popleft())

    def _next_deadline(self) -> int | None:
        deadlines = [self.coordinator.next_deadline()]
        deadlines += [n.member.next_deadline() for n in self._awake()]
        deadlines += [n.paused_until for n in self._live()]
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def advance_to(self, t: int) -> None:
        """Let time pass to `t`, firing every timer on the way."""
        self._instant()
        while True:
            d = self._next_deadline()
            if d is None or d > t:
                break
            if d <= self.now:
                raise ProtocolError(f"a timer due at {d} ms does nothing at {self.now} ms")
            self.now = d
            self._instant()
        self.now = max(self.now, t)
        self._instant()

    def settled(self) -> bool:
        c = self.coordinator
        if c.state not in (GroupState.STABLE, GroupState.EMPTY):
            return False
        return all(
            n.member.state is MemberState.STABLE and n.paused_until is None for n in self._live()
        )

    def settle(self) -> None:
        """Run rounds (and the timers they wait for) until the group is stable."""
        self._instant()
        while not self.settled():
            d = self._next_deadline()
            if d is None:
                raise ProtocolError("the group cannot settle: nothing left to wait for")
            if d > self.now:
                self.now = d
            self._instant()

    # -- events

    def start(self) -> None:
        s = self.scenario
        if s.kind == "connect":
            for name in s.workers:
                self._member_event(self._spawn(name), Start())
        else:
            for name, topics in s.members.items():
                self._member_event(self._spawn(name, topics), Start())
        self.settle()

    def apply(self, event: Event) -> None:
        if event.at_ms is not None and event.at_ms > self.now:
            self.advance_to(event.at_ms)
        action, value = event.action, event.value
        if action == "join":
            items = value.items() if isinstance(value, Mapping) else ((n, ()) for n in value)
            for name, topics in items:
                self._member_event(self._spawn(name, topics), Start())
        elif action == "leave":
            node = self.nodes.pop(value)
            self._member_event(node, Leave())
            self._instant()
            node.alive = False
        elif action == "crash":
            node = self.nodes.pop(value)
            # Its work dies with it; the next round shows that as a "(gone)" row.
            if not node.member.handler.is_empty(node.member.owned):
                self._add_work(self.stopped, node, node.member.owned)
            # Its last heartbeat went out just before the crash: the session runs from now.
            if node.member.state is MemberState.STABLE:
                request = Heartbeat(node.member.member_id, node.member.generation)
                self.coordinator.handle(request, self.now)
            node.alive = False
        elif action == "pause":
            for name, ms in value.items():
                self.nodes[name].paused_until = self.now + ms
        elif action == "advance_ms":
            self.advance_to(self.now + value)
        elif action in ("connector_add", "tasks_change"):
            self.world.connectors.update(value)
            self._config_changed(event)
        elif action == "connector_remove":
            self.world.connectors.pop(value, None)
            self._config_changed(event)
        elif action in ("topic_add", "partitions_change"):
            self.world.topics.update(value)
            watched = any(t in value for n in self._live() for t in n.member.handler.topics)
            if watched:
                self._rejoin_leader(event.describe())
        else:  # pragma: no cover - the scenario parser refuses others
            raise KctlError(f"unknown event {action}")
        self.settle()

    def _config_changed(self, event: Event) -> None:
        self.world.config_offset += 1
        self._rejoin_leader(event.describe())

    def _rejoin_leader(self, reason: str) -> None:
        """The leader notices config or metadata changes and asks for a rebalance (the
        first live member does when the leader is down)."""
        live = self._live()
        if not live:
            return
        leader = self.by_id.get(self.coordinator.leader or "")
        if leader is None or not leader.alive:
            in_group = [self.by_id[m] for m in self.coordinator.members if m in self.by_id]
            candidates = [n for n in in_group if n.alive] or live
            leader = candidates[0]
        if leader.member.state is MemberState.UNJOINED:
            return
        self._member_event(leader, RequestRejoin(reason))

    def run(self) -> SimulationResult:
        self.start()
        for event in self.scenario.events:
            self.apply(event)
        return self.result()

    def result(self) -> SimulationResult:
        return SimulationResult(
            kind=self.scenario.kind,
            protocol=self.scenario.protocol,
            scenario=self.scenario.name,
            session_timeout_ms=self.scenario.session_timeout_ms,
            rounds=tuple(self.rounds),
            final={n.name: n.member.owned for n in self._live()},
            end_ms=self.now,
            records=tuple(self.records),
        )


def simulate(
    scenario: Scenario, *, observer: Callable[[Round, Simulator], None] | None = None
) -> SimulationResult:
    """Run a scenario from start to end. `observer` sees every round as it closes
    (tests use it to check invariants after each round)."""
    sim = Simulator(scenario)
    if observer is not None:
        sim.observers.append(observer)
    return sim.run()
