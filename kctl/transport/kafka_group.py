"""A group member on a real Kafka cluster: kctl's `GroupMember` decides, the wire carries.

`GroupMember` (kctl/group/protocol.py) is a sans-IO state machine: it says which request
to send and what to do with each answer. This driver is its I/O half for a Kafka group
coordinator: it finds the coordinator, turns the member's JoinGroup, SyncGroup, Heartbeat
and LeaveGroup into Kafka's requests (kafka-python's protocol classes and network client
carry them), feeds the answers back with the time, and hands the application the work to
start and stop. It decides nothing itself, so what `kctl rebalance explain` simulates is
what a group on a broker does.

One thread drives it (`poll`, like Kafka's WorkerGroupMember.poll from the herder's
tick); kafka-python's network runs on its own I/O thread. With `heartbeat_thread`, a
thread of its own sends a stable member's heartbeats while that thread is busy elsewhere
(Kafka's HeartbeatThread, KIP-62): a worker starting or stopping many tasks keeps its
session; everything else still waits for `poll`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kctl.errors import CommitFailedError, TransportError
from kctl.group import connect_coordinator as connect_wire
from kctl.group import consumer_protocol as consumer_wire
from kctl.group.assignors.connect import ConnectAssignment, WorkerMetadata
from kctl.group.assignors.consumer import Assignment, Subscription
from kctl.group.driver import MemberAction
from kctl.group.history import GenerationCompleted, GenerationRecorder
from kctl.group.messages import (
    COORDINATOR_MOVED,
    FENCED,
    MEMBER_ERRORS,
    ErrorCode,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    JoinMember,
    LeaveGroup,
    LeaveGroupResponse,
    SyncGroup,
    SyncGroupResponse,
)
from kctl.group.protocol import (
    GroupMember,
    HeartbeatDue,
    JoinAfresh,
    Leave,
    MemberFailed,
    MemberState,
    RequestRejoin,
    ScheduleTimer,
    Send,
    Start,
    StartWork,
    StopWork,
)
from kctl.transport.member_ids import MemberIds

log = logging.getLogger(__name__)

__all__ = ["CONNECT_CODEC", "CONSUMER_CODEC", "BrokerGroupDriver", "GroupCodec"]

_COORDINATOR_MOVED = {e.value for e in COORDINATOR_MOVED}
_KNOWN = {e.value: e for e in MEMBER_ERRORS}
_FENCED = {e.value for e in FENCED}
RETRY_BACKOFF_S = 0.1


def _held_back(error: BaseException) -> bool:
    """kafka-python refuses a request while a connected node has its maximum in flight
    (`NodeNotReadyError: Node paused: {'max_in_flight'}`): a local limit, not a lost node."""
    from kafka.errors import NodeNotReadyError

    return isinstance(error, NodeNotReadyError) and "paused" in str(error)


M = TypeVar("M")  # a member's metadata (what it sends with JoinGroup)
A = TypeVar("A")  # an assignment (what the leader sends with SyncGroup)


class GroupCodec(Protocol[M, A]):
    """How a group's member metadata and assignments become bytes on the wire."""

    def encode_metadata(self, protocol: str, metadata: M) -> bytes: ...

    def decode_metadata(self, protocol: str, raw: bytes) -> M: ...

    def encode_assignment(self, protocol: str, assignment: A) -> bytes: ...

    def decode_assignment(self, protocol: str, raw: bytes) -> A: ...


class _ConnectCodec:
    """Kafka Connect's ConnectProtocol / IncrementalCooperativeConnectProtocol."""

    def encode_metadata(self, protocol: str, metadata: WorkerMetadata) -> bytes:
        return connect_wire.encode_metadata(metadata)

    def decode_metadata(self, protocol: str, raw: bytes) -> WorkerMetadata:
        return connect_wire.decode_metadata(raw)

    def encode_assignment(self, protocol: str, assignment: ConnectAssignment) -> bytes:
        return connect_wire.encode_assignment(assignment)

    def decode_assignment(self, protocol: str, raw: bytes) -> ConnectAssignment:
        return connect_wire.decode_assignment(raw)


class _ConsumerCodec:
    """Kafka's ConsumerProtocol (Subscription and Assignment v3)."""

    def encode_metadata(self, protocol: str, metadata: Subscription) -> bytes:
        return consumer_wire.encode_subscription(metadata)

    def decode_metadata(self, protocol: str, raw: bytes) -> Subscription:
        return consumer_wire.decode_subscription(raw)

    def encode_assignment(self, protocol: str, assignment: Assignment) -> bytes:
        return consumer_wire.encode_assignment(assignment)

    def decode_assignment(self, protocol: str, raw: bytes) -> Assignment:
        return consumer_wire.decode_assignment(raw)


CONNECT_CODEC: GroupCodec[WorkerMetadata, ConnectAssignment] = _ConnectCodec()
CONSUMER_CODEC: GroupCodec[Subscription, Assignment] = _ConsumerCodec()


@dataclass
class _InFlight:
    request: Any  # the member's request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
    future: Any  # kafka-python's Future
    retry_at: float | None = None  # set while waiting to resend after a coordinator move


def _error(code: int) -> ErrorCode | None:
    return _KNOWN.get(code)


def _name(code: int) -> str:
    from kafka.errors import for_code

    return for_code(code).__name__


class BrokerGroupDriver:
    """Carries one `GroupMember` to and from a Kafka group coordinator (a
    `kctl.group.driver.GroupDriver`)."""

    def __init__(self, bootstrap_servers: str, group_id: str, member: GroupMember[Any],
                 codec: GroupCodec[Any, Any], *, request_timeout_ms: int = 30_000,
                 security: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, heartbeat_thread: bool = False,
                 member_ids: MemberIds | None = None):
        self.group_id = group_id
        self.member = member
        # the member ids this worker's members held before (kctl/transport/member_ids.py)
        self._member_ids = member_ids
        self._kept_id, self._kept_leads = "", False
        self._lock = threading.RLock()  # the member and the requests: poll's and heartbeats'
        self._polling = False
        self._closed = threading.Event()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name=f"heartbeat-{group_id}") \
            if heartbeat_thread else None
        self.codec = codec
        self.request_timeout_ms = request_timeout_ms
        self._clock = clock
        self._wall_clock = wall_clock
        self._bootstrap = bootstrap_servers
        self._security = dict(security or {})  # Kafka's security.protocol, ssl.*, sasl.*
        self._client: Any = None
        self._coordinator: Any = None
        self._inflight: list[_InFlight] = []
        self._wake = threading.Event()
        self._work: list[MemberAction] = []
        self._recorder = GenerationRecorder(member)  # what the next GenerationRecord tells
        self._assignment: Any = None
        # requests that follow a StopWork wait until the application has stopped that work
        # (it calls poll again): a member joins only once it has given its work up
        self._holding = False
        self._held: list[Any] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        from kafka.net.compat import KafkaNetClient  # the network client: a worker-only import

        from kctl.transport.security import kafka_python_config

        self._client = KafkaNetClient(bootstrap_servers=self._bootstrap,
                                      client_id=self.member.client_id,
                                      **kafka_python_config(self._security))
        self._client._manager._net.start()
        try:
            self._client._manager.bootstrap(self.request_timeout_ms)
        except Exception as e:
            protocol = str(self._security.get("security.protocol") or "PLAINTEXT").upper()
            raise TransportError(f"cannot reach the Kafka cluster at {self._bootstrap} to join "
                                 f"group {self.group_id} (security.protocol={protocol}): "
                                 f"{e}") from e
        with self._lock:
            held = ""
            if self._member_ids is not None and not self.member.member_id:
                held = self._kept_id = self._member_ids.take(self.group_id)
                if held:
                    log.info("group %s: joining with member id %s, held before",
                             self.group_id, held)
            self._act(self.member.handle(Start(held), self._now()))
        if self._heartbeats is not None:
            self._heartbeats.start()

    def _heartbeat_loop(self) -> None:
        """Heartbeats (and their answers) while the polling thread is busy elsewhere."""
        while not self._closed.wait(0.1):
            if self._polling:
                continue
            with self._lock:
                if self._polling or self._client is None:
                    continue
                self._handle_answers(only=Heartbeat)
                m = self.member
                if m.state is MemberState.STABLE and m.next_heartbeat_ms is not None and \
                        self._now() >= m.next_heartbeat_ms:
                    self._act(m.handle(HeartbeatDue(), self._now()))

    def leave(self, reason: str = "shutting down", timeout: float = 5.0) -> list[MemberAction]:
        """Stop cleanly: what the member owned is returned as work to stop, and the
        coordinator is told at once (no session timeout to wait for)."""
        with self._lock:
            return self._leave(reason, timeout)

    def _leave(self, reason: str, timeout: float) -> list[MemberAction]:
        # answers to what is in flight no longer concern a member that has left
        self._inflight = [f for f in self._inflight if isinstance(f.request, LeaveGroup)]
        self._held = []
        self._act(self.member.handle(Leave(reason), self._now()))
        self._release()  # the caller stops what is returned; the group hears at once
        work = self._take_work()
        deadline = time.monotonic() + timeout
        while any(isinstance(f.request, LeaveGroup) for f in self._inflight) and \
                time.monotonic() < deadline:
            work += self.poll(min(0.1, max(0.0, deadline - time.monotonic())))
        return work

    def rejoin_afresh(self, reason: str) -> list[MemberAction]:
        """Give up a membership that completes no generation and join again as a new
        member, without a LeaveGroup: the coordinator expires the old one a session later,
        as a member that vanished (a leader that leaves while its group re-forms stays the
        test broker's leader for good; one that expires does not). What it owned is
        returned as work to stop, lost."""
        with self._lock:
            self._inflight = [f for f in self._inflight if isinstance(f.request, LeaveGroup)]
            self._held, self._holding = [], False
            self._act(self.member.handle(JoinAfresh(reason), self._now()))
            return self._take_work()

    def close(self) -> None:
        self._closed.set()
        if self._member_ids is not None and self._kept_id:
            self._member_ids.give_back(self.group_id, self._kept_id)
        if self._heartbeats is not None and self._heartbeats.is_alive():
            self._heartbeats.join(5)
        if self._client is not None:
            self._client.close()
            self._client = None

    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            self._act(self.member.handle(RequestRejoin(reason), self._now()))

    def wakeup(self) -> None:
        """End a `poll` early (another thread has something for the polling thread)."""
        self._wake.set()

    @property
    def assignment(self) -> Any:
        """The last assignment the leader sent this member (None before the first)."""
        return self._assignment

    def commit_offsets(self, offsets: Mapping[Any, int]) -> None:
        """Commit consumer offsets ({TopicPartition: next offset}) as this member, in its
        current generation: the coordinator refuses them (CommitFailedError) once a
        rebalance has given the partitions to someone else, which is what fences a member
        that stalled. Safe from another thread than the polling one; blocks until answered."""
        from kafka.protocol.consumer.group import OffsetCommitRequest

        m = self.member
        member_id, generation = m.member_id, m.generation
        # While a rebalance waits for members to join, the coordinator still takes offsets
        # of the generation that is ending (what a revocation callback commits); a member
        # that lost its membership has no generation to commit in.
        if not member_id or generation < 0:
            raise CommitFailedError(f"group {self.group_id}: offsets not committed, this member "
                                    f"is not in a generation ({m.state.value})")
        coordinator = self._coordinator
        if coordinator is None:
            raise TransportError(f"group {self.group_id}: offsets not committed, the group "
                                 "coordinator is being looked up")
        topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
        part_cls = topic_cls.OffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(part_cls(
                partition_index=tp.partition, committed_offset=offset,
                committed_leader_epoch=-1, committed_metadata=""))
        request = OffsetCommitRequest(
            max_version=7, group_id=self.group_id, generation_id_or_member_epoch=generation,
            member_id=member_id, group_instance_id=None, retention_time_ms=-1,
            topics=[topic_cls(name=t, partitions=parts) for t, parts in by_topic.items()])
        done = threading.Event()
        future = self._submit(request, coordinator, self.request_timeout_ms)
        future.add_both(lambda _: done.set())
        if not done.wait(self.request_timeout_ms / 1000 + 1):
            raise TransportError(f"group {self.group_id}: offset commit timed out")
        if future.exception is not None:
            raise TransportError(f"group {self.group_id}: offset commit failed: "
                                 f"{future.exception}")
        errors = {p.error_code for t in future.value.topics for p in t.partitions} - {0}
        if errors & _FENCED:
            raise CommitFailedError(
                f"group {self.group_id}: the coordinator refused the offsets of generation "
                f"{generation} ({', '.join(_name(e) for e in sorted(errors))}): a rebalance "
                "has moved this member's partitions")
        if errors:
            raise TransportError(f"group {self.group_id}: offset commit failed "
                                 f"({', '.join(_name(e) for e in sorted(errors))})")

    # -- the loop ------------------------------------------------------------------------------
    def poll(self, timeout: float) -> list[MemberAction]:
        """Run the member for up to `timeout` seconds (less when something happens):
        answers in, requests and heartbeats out. Returns StartWork, StopWork and
        MemberFailed actions for the application, in order, and a GenerationCompleted
        with this worker's record of each generation it completes."""
        deadline = time.monotonic() + timeout
        self._polling = True
        try:
            with self._lock:
                self._release()
            while True:
                with self._lock:
                    self._wake.clear()
                    self._handle_answers()
                    self._act(self.member.poll(self._now()))
                    if self._work or time.monotonic() >= deadline:
                        return self._take_work()
                    wait = deadline - time.monotonic()
                    due = self.member.next_deadline()
                    if due is not None:
                        wait = min(wait, max(0.0, (due - self._now()) / 1000))
                    retry = [f.retry_at for f in self._inflight if f.retry_at is not None]
                    if retry:
                        wait = min(wait, max(0.0, min(retry) - time.monotonic()))
                self._wake.wait(max(wait, 0.0))
        finally:
            self._polling = False

    def _release(self) -> None:
        """The application is back in poll, so it has stopped the work returned before:
        send what waited for that (Kafka revokes before it joins, onJoinPrepare)."""
        held, self._held, self._holding = self._held, [], False
        for request in held:
            self._send(request)

    def _take_work(self) -> list[MemberAction]:
        work, self._work = self._work, []
        return work

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _act(self, actions: list[Any]) -> None:
        self._keep_member_id()
        for action in actions:
            if isinstance(action, Send):
                self._recorder.sent(action.request, int(self._wall_clock() * 1000))
                if self._holding:
                    self._held.append(action.request)
                else:
                    self._send(action.request)
            elif isinstance(action, StopWork):
                self._recorder.stopped(action.work)
                self._work.append(action)
                self._holding = True
            elif isinstance(action, StartWork):
                self._recorder.started(action.work)
                self._work.append(action)
            elif isinstance(action, MemberFailed):
                self._work.append(action)
            elif not isinstance(action, ScheduleTimer):  # timers: member.next_deadline()
                raise TransportError(f"group {self.group_id}: unexpected action {action!r}")

    def _resume_leader(self, actions: list[Any]) -> bool:
        """The coordinator names as leader a member id this worker's previous process held
        (on file, and no member of this process holds it): that process is gone, so this
        member leaves under its own id and joins as that one, taking its membership and
        leadership over (Kafka would otherwise wait for it to expire; a coordinator that
        no longer knows the id answers UNKNOWN_MEMBER_ID and it joins anew). Instead of
        `actions` (its SyncGroup as a follower)."""
        m = self.member
        if self._member_ids is None or m.state is not MemberState.AWAITING_SYNC or \
                m.is_leader or not m.leader or \
                not self._member_ids.claim(self.group_id, m.leader):
            return False
        leader, own = m.leader, m.member_id
        log.info("group %s: the coordinator names %s as leader, a member id this worker held "
                 "before; member %s leaves and joins as that member", self.group_id, leader, own)
        self._act([a for a in actions if not isinstance(a, Send)])
        self._act(m.handle(Leave(f"joining as {leader}, held before"), self._now()))
        self._member_ids.replace(self.group_id, own, "")
        self._kept_id, self._kept_leads = leader, False
        self._act(m.handle(Start(leader), self._now()))
        return True

    def _keep_member_id(self) -> None:
        # the id stays on file after a LeaveGroup: the next process joins with it (a
        # coordinator that no longer knows it says so)
        member_id, leads = self.member.member_id, self.member.is_leader
        if self._member_ids is None or (member_id, leads) == (self._kept_id, self._kept_leads) \
                or (not member_id and self.member.state is MemberState.UNJOINED):
            return
        self._member_ids.replace(self.group_id, self._kept_id, member_id, leads=leads)
        self._kept_id, self._kept_leads = member_id, leads

    # -- requests ------------------------------------------------------------------------------
    def _find_coordinator(self) -> Any:
        from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest

        request = FindCoordinatorRequest(key=self.group_id, key_type=0,
                                         coordinator_keys=[self.group_id])
        response = self._call(request, None, self.request_timeout_ms)
        result = response.coordinators[0] if getattr(response, "coordinators", None) else response
        if result.error_code != 0:
            raise TransportError(f"no coordinator for group {self.group_id} yet "
                                 f"(error {result.error_code})")
        return self._client._manager.cluster.add_coordinator(result, CoordinatorType.GROUP,
                                                             self.group_id)

    def _call(self, request: Any, node: Any, timeout_ms: int) -> Any:
        """Send and wait (coordinator lookups only: the member's requests never block)."""
        future = self._submit(request, node, timeout_ms)
        end = time.monotonic() + timeout_ms / 1000
        while not future.is_done and time.monotonic() < end:
            self._wake.wait(0.05)
            self._wake.clear()
        if not future.is_done:
            raise TransportError(f"{type(request).__name__} to the Kafka cluster timed out")
        if future.exception is not None:
            raise TransportError(f"{type(request).__name__} failed: {future.exception}")
        return future.value

    def _submit(self, request: Any, node: Any, timeout_ms: int) -> Any:
        manager = self._client._manager

        async def send() -> Any:
            return await manager.send(request, node_id=node, request_timeout_ms=timeout_ms)

        future = manager._net.call_soon_with_future(send)
        future.add_both(lambda _: self._wake.set())
        return future

    def _send(self, request: Any, entry: _InFlight | None = None) -> None:
        try:
            if self._coordinator is None:
                self._coordinator = self._find_coordinator()
            wire, timeout_ms = self._to_wire(request)
            future = self._submit(wire, self._coordinator, timeout_ms)
        except TransportError as e:
            log.info("group %s: %s; retrying", self.group_id, e)
            self._coordinator = None
            retry = entry or _InFlight(request, None)
            retry.retry_at = time.monotonic() + RETRY_BACKOFF_S
            if entry is None:
                self._inflight.append(retry)
            return
        if entry is None:
            self._inflight.append(_InFlight(request, future))
        else:
            entry.future, entry.retry_at = future, None

    def _to_wire(self, request: Any) -> tuple[Any, int]:
        from kafka.protocol.consumer.group import (
            HeartbeatRequest,
            JoinGroupRequest,
            LeaveGroupRequest,
            SyncGroupRequest,
        )

        m = self.member
        if isinstance(request, JoinGroup):
            protocols = [(name, self.codec.encode_metadata(name, meta))
                         for name, meta in request.protocols]
            # The coordinator holds a JoinGroup until every member has joined.
            timeout = max(self.request_timeout_ms, request.rebalance_timeout_ms + 5000)
            return JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                member_id=request.member_id, group_instance_id=None,
                protocol_type=request.protocol_type, protocols=protocols,
                # KIP-800: version 8 carries the reason to the broker's log (older brokers
                # negotiate a lower version and drop it)
                reason=(request.reason or None) and request.reason[:255], max_version=8), timeout
        if isinstance(request, SyncGroup):
            assert m.protocol is not None
            assignments = [(member, self.codec.encode_assignment(m.protocol, a))
                           for member, a in (request.assignments or {}).items()]
            return SyncGroupRequest(
                group_id=self.group_id, generation_id=request.generation,
                member_id=request.member_id, group_instance_id=None,
                protocol_type=m.handler.protocol_type, protocol_name=m.protocol,
                assignments=assignments, max_version=5), self.request_timeout_ms
        if isinstance(request, Heartbeat):
            return HeartbeatRequest(group_id=self.group_id, generation_id=request.generation,
                                    member_id=request.member_id,
                                    group_instance_id=None), self.request_timeout_ms
        if isinstance(request, LeaveGroup):
            return LeaveGroupRequest(
                group_id=self.group_id, member_id=request.member_id,
                members=[LeaveGroupRequest.MemberIdentity(
                    member_id=request.member_id, group_instance_id=None,
                    reason=(request.reason or None) and request.reason[:255])],
            ), self.request_timeout_ms
        raise TransportError(f"group {self.group_id}: cannot send {request!r}")

    # -- answers -------------------------------------------------------------------------------
    def _handle_answers(self, only: type | None = None) -> None:
        """The answers that arrived (`only`: to requests of that type)."""
        now = time.monotonic()
        for entry in list(self._inflight):
            if only is not None and not isinstance(entry.request, only):
                continue
            if entry.retry_at is not None:
                if now >= entry.retry_at:
                    self._send(entry.request, entry)
                continue
            if not entry.future.is_done:
                continue
            self._inflight.remove(entry)
            if entry.future.exception is not None:
                if _held_back(entry.future.exception):
                    # the client's own in-flight limit on a connection that works: Kafka's
                    # clients wait for a slot; the coordinator has not moved
                    log.debug("group %s: %s held back (%s); sending it again shortly",
                              self.group_id, type(entry.request).__name__,
                              entry.future.exception)
                else:
                    log.info("group %s: %s failed (%s); finding the coordinator again",
                             self.group_id, type(entry.request).__name__,
                             entry.future.exception)
                    self._coordinator = None
                self._retry(entry)
                continue
            code = entry.future.value.error_code
            if code in _COORDINATOR_MOVED:
                self._coordinator = None
                self._retry(entry)
                continue
            response = self._from_wire(entry.request, entry.future.value)
            log.debug("group %s: %s answered %s", self.group_id, type(entry.request).__name__,
                      response)
            if response is None:
                continue
            completed = self.member.last_completed_generation
            actions = self.member.handle(response, self._now())
            if isinstance(response, JoinGroupResponse) and self._resume_leader(actions):
                continue
            if self.member.last_completed_generation == completed:
                self._act(actions)
                continue
            # a JoinGroup among the answer's actions starts the next rebalance: its reason
            # belongs to that generation's record, not to the one just completed
            cut = next((i for i, a in enumerate(actions)
                        if isinstance(a, Send) and isinstance(a.request, JoinGroup)),
                       len(actions))
            self._act(actions[:cut])
            self._work.append(GenerationCompleted(self._recorder.completed(
                self._assignment, int(self._wall_clock() * 1000))))
            self._act(actions[cut:])

    def _retry(self, entry: _InFlight) -> None:
        if isinstance(entry.request, LeaveGroup):
            return  # best effort, as Kafka's clients do
        entry.retry_at = time.monotonic() + RETRY_BACKOFF_S
        entry.future = None
        self._inflight.append(entry)

    def _from_wire(self, request: Any, wire: Any) -> Any:
        error = _error(wire.error_code)
        if error is None:
            self._work.append(MemberFailed(
                ErrorCode.NONE, f"{type(request).__name__} failed with {_name(wire.error_code)}"))
            return None
        if isinstance(request, JoinGroup):
            protocol = wire.protocol_name or None
            members = tuple(
                JoinMember(m.member_id, m.member_id,
                           self.codec.decode_metadata(protocol or "", bytes(m.metadata)))
                for m in wire.members)
            self._recorder.joined(tuple(m.member_id for m in members))
            return JoinGroupResponse(error, wire.member_id, wire.generation_id, protocol,
                                     wire.leader, members)
        if isinstance(request, SyncGroup):
            raw = bytes(wire.assignment or b"")
            protocol = self.member.protocol or ""
            assignment = self.codec.decode_assignment(protocol, raw) if raw else None
            self._assignment = assignment
            return SyncGroupResponse(error, assignment, request.generation)
        if isinstance(request, Heartbeat):
            return HeartbeatResponse(error)
        return LeaveGroupResponse(error)
