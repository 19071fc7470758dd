"""Consumer groups in process: kctl's group protocol, driven by the embedded log.

Each group is one `kctl.group.coordinator.Coordinator` and each consumer one `GroupMember`
with its `ConsumerHandler`: the state machines and assignors the simulator behind
`kctl rebalance explain` drives. The embedded log supplies what the simulator fakes:
the clock (`now_ms`) and delivery. Delivery is synchronous under the groups' lock, so a
join, a leave or a subscription change has run its whole rebalance (both rounds of a
cooperative one) when the call returns, as a simulated event has.

Liveness: Kafka's consumer heartbeats from a background thread and is dropped when it
stops polling for `max.poll.interval.ms`. Here a consumer's poll is its heartbeat (sent
when due), and a member whose consumer polled within `session.timeout.ms` counts as
running: it is told of a rebalance at once, as its next heartbeat would tell it. A consumer
that stops polling for longer (a stalled sink task) is expired by the coordinator's session
timer; when it polls again it learns its membership is gone, gives up what it held and
rejoins.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kctl.api.records import TopicPartition
from kctl.errors import TransportError
from kctl.group.assignors.consumer import ConsumerPartitionAssignor
from kctl.group.consumer_coordinator import (
    ASSIGNMENT_STRATEGY_CONFIG,
    ConsumerHandler,
    Partitions,
)
from kctl.group.coordinator import Coordinator, GroupState
from kctl.group.messages import SyncGroupResponse
from kctl.group.protocol import (
    GroupMember,
    HeartbeatDue,
    Leave,
    MemberFailed,
    MemberState,
    RequestRejoin,
    Send,
    Start,
    StopWork,
)

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 45_000  # the consumer's session.timeout.ms
REBALANCE_TIMEOUT_MS = 300_000  # the consumer's max.poll.interval.ms
# A cooperative assignor needs two rounds to move a partition; more than this within one
# call is a custom assignor that keeps revoking, and the call stops rather than spin.
MAX_ROUNDS_PER_CALL = 16
HISTORY_LENGTH = 100  # completed generations kept per group
# Messages delivered in one call: far above any real rebalance, a guard against livelock.
MAX_DELIVERIES_PER_CALL = 100_000


class _Member:
    """One consumer: its protocol half, when its consumer last polled, and the epoch of
    the last rebalance that made it give up everything (eager, lost, left)."""

    def __init__(self, handle: str, member: GroupMember[Partitions], now_ms: int):
        self.handle = handle  # what the consumer calls itself; the member id may change
        self.member = member
        self.handler: ConsumerHandler = member.handler  # type: ignore[assignment]
        self.last_poll_ms = now_ms
        self.revoke_all_epoch = 0
        self.seen_epoch = 0
        self.failed: MemberFailed | None = None

    def running(self, now_ms: int) -> bool:
        return now_ms - self.last_poll_ms < self.member.session_timeout_ms

    def target(self) -> set[TopicPartition]:
        return set(self.member.owned)


@dataclass(frozen=True)
class GenerationRound:
    """One completed generation as the group saw it (the shape of an explain round)."""

    generation: int
    at_ms: int
    trigger: str
    protocol: str
    leader: str
    members: tuple[str, ...]
    assignments: dict[str, list[str]]

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "at_ms": self.at_ms, "trigger": self.trigger,
                "protocol": self.protocol, "leader": self.leader, "members": list(self.members),
                "assignments": {m: list(ps) for m, ps in self.assignments.items()}}


class _Group:
    """One group's coordinator and members; guarded by the groups' lock."""

    def __init__(self, group_id: str):
        self.id = group_id
        self.coordinator = Coordinator(group_id)
        self.members: dict[str, _Member] = {}  # by handle, in join order
        self.watched: dict[str, int] = {}  # subscribed topics' partitions at the last round
        self.owners: dict[TopicPartition, str] = {}  # handle holding a partition (not revoked)
        self.history: deque[GenerationRound] = deque(maxlen=HISTORY_LENGTH)
        self.recorded = 0  # the last generation put in the history

    def by_member_id(self, member_id: str) -> _Member | None:
        return next((m for m in self.members.values() if m.member.member_id == member_id), None)

    def in_group(self, handle: str) -> bool:
        m = self.members.get(handle)
        return m is not None and m.member.member_id in self.coordinator.members


class EmbeddedGroups:
    """The consumer groups of one embedded log, behind the interface its consumers use:
    join, resubscribe, heartbeat and leave; what a member should hold (`target`); taking
    partitions no other member still holds (`claim`) and giving them back (`release`);
    `describe` and `history`.

    `topics` is the log's cluster metadata, `now_ms` its clock and `notify` wakes the
    consumers waiting on it, so the groups know nothing else of the transport.
    """

    def __init__(self, topics: Callable[[], dict[str, int]], now_ms: Callable[[], int],
                 notify: Callable[[], None]):
        self._topics = topics
        self._now_ms = now_ms
        self._notify = notify
        self._lock = threading.RLock()
        self._groups: dict[str, _Group] = {}
        self._member_seq = itertools.count()

    # -- membership

    def join(self, group_id: str, topics: Sequence[str],
             assignors: Sequence[ConsumerPartitionAssignor], *,
             session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> str:
        handle = f"{group_id}-member-{next(self._member_seq):08d}"
        handler = ConsumerHandler(handle, topics, assignors, cluster=self._topics)
        member: GroupMember[Partitions] = GroupMember(
            client_id=handle, handler=handler, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS)
        with self._lock:
            g = self._groups.setdefault(group_id, _Group(group_id))
            m = _Member(handle, member, self._now_ms())
            g.members[handle] = m
            self._drive(g, [(m, Start())])
            if m.failed is not None:
                del g.members[handle]
                if not g.members:
                    del self._groups[group_id]
                raise TransportError(
                    f"{m.failed.error.name}: consumer group {group_id!r} uses "
                    f"{g.coordinator.protocol}; this consumer's {ASSIGNMENT_STRATEGY_CONFIG} "
                    f"offers {', '.join(handler.assignor_names)}")
        self._notify()
        return handle

    def resubscribe(self, group_id: str, handle: str, topics: Sequence[str]) -> None:
        with self._lock:
            g = self._groups[group_id]
            m = g.members[handle]
            if m.handler.topics == tuple(topics):
                return  # as in Kafka: the same subscription is no reason to rebalance
            m.handler.topics = tuple(topics)
            m.last_poll_ms = self._now_ms()
            self._drive(g, self._rejoin(m, "subscription changed"))
        self._notify()

    def heartbeat(self, group_id: str, handle: str) -> None:
        """The consumer polls: it is running, its due timers fire, the group's too."""
        with self._lock:
            g = self._groups.get(group_id)
            m = g.members.get(handle) if g else None
            if g is None or m is None:
                return
            m.last_poll_ms = self._now_ms()
            before = (g.coordinator.generation, m.revoke_all_epoch)
            self._drive(g, [], polled=m)
            changed = before != (g.coordinator.generation, m.revoke_all_epoch)
        if changed:
            self._notify()

    def leave(self, group_id: str, handle: str) -> None:
        with self._lock:
            g = self._groups.get(group_id)
            m = g.members.get(handle) if g else None
            if g is None or m is None:
                return
            self._drive(g, [(m, Leave("consumer closed"))])
            del g.members[handle]
            for tp in [tp for tp, owner in g.owners.items() if owner == handle]:
                del g.owners[tp]
            if not g.members:
                del self._groups[group_id]
        self._notify()

    def rebalance_for_topics(self) -> None:
        """Topics changed: the leader of each group whose subscribed topics' partitions
        changed asks for a rebalance (an eager one for nothing would stop everyone)."""
        with self._lock:
            for g in list(self._groups.values()):
                if self._watched(g) != g.watched:
                    leader = g.by_member_id(g.coordinator.leader or "")
                    now = self._now_ms()
                    asker = leader if leader and leader.running(now) else next(
                        (m for m in g.members.values() if m.running(now)), None)
                    if asker is not None:
                        self._drive(g, self._rejoin(asker, "metadata changed"))
        self._notify()

    def _watched(self, g: _Group) -> dict[str, int]:
        subscribed = {t for m in g.members.values() for t in m.handler.topics}
        return {t: n for t, n in self._topics().items() if t in subscribed}

    @staticmethod
    def _rejoin(m: _Member, reason: str) -> list[tuple[_Member, Any]]:
        if m.member.state is MemberState.UNJOINED:
            return []
        return [(m, RequestRejoin(reason))]

    # -- delivery

    def _drive(self, g: _Group, events: list[tuple[_Member, Any]],
               polled: _Member | None = None) -> None:
        """Deliver events, requests and replies until the group has nothing left to do
        now: the simulator's instant, with this log's clock."""
        c = g.coordinator
        now = self._now_ms()
        queue: deque[tuple[_Member, Any, bool]] = deque((m, e, False) for m, e in events)
        self._route(g, c.poll(now), None, queue)  # the coordinator's due timers (expiry)
        if polled is not None:  # its heartbeat, or a scheduled rejoin, if due
            self._act(g, polled, polled.member.poll(now), queue)
        rounds_at_start = c.generation
        for _ in range(MAX_DELIVERIES_PER_CALL):
            if queue:
                m, message, to_coordinator = queue.popleft()
                if to_coordinator:
                    self._route(g, c.handle(message, now), m, queue)
                else:
                    self._act(g, m, m.member.handle(message, now), queue)
                self._maybe_record(g, queue, now)
                continue
            if c.generation - rounds_at_start > MAX_ROUNDS_PER_CALL:
                log.warning("consumer group %s: assignor %s still revokes after %d rounds; "
                            "stopping here", g.id, c.protocol, MAX_ROUNDS_PER_CALL)
                return
            if c.state is GroupState.PREPARING_REBALANCE:
                told = [m for m in g.members.values()
                        if m.member.state is MemberState.STABLE
                        and m.member.member_id in c.members and m.running(now)]
                if told:  # they hear of the rebalance with their next heartbeat
                    queue.extend((m, HeartbeatDue(), False) for m in told)
                    continue
            before = (c.state, c.generation, len(c.members))
            replies = c.poll(now)
            if replies or before != (c.state, c.generation, len(c.members)):
                self._route(g, replies, None, queue)
                continue
            return
        raise TransportError(f"consumer group {g.id} does not settle (livelock)")

    def _act(self, g: _Group, m: _Member, actions: Iterable[Any],
             queue: deque[tuple[_Member, Any, bool]]) -> None:
        for action in actions:
            if isinstance(action, Send):
                queue.append((m, action.request, True))
            elif isinstance(action, StopWork) and action.reason != "revoked":
                m.revoke_all_epoch += 1  # eager rejoin, lost membership or leaving
            elif isinstance(action, MemberFailed):
                m.failed = action
                log.error("consumer %s of group %s failed: %s %s", m.handle, g.id,
                          action.error.name, action.detail)

    def _route(self, g: _Group, replies: Iterable[Any], sender: _Member | None,
               queue: deque[tuple[_Member, Any, bool]]) -> None:
        for reply in replies:
            target = sender if reply.to == "" else g.by_member_id(reply.to)
            if target is not None:
                queue.append((target, reply.response, False))

    def _maybe_record(self, g: _Group, queue: deque[tuple[_Member, Any, bool]],
                      now: int) -> None:
        """A generation is complete once it is Stable and every member applied its
        SyncGroup answer; it then joins the history."""
        c = g.coordinator
        if c.state is not GroupState.STABLE or c.generation <= g.recorded:
            return
        if any(isinstance(msg, SyncGroupResponse) for _, msg, _ in queue):
            return
        members = [m for m in g.members.values() if m.member.member_id in c.members]
        if any(m.member.last_completed_generation < c.generation for m in members):
            return
        g.recorded = c.generation
        g.watched = self._watched(g)
        leader = g.by_member_id(c.leader or "")
        g.history.append(GenerationRound(
            generation=c.generation, at_ms=now, trigger=c.trigger, protocol=c.protocol or "",
            leader=leader.handle if leader else "", members=tuple(m.handle for m in members),
            assignments={m.handle: [str(tp) for tp in sorted(m.member.owned)]
                         for m in members}))

    # -- partitions

    def target(self, group_id: str, handle: str) -> tuple[set[TopicPartition], int]:
        """The member's assignment and its revoke-everything epoch."""
        with self._lock:
            g = self._groups.get(group_id)
            m = g.members.get(handle) if g else None
            if m is None:
                return set(), 0
            m.seen_epoch = m.revoke_all_epoch
            return m.target(), m.revoke_all_epoch

    def claim(self, group_id: str, handle: str,
              wanted: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Take the partitions no other member still holds: their revoke callbacks ran,
        or the group dropped them (left, or expired while stalled)."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return []
            got = sorted(tp for tp in wanted
                         if (owner := g.owners.get(tp, handle)) == handle
                         or not g.in_group(owner))
            for tp in got:
                g.owners[tp] = handle
            return got

    def release(self, group_id: str, handle: str, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            g = self._groups.get(group_id)
            if g is not None:
                for tp in partitions:
                    if g.owners.get(tp) == handle:
                        del g.owners[tp]
        self._notify()

    # -- looking

    def describe(self, group_id: str) -> dict[str, Any]:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return {"group_id": group_id, "state": "Empty", "generation": 0, "members": {}}
            c = g.coordinator
            current = [m for m in g.members.values() if m.member.member_id in c.members]
            members = {}
            for m in current:
                owned = sorted(tp for tp, o in g.owners.items() if o == m.handle)
                members[m.handle] = {
                    "subscription": list(m.handler.topics),
                    "assignment": [str(tp) for tp in sorted(m.member.owned)],
                    "owned": [str(tp) for tp in owned],
                    "assignors": list(m.handler.assignor_names)}
            applied = all(m.seen_epoch == m.revoke_all_epoch
                          and m.target() == {tp for tp, o in g.owners.items() if o == m.handle}
                          for m in current)
            state = c.state.value
            if c.state is GroupState.STABLE and not applied:
                state = GroupState.PREPARING_REBALANCE.value
            return {"group_id": group_id, "state": state, "generation": c.generation,
                    "protocol": c.protocol, "members": members}

    def history(self, group_id: str) -> list[GenerationRound]:
        """The group's last completed generations, oldest first."""
        with self._lock:
            g = self._groups.get(group_id)
            return list(g.history) if g else []
