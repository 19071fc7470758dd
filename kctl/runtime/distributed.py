"""DistributedHerder: one worker of a group that shares connectors and tasks (Kafka's
DistributedHerder).

Workers with the same `group.id` join a group on the Kafka cluster. kctl's `GroupMember`
with the Connect worker's protocol half (`ConnectHandler`) decides who runs what; the
`BrokerGroupDriver` only carries its requests. Configs, statuses and offsets live in
compacted topics, so every worker reads the same state.

One thread does the real work (`_tick`, as Kafka's `tick()`): it polls the group, starts
and stops what the assignment says, reacts to config changes read back from the config
topic, and runs the requests REST threads queue for it. Only the leader writes connector
configs, target states and task configs; a worker that is not the leader answers a write
with `RequestTargetError`, which the REST layer forwards to the leader's URL. Task configs
a non-leader generates go to the leader through the internal endpoint
`POST /connectors/{name}/tasks`, signed with the group's session key under `sessioned`
(KIP-507).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kctl.backoff import Backoff
from kctl.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    RequestTargetError,
)
from kctl.group.assignors.connect import EMPTY, ConnectAssignment, ConnectorsAndTasks
from kctl.group.connect_coordinator import CONNECT_OFFERS, ConnectHandler
from kctl.group.driver import GroupDriver, MemberAction
from kctl.group.history import (
    GenerationCompleted,
    GenerationRecord,
    departure_key,
    record_key,
)
from kctl.group.messages import ErrorCode
from kctl.group.protocol import GroupMember, MemberFailed, MemberState, StartWork, StopWork
from kctl.runtime.abstract_herder import AbstractHerder
from kctl.runtime.herder import Health
from kctl.runtime.inter_worker import LoggerLevelSender, TaskConfigSender
from kctl.runtime.lost_work import LostWork
from kctl.runtime.plugins import Plugins
from kctl.runtime.worker import Worker
from kctl.runtime.worker_config import BOOTSTRAP_SERVERS_CONFIG, WorkerConfig
from kctl.states import ConnectorInfo, ConnectorStatus, State, TargetState, TaskId
from kctl.storage.configs import (
    ConfigBackingStore,
    ConfigEvent,
    ConnectorConfigRemoved,
    ConnectorConfigUpdated,
    RestartRequest,
    RestartRequested,
    SessionKey,
    SessionKeyUpdated,
    TargetStateChanged,
    TaskConfigsUpdated,
)
from kctl.storage.offsets import OffsetBackingStore
from kctl.storage.status import StatusBackingStore
from kctl.transport.base import GenerationWatch

log = logging.getLogger(__name__)

__all__ = ["DistributedHerder", "DriverFactory", "TaskConfigSender"]

SESSION_KEY_ALGORITHM = "HmacSHA256"  # KIP-507's default, what the leader's keys are for
REQUEST_TIMEOUT_S = 90.0  # Kafka's REST request timeout
QUEUED_WAIT_S = 0.8  # a request the herder cannot take up by then is answered 409
RECONFIGURE_BACKOFF_S = 0.25
JOIN_BACKOFF = Backoff(first=0.5, cap=10.0)  # a refused join is retried this often
HISTORY_KEPT = 1000
T = TypeVar("T")

DriverFactory = Callable[[GroupMember[ConnectorsAndTasks]], GroupDriver[ConnectAssignment, ConnectorsAndTasks]]


@dataclass(frozen=True)
class Reconfigure:
    """A connector asked for new task configs (its thread): queued with config events."""

    connector: str


HerderEvent = ConfigEvent | Reconfigure


@dataclass
class _Snapshot:
    """What the ConnectHandler puts in JoinGroup and the leader assigns from: the config
    topic as this worker has read it."""

    configs: ConfigBackingStore

    @property
    def connectors(self) -> Mapping[str, int]:
        return {n: len(self.configs.task_configs(n)) for n in self.configs.connector_names()}

    @property
    def config_offset(self) -> int:
        return self.configs.offset


@dataclass
class _Request(Generic[T]):
    run: Callable[[], T]
    future: Future[T]


class DistributedHerder(AbstractHerder):
    """A worker of a kctl cluster. `driver_factory` builds the group driver for the
    worker's member (the broker's for a process, an in-process one in tests);
    `send_task_configs` carries task configs to the leader."""

    def __init__(self, worker_id: str, plugins: Plugins, config_store: ConfigBackingStore,
                 status_store: StatusBackingStore, offset_store: OffsetBackingStore, *,
                 url: str, worker_config: WorkerConfig, driver_factory: DriverFactory,
                 send_task_configs: TaskConfigSender,
                 set_logger_level: LoggerLevelSender | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 request_timeout_s: float = REQUEST_TIMEOUT_S):
        super().__init__(worker_id, plugins, config_store, status_store, offset_store)
        self.url = url
        self.worker_config = worker_config
        self.protocol = worker_config.get_str("connect.protocol")
        self._driver_factory = driver_factory
        self._send_to_leader, self._set_logger_level = send_task_configs, set_logger_level
        self._clock = clock  # wall time, for records
        self._monotonic = monotonic  # intervals: the join retry and reconfiguration delays
        self._request_timeout_s = request_timeout_s
        self._driver: GroupDriver[ConnectAssignment, ConnectorsAndTasks] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._requests: queue.SimpleQueue[_Request[Any]] = queue.SimpleQueue()
        self._events: queue.SimpleQueue[HerderEvent] = queue.SimpleQueue()
        self._owned: ConnectorsAndTasks = EMPTY
        self._started_configs: dict[TaskId, dict[str, str]] = {}
        self._task_counts: dict[str, int] = {}
        self._reconfigure: dict[str, float] = {}  # connector -> when to try (again)
        self._rejoin: str | None = None
        self._leader_url: str | None = None
        self._lost_work = LostWork(config_store, status_store)
        self._cannot_join: str | None = None  # why the group refused this worker
        self._join_attempts = 0
        self._retry_join_at: float | None = None
        self._stalled: str | None = None
        self._watch: GenerationWatch | None = None  # since when no generation completed
        self.history: deque[GenerationRecord] = deque(maxlen=HISTORY_KEPT)
        self.member: GroupMember[ConnectorsAndTasks] | None = None
        self._handler: ConnectHandler | None = None
        self._forwarder = ThreadPoolExecutor(1, thread_name_prefix="herder-forward")

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, worker: Worker) -> None:
        self.worker = worker
        cfg = self.worker_config
        self._task_counts = dict(_Snapshot(self.configs).connectors)
        self.configs.add_listener(self._on_config_event)
        self._handler = ConnectHandler(self.worker_id, _Snapshot(self.configs), self.protocol,
                                       cfg.get_int("scheduled.rebalance.max.delay.ms"),
                                       url=self.url)
        self.member = GroupMember(self.worker_id, self._handler,
                                  session_timeout_ms=cfg.get_int("session.timeout.ms"),
                                  rebalance_timeout_ms=cfg.get_int("rebalance.timeout.ms"),
                                  heartbeat_interval_ms=cfg.get_int("heartbeat.interval.ms"))
        self._driver = self._driver_factory(self.member)
        self._driver.start()
        self._thread = threading.Thread(target=self._run, name="herder-tick", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._stopping.set()
        if self._driver is not None:
            self._driver.wakeup()
        if self._thread is not None:
            self._thread.join(60)
        self._forwarder.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(ValueError):  # stopped before it started
            self.configs.remove_listener(self._on_config_event)

    @property
    def _d(self) -> GroupDriver[ConnectAssignment, ConnectorsAndTasks]:
        assert self._driver is not None, "herder not started"
        return self._driver

    # -- the herder thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._tick()
            except Exception as e:  # the herder thread must outlive any one failure
                log.error("Herder tick failed: %s", e, exc_info=e)
                self._stopping.wait(0.5)
        try:
            stopped = self._owned
            for action in self._d.leave("worker shutting down"):
                self._on_action(action)
            self._record_departure(stopped)
        except Exception as e:
            log.warning("Leaving the group failed: %s", e)
        finally:
            if self.worker is not None:
                self.worker.stop()
            self._owned = EMPTY
            self._d.close()
            self._fail_requests(ConflictError("The worker is shutting down"))

    def _tick(self) -> None:
        self._apply_events()
        if self._retry_join_at is not None and self._monotonic() >= self._retry_join_at:
            self._retry_join_at = None
            self._rejoin = "retrying to join"
        if self._rejoin is not None:
            reason, self._rejoin = self._rejoin, None
            self._d.request_rejoin(reason)
        busy = self._ready() and (not self._requests.empty() or self._due_reconfigurations())
        wait = 0.0 if busy else 0.2
        if self._retry_join_at is not None:
            wait = min(wait, max(0.0, self._retry_join_at - self._monotonic()))
        for action in self._d.poll(wait):
            self._on_action(action)
        self._watch_group()
        self._apply_events()
        if self._ready():
            self._maybe_rotate_session_key()
            self._run_requests()
            self._run_reconfigurations()

    def _watch_group(self) -> None:
        """No generation for longer than a round takes: say so, join again as a new member."""
        if (m := self.member) is None:
            return
        self._watch = self._watch or GenerationWatch(
            (2 * m.rebalance_timeout_ms + m.session_timeout_ms) / 1000, time.monotonic, time.time)
        waited = self._watch.due(m.state is MemberState.STABLE or bool(self._cannot_join))
        if waited is None:
            if self._stalled is not None and m.state is MemberState.STABLE:
                log.info("Worker completed a generation of its group again")
                self._stalled = None
            return
        if self._stalled is None:
            log.warning("Worker has completed no generation of its group since %s (state %s, "
                        "leader %s); joining as a new member", self._watch.since,
                        m.state.value, m.leader or "none")
        self._stalled = (f"has completed no generation of its group since {self._watch.since} "
                         f"(state {m.state.value}, leader {m.leader or 'none'})")
        for action in getattr(self._d, "rejoin_afresh", lambda _: [])(self._stalled):
            self._on_action(action)

    def _ready(self) -> bool:
        """Requests wait while the group rebalances: the leader and the assignment they
        would act on are about to change."""
        m = self.member
        return (m is not None and m.state is MemberState.STABLE
                and self._d.assignment is not None)

    def _on_action(self, action: MemberAction[ConnectorsAndTasks]) -> None:
        match action:
            case StopWork(work=work):
                self._stop_work(work)
            case StartWork(work=work):
                self._start_work(work)
            case GenerationCompleted(record=record):
                self._generation_completed(record)
            case MemberFailed():
                self._join_failed(action)

    def _join_failed(self, failure: MemberFailed) -> None:
        """Try again with a growing backoff, and say once, in one line, why the worker
        cannot join (the same reason is not logged again at every retry)."""
        group = self.worker_config.get_str("group.id")
        if failure.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
            offers = ", ".join(CONNECT_OFFERS[self.protocol])
            why = (f"cannot join group {group}: its members use a connect.protocol this "
                   f"worker does not offer (connect.protocol={self.protocol} offers {offers}; "
                   "a group takes a member only with a protocol every member supports, "
                   "change connect.protocol one worker at a time)")
        else:
            why = f"cannot join group {group}: {failure.detail or failure.error.name}"
        self._join_attempts += 1
        backoff = JOIN_BACKOFF.delay(self._join_attempts)
        if why != self._cannot_join:
            log.error("%s; retrying every %.0f s at most", why, JOIN_BACKOFF.cap)
        else:
            log.debug("%s; retrying in %.1f s", why, backoff)
        self._cannot_join = why
        self._retry_join_at = self._monotonic() + backoff

    def _generation_completed(self, record: GenerationRecord) -> None:
        if self._cannot_join is not None:
            log.info("Joined group %s after retrying", self.worker_config.get_str("group.id"))
        self._cannot_join, self._join_attempts = None, 0
        assignment = self._d.assignment
        self._leader_url = assignment.leader_url if assignment is not None else None
        self.statuses.put_generation(record_key(record.worker, record.generation),
                                     record.to_json())
        self.history.append(record)
        if record.is_leader:
            self._lost_work.note(record)
        log.info("Joined generation %d (leader %s): assigned %s; revoked %s", record.generation,
                 record.leader, *(str(w)[1:-1] or "nothing" for w in (record.assigned, record.revoked)))

    def _record_departure(self, stopped: ConnectorsAndTasks) -> None:
        """`rebalance history` tells a clean leave from a lost session by this note, and
        counts what the worker stopped as it left (no generation records that)."""
        last = self.history[-1].generation if self.history else -1
        member_id = self.history[-1].member_id if self.history else ""
        self.statuses.put_generation(departure_key(self.worker_id, last), {
            "worker": self.worker_id, "member_id": member_id, "at_ms": int(self._clock() * 1000),
            "generation": last, "reason": "worker shutting down", "stopped": stopped.to_json()})

    # -- requests from REST threads ----------------------------------------------------------
    def _serially(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the herder thread once the group is stable (every write and every
        read that must see the writes before it)."""
        if threading.current_thread() is self._thread:
            return fn()
        if self._stopping.is_set():
            raise ConflictError("The worker is shutting down")
        request: _Request[T] = _Request(fn, Future())
        self._requests.put(request)
        if self._driver is not None:
            self._driver.wakeup()
        try:
            return request.future.result(QUEUED_WAIT_S)
        except FutureTimeout:
            if request.future.cancel():  # not started: say why now rather than hang
                raise ConflictError(self._busy_reason()) from None
        try:
            return request.future.result(self._request_timeout_s)
        except FutureTimeout:
            raise ConflictError("Request timed out: the worker did not finish it within "
                                f"{self._request_timeout_s:g} s") from None

    def _busy_reason(self) -> str:
        """Why a request waited: Kafka's 409 wording, then what the group is doing."""
        m = self.member
        if self._cannot_join is not None:
            why = f"this worker {self._cannot_join}"
        elif m is None or self._driver is None or self._driver.assignment is None:
            why = "this worker has not joined its group yet"
        elif m.state is not MemberState.STABLE:
            why = (f"the worker group is rebalancing (this worker is {m.state.value} after "
                   f"generation {m.last_completed_generation})")
        else:
            why = "this worker is busy starting or stopping connectors and tasks"
        return ("Cannot complete request because of a conflicting operation (e.g. worker "
                f"rebalance): {why}; retry shortly")

    def _run_requests(self) -> None:
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            if not request.future.set_running_or_notify_cancel():
                continue
            try:
                request.future.set_result(request.run())
            except BaseException as e:
                request.future.set_exception(e)

    def _fail_requests(self, error: Exception) -> None:
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            if request.future.set_running_or_notify_cancel():
                request.future.set_exception(error)

    @property
    def sessioned(self) -> bool:
        """Internal requests are signed when the group agreed on `sessioned` (KIP-507), not
        merely when this worker offers it: during a rolling upgrade the group runs the
        protocol every member supports."""
        m = self.member
        negotiated = m.protocol if m is not None and m.protocol else self.protocol
        return negotiated == "sessioned"

    @property
    def is_leader(self) -> bool:
        return self.member is not None and self.member.is_leader

    def require_schema_writer(self) -> None:
        self._require_leader()  # the leader assigns schema ids, as it assigns config offsets

    def _require_leader(self) -> None:
        if self.is_leader:
            return
        if not self._leader_url:
            raise ConflictError("Cannot complete request because of a conflicting operation "
                                "(e.g. worker rebalance)")
        raise RequestTargetError("Cannot complete request because this worker is not the "
                                 "leader", self._leader_url)

    def set_cluster_logger_level(self, name: str, level: str) -> list[str]:
        """KIP-976: the leader sets it on every member (others forward to the leader)."""
        def members() -> list[str]:
            self._require_leader()
            urls = (self._handler.member_urls if self._handler else {}).values()
            return sorted(set(urls) - {self.url})

        others = self._serially(members)
        touched = super().set_cluster_logger_level(name, level)  # a bad level: 400 here
        send = self._set_logger_level
        for url in others if send is not None else ():
            assert send is not None
            send(url, name, level)
        return touched

    # -- config changes, read back from the config topic ----------------------------------
    def _on_config_event(self, event: ConfigEvent) -> None:
        """Called on the config log's thread: queued for the herder thread."""
        self._queue(event)

    def _queue(self, event: HerderEvent) -> None:
        self._events.put(event)
        if self._driver is not None:
            self._driver.wakeup()

    def _apply_events(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            try:
                self._apply(event)
            except Exception as e:
                log.error("Applying the config change %s failed: %s", event, e, exc_info=e)

    def _apply(self, event: HerderEvent) -> None:
        match event:
            case ConnectorConfigUpdated(connector=name):
                self._connector_updated(name)
            case ConnectorConfigRemoved(connector=name):
                self._connector_removed(name)
            case TaskConfigsUpdated(connector=name):
                self._task_configs_updated(name)
            case TargetStateChanged(connector=name):
                self._target_changed(name)
            case RestartRequested(request=request):
                self._restart_requested(request)
            case Reconfigure(connector=name):
                self._reconfigure[name] = 0.0
            case SessionKeyUpdated():
                pass  # read from the store when a request is signed or verified

    def _connector_updated(self, name: str) -> None:
        if name not in self._task_counts:
            self._task_counts[name] = len(self.configs.task_configs(name))
            self._leader_rejoin(f"connector {name} created")
            return
        if name in self._owned.connectors:  # reconfigured: restart it with the new config
            self._w.stop_connector(name)
            self._start_connector(name)

    def _connector_removed(self, name: str) -> None:
        self._task_counts.pop(name, None)
        self._reconfigure.pop(name, None)
        self._stop_tasks([t for t in self._owned.tasks if t.connector == name])
        self._w.stop_connector(name)
        self._leader_rejoin(f"connector {name} deleted")

    def _task_configs_updated(self, name: str) -> None:
        configs = self.configs.task_configs(name)
        if self._task_counts.get(name) != len(configs):
            self._task_counts[name] = len(configs)
            self._leader_rejoin(f"connector {name} reconfigured to {len(configs)} task(s)")
        target = self.configs.target_state(name) or TargetState.STARTED
        for tid in sorted(t for t in self._owned.tasks if t.connector == name):
            if tid.task >= len(configs):
                self._stop_tasks([tid])
            elif configs[tid.task] != self._started_configs.get(tid) and \
                    target is not TargetState.STOPPED:
                self._stop_tasks([tid])
                self._start_task(tid)

    def _target_changed(self, name: str) -> None:
        target = self.configs.target_state(name)
        if target is None:
            return
        tasks = sorted(t for t in self._owned.tasks if t.connector == name)
        if target is TargetState.STOPPED:
            self._stop_tasks(tasks)
            if name in self._owned.connectors:
                self._w.set_connector_target(name, target)
            return
        if name in self._owned.connectors:
            was_running = self._w.is_running(name)
            if name not in self._w.connectors:
                self._start_connector(name)
            else:
                self._w.set_connector_target(name, target)
                if not was_running and target is TargetState.STARTED:
                    self._reconfigure[name] = 0.0
        for tid in tasks:
            self._w.set_task_target(tid, target)

    def _restart_requested(self, request: RestartRequest) -> None:
        name = request.connector
        if self.configs.connector_config(name) is None:
            return
        plan = self._restart_plan(name, request)
        if name in self._owned.connectors and plan.connector:
            self.on_connector_state(name, State.RESTARTING)
            self._w.stop_connector(name)
            self._start_connector(name)
        for tid in sorted(t for t in self._owned.tasks if t.connector == name):
            if tid.task in plan.tasks:
                self.on_task_state(tid, State.RESTARTING)
                self._stop_tasks([tid])
                self._start_task(tid)

    def _leader_rejoin(self, reason: str) -> None:
        """The set of connectors or a task count changed: the leader starts a rebalance so
        the assignment covers it (followers wait for it)."""
        if self.is_leader and self._rejoin is None:
            self._rejoin = reason

    # -- starting and stopping what the assignment says ------------------------------------
    def _catch_up(self) -> None:
        assignment = self._d.assignment
        wanted = assignment.config_offset if assignment is not None else 0
        if self.configs.offset < wanted:
            self.configs.read_to_end()
            self._apply_events()

    def _start_work(self, work: ConnectorsAndTasks) -> None:
        self._catch_up()
        self._owned = self._owned | work
        for name in sorted(work.connectors):
            self._start_connector(name)
        for tid in sorted(work.tasks):
            self._start_task(tid)

    def _stop_work(self, work: ConnectorsAndTasks) -> None:
        self._stop_tasks(sorted(work.tasks))
        for name in sorted(work.connectors):
            self._reconfigure.pop(name, None)
            self._w.stop_connector(name)
        self._owned = self._owned - work

    def _stop_tasks(self, tasks: list[TaskId]) -> None:
        self._w.stop_tasks(tasks)
        for t in tasks:
            self._started_configs.pop(t, None)

    def _start_connector(self, name: str) -> None:
        config = self.configs.connector_config(name)
        if config is None:
            return
        target = self.configs.target_state(name) or TargetState.STARTED
        if self._w.start_connector(name, config, target, self._on_reconfiguration_request) \
                and target is not TargetState.STOPPED:
            self._reconfigure[name] = 0.0

    def _start_task(self, tid: TaskId) -> None:
        config = self.configs.connector_config(tid.connector)
        configs = self.configs.task_configs(tid.connector)
        if config is None or tid.task >= len(configs):
            log.warning("Task %s is assigned but has no config (yet); not started", tid)
            return
        target = self.configs.target_state(tid.connector) or TargetState.STARTED
        if target is TargetState.STOPPED:
            return
        self.on_task_state(tid, State.UNASSIGNED)
        self._started_configs[tid] = configs[tid.task]
        self._w.start_task(tid, config, configs[tid.task], target)

    # -- task configs: generated where the connector runs, written by the leader ----------
    def _on_reconfiguration_request(self, name: str) -> None:
        """A connector asked for new task configs (from its own thread)."""
        self._queue(Reconfigure(name))

    def _due_reconfigurations(self) -> bool:
        now = self._monotonic()
        return any(at <= now for at in self._reconfigure.values())

    def _run_reconfigurations(self) -> None:
        now = self._monotonic()
        for name, at in list(self._reconfigure.items()):
            if at > now:
                continue
            del self._reconfigure[name]
            if name not in self._owned.connectors or not self._w.is_running(name):
                continue
            config = self.configs.connector_config(name)
            if config is None or self.configs.target_state(name) is not TargetState.STARTED:
                continue
            new = self._generate_task_configs(name, config)
            if new is None or new == self.configs.task_configs(name):
                continue
            if self.is_leader:
                self.configs.put_task_configs(name, new)
            elif self._leader_url:
                # not on this thread: the leader may be waiting for this worker to rejoin
                # before it serves the request
                self._forwarder.submit(self._send_task_configs, self._leader_url, name, new)
            else:
                self._reconfigure[name] = now + RECONFIGURE_BACKOFF_S

    def _send_task_configs(self, leader_url: str, name: str, configs: list[dict[str, str]]
                           ) -> None:
        try:
            self._send_to_leader(leader_url, name, configs, self.session_key())
        except Exception as e:
            log.info("Could not hand %s's task configs to the leader (%s); retrying", name, e)
            time.sleep(RECONFIGURE_BACKOFF_S)
            self._queue(Reconfigure(name))

    @property
    def signs_internal_requests(self) -> bool:
        """Internal requests are signed when the group agreed on `sessioned` (KIP-507), not
        merely when this worker offers it: during a rolling upgrade the group runs the
        protocol every member supports."""
        m = self.member
        negotiated = m.protocol if m is not None and m.protocol else self.protocol
        return negotiated == "sessioned"

    def session_key(self) -> SessionKey | None:
        return self.configs.session_key() if self.signs_internal_requests else None

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """The leader takes task configs another worker generated (internal request; REST
        has checked its signature)."""
        def write() -> None:
            self._require_leader()
            if self.configs.connector_config(name) is None:
                raise NotFoundError(f"Connector {name} not found")
            self.configs.put_task_configs(name, configs)

        self._serially(write)

    def _maybe_rotate_session_key(self) -> None:
        """The leader writes a fresh session key when there is none or it has expired."""
        if not self.signs_internal_requests or not self.is_leader:
            return
        key = self.configs.session_key()
        now_ms = int(self._clock() * 1000)
        ttl = self.worker_config.get_int("inter.worker.key.ttl.ms")
        if key is None or now_ms - key.created_ms >= ttl:
            self.configs.put_session_key(SessionKey(os.urandom(32), SESSION_KEY_ALGORITHM,
                                                    now_ms))

    # -- statuses: only for connectors that still exist -----------------------------------
    def _unplaced(self) -> tuple[State, str, str | None]:
        # not this worker's: whichever worker was asked would name itself
        return (State.UNASSIGNED, "", "Not assigned to a worker yet: the group places it in "
                "its next rebalance")

    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        if self.configs.contains(name) or state is State.FAILED:
            super().on_connector_state(name, state, trace)

    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None:
        if self.configs.contains(task.connector):
            super().on_task_state(task, state, trace)

    # -- writes: the leader's ---------------------------------------------------------------
    def create_connector(self, name: str, config: Mapping[str, Any],
                         initial_state: TargetState = TargetState.STARTED) -> ConnectorInfo:
        self._check_name(name)
        validated = self._validated(name, config)

        def write() -> ConnectorInfo:
            self._require_leader()
            if self.configs.connector_config(name) is not None:
                raise AlreadyExistsError(f"Connector {name} already exists")
            self.configs.put_connector_config(name, validated, initial_state)
            return self.connector_info(name)

        return self._serially(write)

    def put_connector_config(self, name: str, config: Mapping[str, Any]
                             ) -> tuple[bool, ConnectorInfo]:
        validated = self._validated(name, self._unmasked(name, config))

        def write() -> tuple[bool, ConnectorInfo]:
            self._require_leader()
            existing = self.configs.connector_config(name)
            if existing != validated:
                self.configs.put_connector_config(
                    name, validated, None if existing is not None else TargetState.STARTED)
            return existing is None, self.connector_info(name)

        return self._serially(write)

    def delete_connector(self, name: str) -> None:
        def write() -> None:
            self._require_leader()
            self._require(name)
            self.configs.remove_connector(name)
            self.statuses.remove_connector(name)

        self._serially(write)

    def _set_target(self, name: str, target: TargetState) -> None:
        def write() -> None:
            self._require_leader()
            self._require(name)
            self.configs.put_target_state(name, target)
            if target is TargetState.STOPPED:
                self.configs.put_task_configs(name, [])
                self.statuses.remove_tasks(name, keep=0)

        self._serially(write)

    def restart_connector(self, name: str, *, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStatus:
        """KIP-745: the leader writes the restart request to the config topic; every worker
        restarts the part it runs. Returns the plan, as the standalone herder does."""
        def write() -> ConnectorStatus:
            self._require_leader()
            request = RestartRequest(name, include_tasks, only_failed)
            plan = self._restart_plan(name, request)
            self.configs.put_restart_request(request)
            return plan.status

        return self._serially(write)

    def restart_task(self, name: str, task: int) -> None:
        """Served by the worker that runs the task: a follower hands the request to the
        leader, which knows every member's advertised URL and forwards it to the owner
        (Kafka's ownerUrl)."""
        def run() -> None:
            self._require(name)
            configs = self.configs.task_configs(name)
            if task >= len(configs):
                raise NotFoundError(f"Task {name}-{task} not found")
            tid = TaskId(name, task)
            if tid in self._owned.tasks:
                self._stop_tasks([tid])
                self._start_task(tid)
                return
            entry = self.statuses.task_state(name, task)
            if entry is None or entry.worker_id == self.worker_id or \
                    entry.state is State.UNASSIGNED:
                raise ConflictError(f"Task {name}-{task} is not running on any worker "
                                    "right now (a rebalance may be in progress)")
            owner_url = self._member_url(entry.worker_id)
            if owner_url is not None:
                raise RequestTargetError(f"Task {name}-{task} runs on {entry.worker_id}",
                                         owner_url)
            self._require_leader()  # the leader knows where it runs
            raise ConflictError(f"Task {name}-{task} runs on {entry.worker_id}, which is not "
                                "a member of this worker's group right now")

        self._serially(run)

    def _member_url(self, worker_id: str) -> str | None:
        """The URL a member of the current generation advertised (known to the leader)."""
        if not self.is_leader or self._handler is None:
            return None
        for client, url in self._handler.member_urls.items():
            # a worker's id is its client id, and (unless worker.id is set) its URL's host:port
            if worker_id in (client, url.split("://", 1)[-1].rstrip("/")):
                return url
        return None

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        def write() -> str:
            self._require_leader()
            self._require_no_tasks(name)
            return super(DistributedHerder, self).alter_connector_offsets(name, offsets)

        return self._serially(write)

    def reset_connector_offsets(self, name: str) -> str:
        def write() -> str:
            self._require_leader()
            self._require_no_tasks(name)
            return super(DistributedHerder, self).reset_connector_offsets(name)

        return self._serially(write)

    def _require_no_tasks(self, name: str) -> None:
        self._require(name)
        if self.configs.target_state(name) is not TargetState.STOPPED or \
                self.configs.task_configs(name):
            raise ConflictError(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint")

    # -- what the REST answers add in a cluster --------------------------------------------
    def health(self) -> Health:
        joined = self._driver is not None and self._driver.assignment is not None
        why = ("is starting or stopping" if self.worker is None or self._stopped else
               self._cannot_join or self._stalled or (None if joined else "has not yet joined its group"))
        return Health("unhealthy", f"Worker {why}") if why else self._running_health()

    def worker_group(self) -> str:
        return self.worker_config.get_str("group.id")

    def group_broker(self) -> tuple[str, Mapping[str, Any]]:
        servers = self.worker_config.get_list(BOOTSTRAP_SERVERS_CONFIG)
        return ",".join(servers), self.worker_config.kafka_security()

    def group_info(self) -> dict[str, Any]:
        """Who leads, which generation, what this worker runs (for status and tests)."""
        m = self.member
        return {"worker_id": self.worker_id, "url": self.url,
                "leader": m.leader if m else None, "leader_url": self._leader_url,
                "generation": m.generation if m else None,
                "state": m.state.value if m else None, "protocol": m.protocol if m else None,
                "owned": self._owned.to_json()}
