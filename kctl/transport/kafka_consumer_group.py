"""A Kafka consumer's group membership run by kctl's own group protocol.

librdkafka fetches (manual assignment) and kctl decides who fetches what: a `GroupMember`
with the consumer's `ConsumerHandler` and assignors (`partition.assignment.strategy`, the
ones `kctl rebalance explain --kind consumer` runs), carried to the group coordinator by
`BrokerGroupDriver` in Kafka's ConsumerProtocol, so standard Kafka tooling sees an
ordinary consumer group and its lag. Offsets are committed as the member in its
generation: once a rebalance has moved a partition, a stalled member's commit is refused.

A group thread drives the member (heartbeats continue while the task is busy in `put`);
the work it is handed (partitions to start and stop) waits for the consumer's own thread,
which runs the rebalance callbacks in `poll`, as Kafka's consumer does. A revocation holds
the member's next JoinGroup until the consumer's thread has run its callback, so no
partition is fetched by two members at once.

A member that completes no generation for longer than twice a rebalance may take (the
rebalance timeout, `max.poll.interval.ms`, plus a session) is stalled: it says so (`stall`,
which the sink task turns into its status note, `/health` and a metric) and joins again as
a new member, until a generation completes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kctl.api.records import TopicPartition
from kctl.group.consumer_coordinator import ASSIGNMENT_STRATEGY_CONFIG, ConsumerHandler
from kctl.group.history import GenerationCompleted
from kctl.group.messages import ErrorCode
from kctl.group.protocol import GroupMember, MemberFailed, MemberState, StartWork, StopWork
from kctl.transport.assignor_plugins import assignment_strategy
from kctl.transport.base import GenerationWatch, Stall
from kctl.transport.kafka_group import CONSUMER_CODEC, BrokerGroupDriver
from kctl.transport.member_ids import MemberIds

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_STRATEGY", "ConsumerGroupMember", "GroupWork"]

# Kafka Connect's sink consumers; kctl's default is the cooperative one (no stop-the-world)
DEFAULT_STRATEGY = "cooperative-sticky"
DEFAULT_SESSION_TIMEOUT_MS = 10_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 1_000
DEFAULT_MAX_POLL_INTERVAL_MS = 60_000  # the rebalance timeout a consumer gives the group
METADATA_CHECK_S = 3.0  # how often the partition counts of subscribed topics are compared
# StopWork reasons that mean the partitions were lost, not handed over (onPartitionsLost)
_LOST = {ErrorCode.UNKNOWN_MEMBER_ID.name, ErrorCode.ILLEGAL_GENERATION.name}


class GroupWork:
    """Partitions handed from the group thread to the consumer's thread."""

    __slots__ = ("done", "lost", "partitions", "start")

    def __init__(self, start: bool, partitions: frozenset[TopicPartition], lost: bool = False):
        self.start = start
        self.partitions = sorted(partitions)
        self.lost = lost
        self.done = threading.Event()


class ConsumerGroupMember:
    """One consumer in group `group_id` on a Kafka cluster (see the module docstring)."""

    def __init__(self, bootstrap: str, group_id: str, topics: Sequence[str],
                 config: Mapping[str, Any], partition_counts: Callable[[], Mapping[str, int]],
                 *, security: Mapping[str, Any] | None = None,
                 member_ids: MemberIds | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time):
        self.group_id = group_id
        self._counts = partition_counts
        assignors = assignment_strategy(config.get(ASSIGNMENT_STRATEGY_CONFIG) or DEFAULT_STRATEGY)
        client_id = str(config.get("client.id") or group_id)
        self.handler = ConsumerHandler(client_id, topics, assignors, self._cluster)
        self.rebalance_timeout_ms = int(config.get("max.poll.interval.ms",
                                                   DEFAULT_MAX_POLL_INTERVAL_MS))
        self.member: GroupMember[Any] = GroupMember(
            client_id, self.handler,
            session_timeout_ms=int(config.get("session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS)),
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            heartbeat_interval_ms=int(config.get("heartbeat.interval.ms",
                                                 DEFAULT_HEARTBEAT_INTERVAL_MS)))
        self.driver = BrokerGroupDriver(bootstrap, group_id, self.member, CONSUMER_CODEC,
                                        security=security, member_ids=member_ids)
        self._work: deque[GroupWork] = deque()
        self._calls: deque[Callable[[], None]] = deque()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"group-{group_id}", daemon=True)
        self._seen_counts: dict[str, int] = {}
        self.failure: str | None = None
        self.stall: Stall | None = None
        self._watch_generations = GenerationWatch(
            (2 * self.rebalance_timeout_ms + self.member.session_timeout_ms) / 1000,
            clock, wall_clock)

    # -- from the consumer's thread --------------------------------------------------------
    def start(self) -> None:
        self.driver.start()
        self._thread.start()

    def resubscribe(self, topics: Sequence[str]) -> None:
        def change() -> None:
            self.handler.topics = tuple(topics)
            self.driver.request_rejoin("subscription changed")

        self._calls.append(change)
        self.driver.wakeup()

    def take(self) -> list[GroupWork]:
        """The work handed over since the last call, in order; the caller sets `done` on
        each once it has acted on it."""
        out = []
        while self._work:
            out.append(self._work.popleft())
        return out

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.driver.commit_offsets(offsets)

    def close(self) -> None:
        """Leave the group at once (the coordinator does not wait a session timeout)."""
        self._closing.set()
        for w in self.take():
            w.done.set()
        self.driver.wakeup()
        self._thread.join(10)
        try:
            self.driver.leave("consumer closed")
        except Exception as e:  # leaving is best effort, as Kafka's clients do
            log.info("group %s: leaving failed: %s", self.group_id, e)
        finally:
            self.driver.close()

    # -- the group thread ------------------------------------------------------------------
    def _cluster(self) -> Mapping[str, int]:
        return dict(self._counts())

    def _run(self) -> None:
        next_check = time.monotonic() + METADATA_CHECK_S
        while not self._closing.is_set():
            try:
                while self._calls:
                    self._calls.popleft()()
                for action in self.driver.poll(0.5):
                    self._on_action(action)
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + METADATA_CHECK_S
                    self._check_metadata()
                self._watch()
            except Exception as e:  # the thread must outlive a broker that comes and goes
                log.warning("group %s: %s", self.group_id, e)
                self._closing.wait(1.0)

    def _watch(self) -> None:
        """Notice a member that completes no generation (see the module docstring)."""
        stable = self.member.state is MemberState.STABLE
        waited = self._watch_generations.due(stable)
        if stable and self.stall is not None:
            log.info("group %s: member %s completed generation %d; receiving again",
                     self.group_id, self.member.member_id, self.member.generation)
            self.stall = None
        if waited is None:
            return
        if self.stall is None:
            self.stall = Stall(
                f"consumer group {self.group_id} has given this consumer no partitions: no "
                f"generation completed in {waited:.0f} s (state {self.member.state.value}, "
                f"leader {self.member.leader or 'unknown'}); joining again as a new member",
                self._watch_generations.since_ms)
            log.warning("group %s: %s", self.group_id, self.stall.reason)
        for action in self.driver.rejoin_afresh(f"no generation completed in {waited:.0f} s"):
            self._on_action(action)

    def _on_action(self, action: Any) -> None:
        if isinstance(action, StopWork):
            # the next JoinGroup waits for this: the consumer's thread stops fetching first
            self._hand(GroupWork(False, action.work, lost=action.reason in _LOST), wait=True)
        elif isinstance(action, StartWork):
            self._hand(GroupWork(True, action.work), wait=False)
        elif isinstance(action, GenerationCompleted):
            self._seen_counts = self._subscribed_counts()
            r = action.record
            log.info("group %s: generation %d (%s): assigned %s, revoked %s", self.group_id,
                     r.generation, r.protocol, sorted(map(str, r.assigned)),
                     sorted(map(str, r.revoked)))
        elif isinstance(action, MemberFailed):
            self.failure = f"consumer group {self.group_id}: " + (
                action.detail or action.error.name)
            log.error("%s", self.failure)

    def _hand(self, work: GroupWork, *, wait: bool) -> None:
        self._work.append(work)
        if wait:
            deadline = time.monotonic() + self.rebalance_timeout_ms / 1000
            while not work.done.wait(0.2):
                if self._closing.is_set() or time.monotonic() > deadline:
                    return

    def _subscribed_counts(self) -> dict[str, int]:
        counts = self._counts()
        return {t: counts[t] for t in self.handler.topics if t in counts}

    def _check_metadata(self) -> None:
        """Kafka's consumer rejoins when a subscribed topic appears or grows: the assignor
        has partitions to hand out that the last generation did not know of."""
        if self.driver.assignment is None:
            return
        counts = self._subscribed_counts()
        if counts != self._seen_counts:
            self._seen_counts = counts
            self.driver.request_rejoin("subscribed topics' partitions changed")

