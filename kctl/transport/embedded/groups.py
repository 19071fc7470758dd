"""Consumer groups in process: the group state the transport keeps for its consumers.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kctl.api.records import TopicPartition
from kctl.errors import TransportError
from kctl.group.assignors.consumer import ConsumerPartitionAssignor
from kctl.group.assignors.consumer import TopicPartition as GroupTopicPartition
from kctl.group.consumer_coordinator import (
    ASSIGNMENT_STRATEGY_CONFIG,
    ConsumerHandler,
)
from kctl.group.protocol import JoinMember, select_protocol

if TYPE_CHECKING:
    pass


log = logging.getLogger(__name__)

# A cooperative assignor needs two rounds to move a partition; more than this is a bug in a
# custom assignor that keeps revoking, and the group stops rebalancing rather than spin.
MAX_ROUNDS_PER_REBALANCE = 16


class _Member:
    """One consumer in a group: its protocol half and what the last rebalance gave it."""

    def __init__(self, member_id: str, handler: ConsumerHandler):
        self.id = member_id
        self.handler = handler
        self.assignment: frozenset[GroupTopicPartition] = frozenset()
        self.generation = -1  # the generation of `assignment` (Kafka: -1 before the first)
        # Bumped by every rebalance that makes an eager member give up all it holds;
        # `seen_epoch` is the last one its consumer picked up.
        self.revoke_all_epoch = 0
        self.seen_epoch = 0

    def target(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self.assignment}


class _Group:
    """In-process group coordinator state; guarded by the transport's group lock."""

    def __init__(self, group_id: str):
        self.id = group_id
        self.generation = 0
        self.protocol: str | None = None  # the assignor the group selected
        self.members: dict[str, _Member] = {}  # join order: the first is the leader
        self.watched: dict[str, int] = {}  # subscribed topics' partitions at the last round
        self.owners: dict[TopicPartition, str] = {}  # who holds a partition (claimed, not revoked)


class EmbeddedGroups:
    """The consumer groups of one embedded log, behind the interface its consumers use:
    join, resubscribe and leave; what a member should hold (`target`); taking partitions
    no other member still holds (`claim`) and giving them back (`release`); `describe`.

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

    def join(self, group_id: str, topics: Sequence[str],
              assignors: Sequence[ConsumerPartitionAssignor]) -> str:
        member = f"{group_id}-member-{next(self._member_seq):08d}"
        handler = ConsumerHandler(member, topics, assignors, cluster=self._topics)
        with self._lock:
            g = self._groups.setdefault(group_id, _Group(group_id))
            offered = [m.handler.assignor_names for m in g.members.values()]
            if select_protocol([*offered, handler.assignor_names]) is None:
                if not g.members:
                    del self._groups[group_id]
                raise TransportError(
                    f"INCONSISTENT_GROUP_PROTOCOL: consumer group {group_id!r} uses "
                    f"{g.protocol}; this consumer's {ASSIGNMENT_STRATEGY_CONFIG} offers "
                    f"{', '.join(handler.assignor_names)}")
            g.members[member] = _Member(member, handler)
            self._rebalance(g)
        self._notify()
        return member

    def resubscribe(self, group_id: str, member: str, topics: Sequence[str]) -> None:
        with self._lock:
            g = self._groups[group_id]
            handler = g.members[member].handler
            if handler.topics == tuple(topics):
                return  # as in Kafka: the same subscription is no reason to rebalance
            handler.topics = tuple(topics)
            self._rebalance(g)
        self._notify()

    def leave(self, group_id: str, member: str) -> None:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return
            g.members.pop(member, None)
            for tp in [tp for tp, m in g.owners.items() if m == member]:
                del g.owners[tp]
            if g.members:
                self._rebalance(g)
            else:
                del self._groups[group_id]
        self._notify()

    def rebalance_for_topics(self) -> None:
        """Topics changed: rebalance the groups whose subscribed topics' partitions changed
        (the leader's metadata check; an eager rebalance for nothing would stop everyone)."""
        with self._lock:
            for g in self._groups.values():
                if self._watched(g) != g.watched:
                    self._rebalance(g)
        self._notify()

    def _watched(self, g: _Group) -> dict[str, int]:
        subscribed = {t for m in g.members.values() for t in m.handler.topics}
        return {t: n for t, n in self._topics().items() if t in subscribed}

    def _rebalance(self, g: _Group) -> None:
        """Every member rejoins at once: the group runs Kafka's join and sync through each
        member's ConsumerHandler, again while a cooperative member revoked something."""
        for _ in range(MAX_ROUNDS_PER_REBALANCE):
            members = list(g.members.values())
            protocol = select_protocol([m.handler.assignor_names for m in members])
            assert protocol is not None, "checked when the member joined"
            g.generation += 1
            g.protocol = protocol
            g.watched = self._watched(g)
            for m in members:
                if m.handler.is_eager(protocol):  # onJoinPrepare: eager members revoke all
                    m.assignment = frozenset()
                    m.revoke_all_epoch += 1
            joined = [
                JoinMember(m.id, m.id, dict(m.handler.metadata(m.assignment, m.generation))[protocol])
                for m in members]
            leader = members[0]
            assignments = leader.handler.assign(
                leader=leader.id, protocol=protocol, generation=g.generation, members=joined,
                now_ms=self._now_ms(), last_completed_generation=leader.generation)
            rejoin = False
            for m in members:
                outcome = m.handler.on_assignment(
                    protocol=protocol, assignment=assignments.get(m.id), owned=m.assignment,
                    generation=g.generation, now_ms=self._now_ms())
                m.assignment = outcome.owned
                m.generation = g.generation
                rejoin = rejoin or outcome.rejoin
            if not rejoin:
                return
        log.warning("consumer group %s: assignor %s still revokes after %d rounds; "
                    "stopping here", g.id, g.protocol, MAX_ROUNDS_PER_REBALANCE)

    def target(self, group_id: str, member: str) -> tuple[set[TopicPartition], int]:
        """The member's assignment and its eager revoke-everything epoch."""
        with self._lock:
            g = self._groups.get(group_id)
            m = g.members.get(member) if g else None
            if m is None:
                return set(), 0
            m.seen_epoch = m.revoke_all_epoch
            return m.target(), m.revoke_all_epoch

    def claim(self, group_id: str, member: str,
               wanted: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Take the partitions no other member still holds (their revoke callbacks ran)."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return []
            got = sorted(tp for tp in wanted if g.owners.get(tp, member) == member)
            for tp in got:
                g.owners[tp] = member
            return got

    def release(self, group_id: str, member: str, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            g = self._groups.get(group_id)
            if g is not None:
                for tp in partitions:
                    if g.owners.get(tp) == member:
                        del g.owners[tp]
        self._notify()

    def describe(self, group_id: str) -> dict[str, Any]:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return {"group_id": group_id, "state": "Empty", "generation": 0, "members": {}}
            members = {}
            for m in g.members.values():
                owned = sorted(tp for tp, o in g.owners.items() if o == m.id)
                members[m.id] = {"subscription": list(m.handler.topics),
                                 "assignment": [str(tp) for tp in sorted(m.assignment)],
                                 "owned": [str(tp) for tp in owned],
                                 "assignors": list(m.handler.assignor_names)}
            stable = all(m.seen_epoch == m.revoke_all_epoch
                         and m.target() == {tp for tp, o in g.owners.items() if o == m.id}
                         for m in g.members.values())
            return {"group_id": group_id, "state": "Stable" if stable else "PreparingRebalance",
                    "generation": g.generation, "protocol": g.protocol, "members": members}

