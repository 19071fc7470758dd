"""StandaloneHerder: one worker, configs and statuses in durable local stores.

What every herder shares (reads, statuses, validation, offsets, the DLQ, plugins) is in
AbstractHerder; this module adds how one worker runs what each request asks.

Every request runs under one lock, in the caller's thread, like Kafka's StandaloneHerder;
connector-initiated reconfigurations run on a small executor so a connector thread never
re-enters the herder while holding its own locks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kctl.errors import AlreadyExistsError, NotFoundError
from kctl.runtime.abstract_herder import AbstractHerder
from kctl.runtime.plugins import Plugins
from kctl.runtime.worker import Worker
from kctl.states import ConnectorInfo, ConnectorStatus, State, TargetState, TaskId
from kctl.storage.configs import ConfigBackingStore, RestartRequest
from kctl.storage.offsets import OffsetBackingStore
from kctl.storage.status import StatusBackingStore

log = logging.getLogger(__name__)


class StandaloneHerder(AbstractHerder):
    def __init__(self, worker_id: str, plugins: Plugins, config_store: ConfigBackingStore,
                 status_store: StatusBackingStore, offset_store: OffsetBackingStore):
        super().__init__(worker_id, plugins, config_store, status_store, offset_store)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="herder")

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, worker: Worker) -> None:
        """Bring back every stored connector in its target state (running, paused, stopped)."""
        self.worker = worker
        with self._lock:
            for name in sorted(self.configs.connector_names()):
                try:
                    self._start_connector(name, reuse_task_configs=True)
                except Exception as e:  # one broken connector must not stop the others
                    log.error("Could not restore connector %s: %s", name, e, exc_info=e)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self.worker is not None:
                self.worker.stop()
        self._executor.shutdown(wait=True, cancel_futures=True)

    # -- helpers ------------------------------------------------------------------------------
    def _start_connector(self, name: str, *, reuse_task_configs: bool = False) -> None:
        config = self._require(name)
        target = self.configs.target_state(name)
        ok = self._w.start_connector(name, config, target, self._request_reconfiguration)
        if not ok or target is TargetState.STOPPED:
            if target is TargetState.STOPPED:
                self.configs.put_task_configs(name, [])
            return
        task_configs = self.configs.task_configs(name) if reuse_task_configs else None
        if not task_configs:
            task_configs = self._generate_task_configs(name, config)
            if task_configs is None:
                return
            self.configs.put_task_configs(name, task_configs)
        self._start_tasks(name, config, task_configs, target)

    def _start_tasks(self, name: str, config: dict[str, str], task_configs: list[dict[str, str]],
                     target: TargetState) -> None:
        self.statuses.remove_tasks(name, keep=len(task_configs))
        for i, tc in enumerate(task_configs):
            tid = TaskId(name, i)
            self.on_task_state(tid, State.UNASSIGNED)
            self._w.start_task(tid, config, tc, target)

    def _stop_connector_and_tasks(self, name: str) -> None:
        self._w.stop_tasks(self._w.tasks_of(name))
        self._w.stop_connector(name)

    def _request_reconfiguration(self, name: str) -> None:
        def run() -> None:
            with self._lock:
                if self._stopped or not self._w.is_running(name):
                    return
                config = self.configs.connector_config(name)
                if config is None:
                    return
                new = self._generate_task_configs(name, config)
                if new is None or new == self.configs.task_configs(name):
                    return
                log.info("Connector %s reconfigured its tasks (%d task(s))", name, len(new))
                self._w.stop_tasks(self._w.tasks_of(name))
                self.configs.put_task_configs(name, new)
                self._start_tasks(name, config, new, self.configs.target_state(name))

        if not self._stopped:
            self._executor.submit(run)

    # -- writes -------------------------------------------------------------------------------------
    def create_connector(self, name: str, config: Mapping[str, Any],
                         initial_state: TargetState = TargetState.STARTED) -> ConnectorInfo:
        self._check_name(name)
        with self._lock:
            if self.configs.connector_config(name) is not None:
                raise AlreadyExistsError(f"Connector {name} already exists")
            config = self._validated(name, config)
            self.configs.put_connector_config(name, config, initial_state)
            self._start_connector(name)
            return self.connector_info(name)

    def put_connector_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, ConnectorInfo]:
        with self._lock:
            existing = self.configs.connector_config(name)
            if existing is None:
                return True, self.create_connector(name, config)
            new = self._validated(name, self._unmasked(name, config))
            if new == existing:
                return False, self.connector_info(name)
            self._stop_connector_and_tasks(name)
            self.configs.put_connector_config(name, new, self.configs.target_state(name))
            self.configs.put_task_configs(name, [])
            self._start_connector(name)
            return False, self.connector_info(name)

    def restart_connector(self, name: str, *, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStatus:
        """Restart per Kafka's RestartRequest; returns the plan: the status as it was, with
        RESTARTING for every connector and task that is being restarted (Kafka's 202 body)."""
        with self._lock:
            plan = self._restart_plan(name, RestartRequest(name, include_tasks, only_failed))
            restart_tasks = sorted(plan.tasks)
            target = self.configs.target_state(name)
            if plan.connector:
                self.on_connector_state(name, State.RESTARTING)
                if restart_tasks and len(restart_tasks) == len(plan.status.tasks):
                    self._stop_connector_and_tasks(name)
                    for t in restart_tasks:
                        self.on_task_state(TaskId(name, t), State.RESTARTING)
                    self._start_connector(name, reuse_task_configs=True)
                    restart_tasks = []
                else:
                    self._w.stop_connector(name)
                    if self._w.start_connector(name, self._require(name), target,
                                               self._request_reconfiguration) \
                            and target is not TargetState.STOPPED:
                        # as Kafka's herders do on a connector start: the restarted
                        # connector may see a new world (a table that appeared)
                        self._request_reconfiguration(name)
            for t in restart_tasks:
                self.on_task_state(TaskId(name, t), State.RESTARTING)
                self._restart_task(name, t)
            return plan.status

    def _restart_task(self, name: str, task: int) -> None:
        configs = self.configs.task_configs(name)
        if task >= len(configs):
            raise NotFoundError(f"Task {name}-{task} not found")
        tid = TaskId(name, task)
        self._w.stop_tasks([tid])
        self._w.start_task(tid, self._require(name), configs[task], self.configs.target_state(name))

    def restart_task(self, name: str, task: int) -> None:
        with self._lock:
            self._require(name)
            self._restart_task(name, task)

    def _set_target(self, name: str, target: TargetState) -> None:
        with self._lock:
            self._require(name)
            previous = self.configs.target_state(name)
            self.configs.put_target_state(name, target)
            if target is TargetState.STOPPED:
                self._w.stop_tasks(self._w.tasks_of(name))
                self._w.set_connector_target(name, target)
                self.configs.put_task_configs(name, [])
                self.statuses.remove_tasks(name, keep=0)
                return
            if previous is TargetState.STOPPED or not self._w.connectors.get(name):
                self._w.stop_connector(name)
                self._start_connector(name)
                return
            self._w.set_connector_target(name, target)
            for tid in self._w.tasks_of(name):
                self._w.set_task_target(tid, target)

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            self._stop_connector_and_tasks(name)
            self.configs.remove_connector(name)
            self.statuses.remove_connector(name)
