"""A group coordinator inside the process, and the driver that carries a member to it.

`InProcessGroup` is kctl's sans-IO `Coordinator` behind a lock, on a clock that moves only
when told (`advance`). `InProcessGroup.driver` is a `GroupDriver` factory, so real
`DistributedHerder`s join it as they would join a Kafka group: several herders run in one
process with no broker, and a test decides when sessions expire and scheduled delays run
out. Each driver touches its member only on the thread that polls it, as the broker's
driver does; requests reach the coordinator at once, answers wait in the member's inbox.

Like the simulator behind `kctl rebalance explain`, members hear of a rebalance at once
(as if their heartbeat were due right then), and the coordinator behaves as Kafka's: a
leader that rejoins starts a new generation.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kctl.errors import ConnectError
from kctl.group.coordinator import Coordinator, GroupState
from kctl.group.driver import MemberAction
from kctl.group.history import GenerationCompleted, GenerationRecorder
from kctl.group.messages import CoordinatorReply, JoinGroupResponse, SyncGroupResponse
from kctl.group.protocol import (
    GroupMember,
    HeartbeatDue,
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

__all__ = ["InProcessGroup", "InProcessGroupDriver"]

# a bound on timer steps within one `advance`: a livelock is a bug, not a long wait
MAX_STEPS = 100_000


class InProcessGroup:
    """One group's coordinator, shared by the drivers of the members that join it."""

    def __init__(self, group_id: str = "connect-cluster", *, start_ms: int = 0,
                 wall_clock: Callable[[], float] = time.time):
        self.coordinator = Coordinator(group_id)
        self.now_ms = start_ms
        self.wall_clock = wall_clock
        self.cond = threading.Condition(threading.RLock())
        self.epoch = 0  # counts changes a driver may have to act on
        self.drivers: list[InProcessGroupDriver] = []
        self._by_id: dict[str, InProcessGroupDriver] = {}
        self._prompted: set[tuple[int, str]] = set()

    def driver(self, member: GroupMember[Any]) -> InProcessGroupDriver:
        """The `driver_factory` of a DistributedHerder on this group."""
        driver = InProcessGroupDriver(self, member)
        with self.cond:
            self.drivers.append(driver)
        return driver

    # -- what tests do to the group ----------------------------------------------------------
    def crash(self, driver: InProcessGroupDriver) -> None:
        """The member's process dies: nothing it sends arrives any more, nothing reaches it.
        The coordinator notices when its session expires (`advance`)."""
        with self.cond:
            driver.crashed = True
            driver.inbox.clear()
            self._changed()

    def stall(self, driver: InProcessGroupDriver, stalled: bool = True) -> None:
        """The member's process stops reading (a long GC pause, a stuck disk): what reaches
        it waits until it runs again."""
        with self.cond:
            driver.stalled = stalled
            self._changed()

    def advance(self, ms: int, *, timeout: float = 30.0) -> None:
        """Let `ms` of group time pass, firing every timer on the way (heartbeats, session
        expiry, scheduled rejoins), each once every member has acted on the one before."""
        deadline = time.monotonic() + timeout
        target = self.now_ms + ms
        for _ in range(MAX_STEPS):
            self.wait_quiet(max(0.0, deadline - time.monotonic()))
            with self.cond:
                due = self._next_deadline()
                if due is None or due > target:
                    self.now_ms = target
                    self._changed()
                    break
                self.now_ms = max(self.now_ms, due)
                self._coordinator_poll()
                self._changed()
        else:  # pragma: no cover - a livelock
            raise ConnectError(f"the group does not settle at {self.now_ms} ms")
        self.wait_quiet(max(0.0, deadline - time.monotonic()))

    def wait_quiet(self, timeout: float = 30.0) -> None:
        """Until every running member has read what reached it and acted on the time."""
        end = time.monotonic() + timeout
        with self.cond:
            while not all(d.quiet for d in self._running()):
                left = end - time.monotonic()
                if left <= 0:
                    busy = [d.member.client_id for d in self._running() if not d.quiet]
                    raise ConnectError(f"members {busy} did not act on the group within "
                                       f"{timeout:g} s")
                self.cond.wait(min(left, 0.05))

    @property
    def stable(self) -> bool:
        """The coordinator and every running member agree on a completed generation."""
        with self.cond:
            c = self.coordinator
            running = self._running()
            return (c.state is GroupState.STABLE and all(d.quiet for d in running)
                    and {d.member.member_id for d in running if not d.left} == set(c.members)
                    and all(d.member.state is MemberState.STABLE
                            and d.member.generation == c.generation
                            for d in running if not d.left))

    # -- the wire ------------------------------------------------------------------------------
    def _running(self) -> list[InProcessGroupDriver]:
        return [d for d in self.drivers if not d.crashed and not d.stalled and not d.closed]

    def _changed(self) -> None:
        self.epoch += 1
        self.cond.notify_all()

    def _send(self, sender: InProcessGroupDriver, request: Any) -> None:
        if sender.crashed:
            return
        if request.member_id:
            self._by_id[request.member_id] = sender
        self._route(self.coordinator.handle(request, self.now_ms), sender)
        self._coordinator_poll()
        self._changed()

    def _coordinator_poll(self) -> None:
        c = self.coordinator
        self._route(c.poll(self.now_ms), None)
        if c.state is GroupState.PREPARING_REBALANCE:
            for member_id, info in c.members.items():
                key = (c.generation, member_id)
                driver = self._by_id.get(member_id)
                if not info.awaiting_join and key not in self._prompted and driver is not None:
                    self._prompted.add(key)
                    driver.inbox.append(HeartbeatDue())

    def _route(self, replies: list[CoordinatorReply], sender: InProcessGroupDriver | None
               ) -> None:
        for reply in replies:
            target = sender if reply.to == "" else self._by_id.get(reply.to)
            if target is not None and not target.crashed:
                target.inbox.append(reply.response)

    def _next_deadline(self) -> int | None:
        deadlines = [self.coordinator.next_deadline()]
        deadlines += [d.member.next_deadline() for d in self._running()]
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None


class InProcessGroupDriver:
    """Carries one `GroupMember` to an `InProcessGroup` (a `GroupDriver`)."""

    def __init__(self, group: InProcessGroup, member: GroupMember[Any]):
        self.group = group
        self.member = member
        self.inbox: deque[Any] = deque()
        self.crashed = False
        self.stalled = False
        self.closed = False
        self.left = False
        self._seen_epoch = -1
        self._work: list[MemberAction] = []
        self._holding = False
        self._handed = False  # work went to the application, which has not polled since
        self._held: list[Any] = []
        self._assignment: Any = None
        self._recorder = GenerationRecorder(member)

    @property
    def quiet(self) -> bool:
        """It has polled since the group last changed, with nothing left to hand over."""
        return (self._seen_epoch == self.group.epoch and not self.inbox and not self._work
                and not self._holding and not self._handed) or self.left

    # -- GroupDriver ---------------------------------------------------------------------------
    def start(self) -> None:
        with self.group.cond:
            self._act(self.member.handle(Start(), self.group.now_ms))

    def poll(self, timeout: float) -> list[MemberAction]:
        end = time.monotonic() + timeout
        g = self.group
        with g.cond:
            self._handed = False
            while True:
                if not self.stalled and not self.crashed:
                    self._release()
                    self._step()
                    if self.inbox and not self._work:
                        continue  # answers to what it just sent
                    self._seen_epoch = g.epoch
                    g.cond.notify_all()
                if self._work or time.monotonic() >= end:
                    work, self._work = self._work, []
                    self._handed = bool(work)
                    return work
                g.cond.wait(max(0.0, end - time.monotonic()))

    def leave(self, reason: str = "shutting down", timeout: float = 5.0) -> list[MemberAction]:
        with self.group.cond:
            self._held = []
            self.inbox.clear()
            if self.member.state is not MemberState.UNJOINED:
                self._act(self.member.handle(Leave(reason), self.group.now_ms))
            self._release()
            self.left = True
            work, self._work = self._work, []
            self.group._changed()
            return work

    def request_rejoin(self, reason: str) -> None:
        with self.group.cond:
            if self.member.state is not MemberState.UNJOINED:
                self._act(self.member.handle(RequestRejoin(reason), self.group.now_ms))

    def wakeup(self) -> None:
        with self.group.cond:
            self.group.cond.notify_all()

    def close(self) -> None:
        with self.group.cond:
            self.closed = True
            self.group._changed()

    @property
    def assignment(self) -> Any:
        return self._assignment

    # -- the member, on the polling thread -----------------------------------------------------
    def _step(self) -> None:
        now = self.group.now_ms
        while self.inbox:
            event = self.inbox.popleft()
            if isinstance(event, HeartbeatDue) and self.member.state is MemberState.UNJOINED:
                continue
            if isinstance(event, JoinGroupResponse):
                self._recorder.joined(tuple(m.member_id for m in event.members))
            if isinstance(event, SyncGroupResponse):
                self._assignment = event.assignment
            completed = self.member.last_completed_generation
            self._act(self.member.handle(event, now))
            if self.member.last_completed_generation != completed:
                record = self._recorder.completed(self._assignment,
                                                  int(self.group.wall_clock() * 1000))
                self._work.append(GenerationCompleted(record))
        self._act(self.member.poll(now))

    def _release(self) -> None:
        """The application has stopped what it was handed: send what waited for that."""
        held, self._held, self._holding = self._held, [], False
        for request in held:
            self.group._send(self, request)

    def _act(self, actions: list[Any]) -> None:
        for action in actions:
            match action:
                case Send(request=request):
                    self._recorder.sent(request)
                    if self._holding:
                        self._held.append(request)
                    else:
                        self.group._send(self, request)
                case StopWork(work=work):
                    self._recorder.stopped(work)
                    self._work.append(action)
                    self._holding = True
                case StartWork(work=work):
                    self._recorder.started(work)
                    self._work.append(action)
                case MemberFailed():
                    self._work.append(action)
                case ScheduleTimer():
                    pass  # member.next_deadline() says when
