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

import base64
import contextlib
import hashlib
import hmac
import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

from kctl.errors import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    RequestTargetError,
    ValidationError,
)
from kctl.group.assignors.connect import EMPTY, ConnectorsAndTasks
from kctl.group.connect_coordinator import ConnectHandler
from kctl.group.history import (
    GenerationCompleted,
    GenerationRecord,
    departure_key,
    record_key,
)
from kctl.group.protocol import GroupMember, MemberFailed, MemberState, StartWork, StopWork
from kctl.runtime.abstract_herder import AbstractHerder
from kctl.runtime.plugins import Plugins
from kctl.runtime.worker import Worker
from kctl.states import ConnectorInfo, ConnectorStatus, State, TargetState, TaskId
from kctl.storage.configs import ConfigUpdateListener, RestartRequest, SessionKey

log = logging.getLogger(__name__)

__all__ = ["SIGNATURE_ALGORITHM_HEADER", "SIGNATURE_HEADER", "DistributedHerder"]

# KIP-507's headers and algorithm, as Kafka Connect's InternalRequestSignature
SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
SIGNATURE_ALGORITHM = "HmacSHA256"
REQUEST_TIMEOUT_S = 90.0  # Kafka's REST request timeout
RECONFIGURE_BACKOFF_S = 0.25
HISTORY_KEPT = 1000


def sign(key: bytes, body: bytes) -> str:
    return base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()


@dataclass
class _Snapshot:
    """What the ConnectHandler puts in JoinGroup and the leader assigns from: the config
    topic as this worker has read it."""

    herder: DistributedHerder

    @property
    def connectors(self) -> Mapping[str, int]:
        configs = self.herder.configs
        return {name: len(configs.task_configs(name)) for name in configs.connector_names()}

    @property
    def config_offset(self) -> int:
        return int(self.herder.configs.offset)


@dataclass
class _Request:
    run: Callable[[], Any]
    future: Future[Any]


class DistributedHerder(AbstractHerder, ConfigUpdateListener):
    """A worker of a kctl cluster; `group` is a factory for the group driver so tests and
    the process share the wiring (`kctl.launch` builds it on the broker)."""

    def __init__(self, worker_id: str, plugins: Plugins, config_store: Any, status_store: Any,
                 offset_store: Any, *, url: str, worker_config: Any,
                 driver_factory: Callable[[GroupMember[Any]], Any],
                 clock: Callable[[], float] = time.time):
        super().__init__(worker_id, plugins, config_store, status_store, offset_store)
        self.url = url
        self.worker_config = worker_config
        self.protocol = worker_config.get_str("connect.protocol")
        self._driver_factory = driver_factory
        self._clock = clock
        self._driver: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._owned: ConnectorsAndTasks = EMPTY
        self._started_configs: dict[TaskId, dict[str, str]] = {}
        self._task_counts: dict[str, int] = {}
        self._reconfigure: dict[str, float] = {}  # connector -> when to try (again)
        self._rejoin: str | None = None
        self._leader_url: str | None = None
        self.history: deque[GenerationRecord] = deque(maxlen=HISTORY_KEPT)
        self.member: GroupMember[Any] | None = None
        self._forwarder = ThreadPoolExecutor(1, thread_name_prefix="herder-forward")

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, worker: Worker) -> None:
        self.worker = worker
        cfg = self.worker_config
        self._task_counts = dict(_Snapshot(self).connectors)
        self.configs.add_listener(self)
        handler = ConnectHandler(self.worker_id, _Snapshot(self), self.protocol,
                                 cfg.get_int("scheduled.rebalance.max.delay.ms"), url=self.url)
        self.member = GroupMember(self.worker_id, handler,
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
        with contextlib.suppress(ValueError):
            self.configs.remove_listener(self)

    # -- the herder thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._tick()
            except Exception as e:  # the herder thread must outlive any one failure
                log.error("Herder tick failed: %s", e, exc_info=e)
                self._stopping.wait(0.5)
        try:
            for action in self._driver.leave("worker shutting down"):
                self._on_action(action)
            self._record_departure()
        except Exception as e:
            log.warning("Leaving the group failed: %s", e)
        finally:
            if self.worker is not None:
                self.worker.stop()
            self._owned = EMPTY
            self._driver.close()
            self._fail_requests(ConflictError("The worker is shutting down"))

    def _tick(self) -> None:
        self._apply_config_events()
        if self._rejoin is not None:
            reason, self._rejoin = self._rejoin, None
            self._driver.request_rejoin(reason)
        busy = self._ready() and (not self._requests.empty() or self._due_reconfigurations())
        for action in self._driver.poll(0.0 if busy else 0.2):
            self._on_action(action)
        self._apply_config_events()
        if self._ready():
            self._maybe_rotate_session_key()
            self._run_requests()
            self._run_reconfigurations()

    def _ready(self) -> bool:
        """Requests wait while the group rebalances: the leader and the assignment they
        would act on are about to change."""
        m = self.member
        return (m is not None and m.state is MemberState.STABLE
                and self._driver.assignment is not None)

    def _on_action(self, action: Any) -> None:
        if isinstance(action, StopWork):
            self._stop_work(action.work)
        elif isinstance(action, StartWork):
            self._start_work(action.work)
        elif isinstance(action, GenerationCompleted):
            self._generation_completed(action.record)
        elif isinstance(action, MemberFailed):
            log.error("Group membership failed (%s); rejoining", action)
            self._rejoin = "member failed"

    def _generation_completed(self, record: GenerationRecord) -> None:
        assignment = self._driver.assignment
        self._leader_url = assignment.leader_url if assignment is not None else None
        self.statuses.put_generation(record_key(record.worker, record.generation),
                                     record.to_json())
        self.history.append(record)
        log.info("Joined generation %d (leader %s): assigned %s, revoked %s", record.generation,
                 record.leader, record.assigned.to_json(), record.revoked.to_json())

    def _record_departure(self) -> None:
        """`rebalance history` tells a clean leave from a lost session by this note."""
        last = self.history[-1].generation if self.history else -1
        self.statuses.put_generation(departure_key(self.worker_id), {
            "worker": self.worker_id, "at_ms": int(self._clock() * 1000),
            "generation": last, "reason": "worker shutting down"})

    # -- requests from REST threads ----------------------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        if self._stopping.is_set():
            raise ConflictError("The worker is shutting down")
        request = _Request(fn, Future())
        self._requests.put(request)
        if self._driver is not None:
            self._driver.wakeup()
        try:
            return request.future.result(REQUEST_TIMEOUT_S)
        except FutureTimeout:
            raise ConflictError("Request timed out: the worker group did not settle within "
                                f"{REQUEST_TIMEOUT_S:.0f} s (a rebalance is in progress)") from None

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
    def is_leader(self) -> bool:
        return self.member is not None and self.member.is_leader

    def _require_leader(self) -> None:
        if self.is_leader:
            return
        if not self._leader_url:
            raise ConflictError("Cannot complete request because of a conflicting operation "
                                "(e.g. worker rebalance)")
        raise RequestTargetError("Cannot complete request because this worker is not the "
                                 "leader", self._leader_url)

    # -- config changes, read back from the config topic ----------------------------------
    # (called on the config log's thread: queue them for the herder thread)
    def on_connector_config_update(self, connector: str) -> None:
        self._event("connector", connector)

    def on_connector_config_remove(self, connector: str) -> None:
        self._event("remove", connector)

    def on_task_config_update(self, connector: str, tasks: Any) -> None:
        self._event("tasks", connector)

    def on_connector_target_state_change(self, connector: str) -> None:
        self._event("target", connector)

    def on_restart_request(self, request: RestartRequest) -> None:
        self._event("restart", request)

    def _event(self, kind: str, arg: Any) -> None:
        self._events.put((kind, arg))
        if self._driver is not None:
            self._driver.wakeup()

    def _apply_config_events(self) -> None:
        while True:
            try:
                kind, arg = self._events.get_nowait()
            except queue.Empty:
                return
            try:
                getattr(self, f"_on_{kind}")(arg)
            except Exception as e:
                log.error("Applying the config change %s %s failed: %s", kind, arg, e,
                          exc_info=e)

    def _on_connector(self, name: str) -> None:
        if name not in self._task_counts:
            self._task_counts[name] = len(self.configs.task_configs(name))
            self._leader_rejoin(f"connector {name} created")
            return
        if name in self._owned.connectors:  # reconfigured: restart it with the new config
            self._w.stop_connector(name)
            self._start_connector(name)

    def _on_remove(self, name: str) -> None:
        self._task_counts.pop(name, None)
        self._reconfigure.pop(name, None)
        tasks = [t for t in self._owned.tasks if t.connector == name]
        self._w.stop_tasks(tasks)
        for t in tasks:
            self._started_configs.pop(t, None)
        self._w.stop_connector(name)
        self._leader_rejoin(f"connector {name} deleted")

    def _on_tasks(self, name: str) -> None:
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

    def _on_target(self, name: str) -> None:
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

    def _on_restart(self, request: RestartRequest) -> None:
        name = request.connector
        config = self.configs.connector_config(name)
        if config is None:
            return
        status = self.connector_status(name)
        if name in self._owned.connectors and (
                not request.only_failed or status.state is State.FAILED):
            self.on_connector_state(name, State.RESTARTING)
            self._w.stop_connector(name)
            self._start_connector(name)
        if request.include_tasks:
            failed = {t.task for t in status.tasks if t.state is State.FAILED}
            for tid in sorted(t for t in self._owned.tasks if t.connector == name):
                if not request.only_failed or tid.task in failed:
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
        assignment = self._driver.assignment
        wanted = assignment.config_offset if assignment is not None else 0
        if self.configs.offset < wanted:
            self.configs.read_to_end()
            self._apply_config_events()

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
        self._event("reconfigure", name)

    def _on_reconfigure(self, name: str) -> None:
        self._reconfigure[name] = 0.0

    def _due_reconfigurations(self) -> bool:
        now = time.monotonic()
        return any(at <= now for at in self._reconfigure.values())

    def _run_reconfigurations(self) -> None:
        now = time.monotonic()
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
            self._post_task_configs(leader_url, name, configs)
        except Exception as e:
            log.info("Could not hand %s's task configs to the leader (%s); retrying", name, e)
            time.sleep(RECONFIGURE_BACKOFF_S)
            self._event("reconfigure", name)

    def _post_task_configs(self, leader_url: str, name: str, configs: list[dict[str, str]]
                           ) -> None:
        import httpx

        body = json.dumps(configs).encode()
        headers = {"Content-Type": "application/json"}
        key = self.configs.session_key()
        if self.protocol == "sessioned" and key is not None:
            headers[SIGNATURE_HEADER] = sign(key.key, body)
            headers[SIGNATURE_ALGORITHM_HEADER] = SIGNATURE_ALGORITHM
        from urllib.parse import quote

        url = f"{leader_url.rstrip('/')}/connectors/{quote(name, safe='')}/tasks"
        answer = httpx.post(url, content=body, headers=headers, params={"forward": "false"},
                            timeout=30)
        if answer.status_code >= 300:
            raise ConflictError(f"leader answered {answer.status_code}: {answer.text[:200]}")

    def put_task_configs(self, name: str, configs: list[dict[str, str]],
                         headers: Mapping[str, str], body: bytes) -> None:
        """The leader takes task configs another worker generated (internal request)."""
        self._verify(body, {k.lower(): v for k, v in headers.items()})

        def write() -> None:
            self._require_leader()
            if self.configs.connector_config(name) is None:
                raise NotFoundError(f"Connector {name} not found")
            self.configs.put_task_configs(name, configs)

        self._call(write)

    def _verify(self, body: bytes, signature: Mapping[str, str]) -> None:
        if self.protocol != "sessioned":
            return
        key = self.configs.session_key()
        given = signature.get(SIGNATURE_HEADER.lower())
        if given is None:
            raise ForbiddenError("Internal request missing required signature")
        algorithm = signature.get(SIGNATURE_ALGORITHM_HEADER.lower(), SIGNATURE_ALGORITHM)
        if algorithm != SIGNATURE_ALGORITHM:
            raise ForbiddenError(f"Internal request signature algorithm {algorithm} is not "
                                 f"supported (expected {SIGNATURE_ALGORITHM})")
        if key is None or not hmac.compare_digest(sign(key.key, body), given):
            raise ForbiddenError("Internal request contained invalid signature.")

    def _maybe_rotate_session_key(self) -> None:
        """The leader writes a fresh session key when there is none or it has expired."""
        if self.protocol != "sessioned" or not self.is_leader:
            return
        key = self.configs.session_key()
        now_ms = int(self._clock() * 1000)
        ttl = self.worker_config.get_int("inter.worker.key.ttl.ms")
        if key is None or now_ms - key.created_ms >= ttl:
            self.configs.put_session_key(SessionKey(os.urandom(32), SIGNATURE_ALGORITHM, now_ms))

    # -- statuses: only for connectors that still exist -----------------------------------
    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        if self.configs.contains(name) or state is State.FAILED:
            super().on_connector_state(name, state, trace)

    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None:
        if self.configs.contains(task.connector):
            super().on_task_state(task, state, trace)

    # -- writes: the leader's ---------------------------------------------------------------
    def create_connector(self, name: str, config: Mapping[str, Any],
                         initial_state: TargetState = TargetState.STARTED) -> ConnectorInfo:
        if not name or "/" in name:
            raise ValidationError("Connector name must be non-empty and contain no '/'",
                                  {"name": ["invalid connector name"]})
        validated = self._validated(name, config)

        def write() -> ConnectorInfo:
            self._require_leader()
            if self.configs.connector_config(name) is not None:
                raise AlreadyExistsError(f"Connector {name} already exists")
            self.configs.put_connector_config(name, validated, initial_state)
            return self.connector_info(name)

        return self._call(write)

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

        return self._call(write)

    def patch_connector_config(self, name: str, patch: Mapping[str, Any | None]) -> ConnectorInfo:
        merged: dict[str, Any] = dict(self._require(name))
        for k, v in patch.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        return self.put_connector_config(name, merged)[1]

    def delete_connector(self, name: str) -> None:
        def write() -> None:
            self._require_leader()
            self._require(name)
            self.configs.remove_connector(name)
            self.statuses.remove_connector(name)

        self._call(write)

    def _set_target(self, name: str, target: TargetState) -> None:
        def write() -> None:
            self._require_leader()
            self._require(name)
            self.configs.put_target_state(name, target)
            if target is TargetState.STOPPED:
                self.configs.put_task_configs(name, [])
                self.statuses.remove_tasks(name, keep=0)

        self._call(write)

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STOPPED)

    def restart_connector(self, name: str, *, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStatus:
        """KIP-745: the leader writes the restart request to the config topic; every worker
        restarts the part it runs. Returns the plan, as the standalone herder does."""
        def write() -> ConnectorStatus:
            self._require_leader()
            status = self.connector_status(name)
            restart_conn = not only_failed or status.state is State.FAILED
            restart_tasks = {t.task for t in status.tasks
                             if include_tasks and (not only_failed or t.state is State.FAILED)}
            self.configs.put_restart_request(RestartRequest(name, include_tasks, only_failed))
            return replace(
                status, state=State.RESTARTING if restart_conn else status.state,
                tasks=tuple(replace(t, state=State.RESTARTING, trace=None)
                            if t.task in restart_tasks else t for t in status.tasks),
                trace=None if restart_conn else status.trace)

        return self._call(write)

    def restart_task(self, name: str, task: int) -> None:
        """Served by the worker that runs the task (forwarded there, as Kafka does)."""
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
            if entry is None or entry.worker_id == self.worker_id or entry.state is \
                    State.UNASSIGNED:
                raise ConflictError(f"Task {name}-{task} is not running on any worker "
                                    "right now (a rebalance may be in progress)")
            raise RequestTargetError(f"Task {name}-{task} runs on {entry.worker_id}",
                                     f"http://{entry.worker_id}")

        self._call(run)

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        def write() -> str:
            self._require_leader()
            self._require_no_tasks(name)
            return super(DistributedHerder, self).alter_connector_offsets(name, offsets)

        return self._call(write)

    def reset_connector_offsets(self, name: str) -> str:
        def write() -> str:
            self._require_leader()
            self._require_no_tasks(name)
            return super(DistributedHerder, self).reset_connector_offsets(name)

        return self._call(write)

    def _require_no_tasks(self, name: str) -> None:
        self._require(name)
        if self.configs.target_state(name) is not TargetState.STOPPED or \
                self.configs.task_configs(name):
            raise ConflictError(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint")

    # -- what the REST answers add in a cluster --------------------------------------------
    def healthy(self) -> tuple[bool, str]:
        if self.worker is None or self._stopped:
            return False, "Worker is starting or stopping"
        if self._driver is None or self._driver.assignment is None:
            return False, "Worker has not yet joined its group"
        return True, "Worker has completed startup and is ready to handle requests."

    def group_info(self) -> dict[str, Any]:
        """Who leads, which generation, what this worker runs (for status and tests)."""
        m = self.member
        return {"worker_id": self.worker_id, "url": self.url,
                "leader": m.leader if m else None, "leader_url": self._leader_url,
                "generation": m.generation if m else None,
                "state": m.state.value if m else None, "protocol": m.protocol if m else None,
                "owned": self._owned.to_json()}
