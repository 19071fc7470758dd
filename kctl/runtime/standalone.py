"""StandaloneHerder: one worker, configs and statuses in durable local stores.

Every request runs under one lock, in the caller's thread, like Kafka's StandaloneHerder;
connector-initiated reconfigurations run on a small executor so a connector thread never
re-enters the herder while holding its own locks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kctl import __version__
from kctl.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    NotFoundError,
    PluginError,
    ValidationError,
)
from kctl.runtime import connector_config as cc
from kctl.runtime.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    DLQ_TOPIC_NAME_CONFIG,
    TASKS_MAX_CONFIG,
)
from kctl.runtime.herder import Herder
from kctl.runtime.plugins import Plugins
from kctl.runtime.validation import plugin_config_keys, raise_if_invalid, validate_config
from kctl.runtime.worker import ConnectorListener, Worker
from kctl.runtime.worker_config import BOOTSTRAP_SERVERS_CONFIG

if TYPE_CHECKING:
    from kctl.runtime.dlq import ReplayReport
from kctl.states import (
    ConnectorInfo,
    ConnectorStatus,
    ConnectorType,
    PluginInfo,
    State,
    TargetState,
    TaskId,
    TaskStatus,
)

log = logging.getLogger(__name__)


class StandaloneHerder(Herder, ConnectorListener):
    def __init__(self, worker_id: str, plugins: Plugins, config_store: Any, status_store: Any,
                 offset_store: Any):
        self.worker_id = worker_id
        self.registry = plugins
        self.configs = config_store
        self.statuses = status_store
        self.offsets = offset_store
        self.worker: Worker | None = None
        self._lock = threading.RLock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="herder")
        self._stopped = False

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

    @property
    def _w(self) -> Worker:
        assert self.worker is not None, "herder not started"
        return self.worker

    # -- status listener (task and connector threads) ---------------------------------------
    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        if self._stopped and state is not State.FAILED:
            return
        self.statuses.put_connector_state(name, state, self.worker_id, trace)

    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None:
        if self._stopped and state not in (State.FAILED,):
            return
        self.statuses.put_task_state(task.connector, task.task, state, self.worker_id, trace)

    def on_topic_used(self, connector: str, topic: str) -> None:
        self.statuses.put_topic(connector, topic)

    # -- helpers ------------------------------------------------------------------------------
    def _require(self, name: str) -> dict[str, str]:
        config = self.configs.connector_config(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _type(self, config: Mapping[str, str]) -> ConnectorType:
        try:
            return self.registry.connector_plugin(config.get(CONNECTOR_CLASS_CONFIG, "")).type
        except Exception:
            return ConnectorType.UNKNOWN

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

    def _generate_task_configs(self, name: str, config: Mapping[str, str]) -> list[dict[str, str]] | None:
        try:
            return self._w.connector_task_configs(name, int(config.get(TASKS_MAX_CONFIG, "1")))
        except Exception as e:
            import traceback

            log.error("Connector %s failed to generate task configs: %s", name, e)
            self.on_connector_state(name, State.FAILED, "".join(traceback.format_exception(e)))
            return None

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

    # -- Herder API -----------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        return sorted(self.configs.connector_names())

    def connector_info(self, name: str) -> ConnectorInfo:
        config = self._require(name)
        n = len(self.configs.task_configs(name))
        return ConnectorInfo(name, dict(config), tuple(range(n)), self._type(config))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._require(name))

    def _validated(self, name: str, config: Mapping[str, Any]) -> dict[str, str]:
        config = cc.as_strings(config)
        if "name" in config and config["name"] != name:
            raise ValidationError(
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})", {"name": ["does not match the connector name"]})
        config["name"] = name
        raise_if_invalid(validate_config(self.registry, config))
        return config

    def create_connector(self, name: str, config: Mapping[str, Any],
                         initial_state: TargetState = TargetState.STARTED) -> ConnectorInfo:
        if not name or "/" in name:
            raise ValidationError("Connector name must be non-empty and contain no '/'",
                                  {"name": ["invalid connector name"]})
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
            new = self._validated(name, config)
            if new == existing:
                return False, self.connector_info(name)
            self._stop_connector_and_tasks(name)
            self.configs.put_connector_config(name, new, self.configs.target_state(name))
            self.configs.put_task_configs(name, [])
            self._start_connector(name)
            return False, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, Any | None]) -> ConnectorInfo:
        with self._lock:
            merged: dict[str, Any] = dict(self._require(name))
            for k, v in patch.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            return self.put_connector_config(name, merged)[1]

    def connector_status(self, name: str) -> ConnectorStatus:
        config = self._require(name)
        conn = self.statuses.connector_state(name)
        state, worker, trace = conn if conn else (State.UNASSIGNED, self.worker_id, None)
        n = len(self.configs.task_configs(name))
        tasks = []
        for i in range(n):
            ts = self.statuses.task_state(name, i)
            s, w, t = ts if ts else (State.UNASSIGNED, self.worker_id, None)
            tasks.append(TaskStatus(name, i, s, w, t))
        return ConnectorStatus(name, state, worker, self._type(config), tuple(tasks), trace)

    def task_configs(self, name: str) -> list[dict[str, str]]:
        self._require(name)
        return [dict(c) for c in self.configs.task_configs(name)]

    def task_status(self, name: str, task: int) -> TaskStatus:
        status = self.connector_status(name)
        for t in status.tasks:
            if t.task == task:
                return t
        raise NotFoundError(f"Task {name}-{task} not found")

    def restart_connector(self, name: str, *, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStatus:
        """Restart per Kafka's RestartRequest; returns the plan: the status as it was, with
        RESTARTING for every connector and task that is being restarted (Kafka's 202 body)."""
        with self._lock:
            status = self.connector_status(name)
            restart_conn = not only_failed or status.state is State.FAILED
            restart_tasks = [t.task for t in status.tasks
                             if include_tasks and (not only_failed or t.state is State.FAILED)]
            plan = replace(
                status, state=State.RESTARTING if restart_conn else status.state,
                tasks=tuple(replace(t, state=State.RESTARTING, trace=None)
                            if t.task in restart_tasks else t for t in status.tasks),
                trace=None if restart_conn else status.trace)
            target = self.configs.target_state(name)
            if restart_conn:
                self.on_connector_state(name, State.RESTARTING)
                if restart_tasks and len(restart_tasks) == len(status.tasks):
                    self._stop_connector_and_tasks(name)
                    for t in restart_tasks:
                        self.on_task_state(TaskId(name, t), State.RESTARTING)
                    self._start_connector(name, reuse_task_configs=True)
                    restart_tasks = []
                else:
                    self._w.stop_connector(name)
                    self._w.start_connector(name, self._require(name), target,
                                            self._request_reconfiguration)
            for t in restart_tasks:
                self.on_task_state(TaskId(name, t), State.RESTARTING)
                self._restart_task(name, t)
            return plan

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

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STOPPED)

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            self._stop_connector_and_tasks(name)
            self.configs.remove_connector(name)
            self.statuses.remove_connector(name)

    # -- offsets ---------------------------------------------------------------------------------
    def _is_sink(self, config: Mapping[str, str]) -> bool:
        return self._type(config) is ConnectorType.SINK

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        config = self._require(name)
        if self._is_sink(config):
            return self._sink_offsets(name)
        from kctl.runtime.source_positions import POSITION_KEY
        from kctl.storage.offsets import list_connector_offsets

        return [{"partition": dict(p), "offset": dict(o) if o is not None else None}
                for p, o in list_connector_offsets(self.offsets, name)
                if POSITION_KEY not in p and o is not None]

    def _sink_offsets(self, name: str) -> list[dict[str, Any]]:
        transport = self._w.transport
        topics = transport.admin().list_topics()
        consumer = transport.consumer(f"connect-{name}", {"kctl.passive": "true"})
        try:
            from kctl.api.records import TopicPartition

            tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
            committed = consumer.committed(tps)
        finally:
            consumer.close()
        return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                 "offset": {"kafka_offset": off}}
                for tp, off in sorted(committed.items()) if off is not None]

    def _require_stopped(self, name: str) -> Mapping[str, str]:
        config = self._require(name)
        if self.configs.target_state(name) is not TargetState.STOPPED or self._w.tasks_of(name):
            raise ConflictError(
                f"Connectors must be in the STOPPED state before their offsets can be modified. "
                f"This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint")
        return config

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        with self._lock:
            config = self._require_stopped(name)
            if not offsets:
                raise ValidationError("The offsets to be altered may not be empty",
                                      {"offsets": ["may not be empty"]})
            if self._is_sink(config):
                self._alter_sink_offsets(name, offsets)
            else:
                from kctl.storage.offsets import OffsetStorageWriter

                writer = OffsetStorageWriter(self.offsets, name)
                for entry in offsets:
                    if not isinstance(entry.get("partition"), dict):
                        raise ValidationError("Each offset entry needs a 'partition' object",
                                              {"offsets": ["missing partition"]})
                    writer.offset(entry["partition"], entry.get("offset"))
                if writer.begin_flush():
                    writer.do_flush().result(10)
            return "The offsets for this connector have been altered successfully"

    def _alter_sink_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        from kctl.api.records import TopicPartition

        to_commit: dict[TopicPartition, int] = {}
        for entry in offsets:
            p, o = entry.get("partition") or {}, entry.get("offset") or {}
            try:
                tp = TopicPartition(str(p["kafka_topic"]), int(p["kafka_partition"]))
                to_commit[tp] = int(o["kafka_offset"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValidationError(
                    "Sink offsets need partition {kafka_topic, kafka_partition} and offset "
                    "{kafka_offset}", {"offsets": [str(e)]}) from e
        consumer = self._w.transport.consumer(f"connect-{name}", {"kctl.passive": "true"})
        try:
            consumer.commit(to_commit)
        finally:
            consumer.close()

    def reset_connector_offsets(self, name: str) -> str:
        with self._lock:
            config = self._require_stopped(name)
            if self._is_sink(config):
                admin = self._w.transport.admin()
                from kctl.api.records import TopicPartition

                tps = [TopicPartition(t, p) for t, n in admin.list_topics().items() for p in range(n)]
                admin.delete_group_offsets(f"connect-{name}", tps)
            else:
                from kctl.storage.offsets import OffsetStorageWriter, list_connector_offsets

                writer = OffsetStorageWriter(self.offsets, name)
                for p, _ in list_connector_offsets(self.offsets, name):
                    writer.offset(p, None)
                if writer.begin_flush():
                    writer.do_flush().result(10)
            return "The offsets for this connector have been reset successfully"

    def connector_topics(self, name: str) -> list[str]:
        self._require(name)
        return sorted(self.statuses.topics(name))

    def reset_connector_topics(self, name: str) -> None:
        self._require(name)
        self.statuses.reset_topics(name)

    # -- dead letter queue (kctl extension) ------------------------------------------------------
    def _dlq_topic(self, name: str) -> str:
        topic = self._require(name).get(DLQ_TOPIC_NAME_CONFIG, "")
        if not topic:
            raise NotFoundError(f"Connector {name} has no dead letter queue "
                                "(errors.deadletterqueue.topic.name is not set)")
        return topic

    def dlq_records(self, name: str, limit: int = 1000) -> list[dict[str, Any]]:
        from kctl.runtime.dlq import describe, purge_group, read_topic, start_offsets

        topic = self._dlq_topic(name)
        transport = self._w.transport
        start = start_offsets(transport, topic, purge_group(name))
        return [describe(r) for r in read_topic(transport, topic, limit=limit, start=start)]

    def dlq_replay(self, name: str, to_topic: str | None = None) -> ReplayReport:
        from kctl.runtime.dlq import purge_group, read_topic, replay, start_offsets

        topic = self._dlq_topic(name)
        config = self._require(name)
        transport = self._w.transport
        records = read_topic(transport, topic,
                             start=start_offsets(transport, topic, purge_group(name)))
        is_source = not self._is_sink(config)
        return replay(records, transport, to_topic=to_topic, is_source=is_source,
                      resend_source=self._w.source_replayer(config))

    def dlq_purge(self, name: str) -> int:
        from kctl.runtime.dlq import purge, purge_group

        return purge(self._w.transport, self._dlq_topic(name), purge_group(name))

    # -- plugins ----------------------------------------------------------------------------------
    def plugins(self, connectors_only: bool = True) -> list[PluginInfo]:
        if connectors_only:
            return [p.info() for p in self.registry.connectors()]
        return self.registry.all_plugins()

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        try:
            _, cls = self.registry.any_plugin(plugin)
            instance = cls()
        except PluginError as e:
            raise NotFoundError(str(e)) from e
        return plugin_config_keys(instance)

    def validate_connector_config(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        cfg = dict(config)
        included = cfg.get(CONNECTOR_CLASS_CONFIG)
        if included is not None and not self._same_connector(str(included), plugin):
            raise ConfigError(f"Included connector type {included} does not match request "
                              f"type {plugin}", key=CONNECTOR_CLASS_CONFIG)
        cfg.setdefault(CONNECTOR_CLASS_CONFIG, plugin)
        return validate_config(self.registry, cfg)

    def _same_connector(self, included: str, plugin: str) -> bool:
        """Both names resolve to one plugin, or (unresolvable) Kafka's rule: the included
        class name ends with the URL's, either without a trailing "Connector"."""
        try:
            return self.registry.connector_plugin(included) is \
                self.registry.connector_plugin(plugin)
        except PluginError:
            def norm(n: str) -> str:
                return n.removesuffix("Connector")

            return norm(included).endswith(norm(plugin))

    def worker_info(self) -> dict[str, Any]:
        return {"version": __version__, "commit": "kctl", "kafka_cluster_id": self._cluster_id()}

    def _cluster_id(self) -> str:
        return getattr(self._w.transport, "cluster_id", "embedded") if self.worker else "embedded"

    def healthy(self) -> tuple[bool, str]:
        if self.worker is None or self._stopped:
            return False, "Worker is starting or stopping"
        return True, "Worker has completed startup and is ready to handle requests."


# -- the `kctl worker start` entry point ---------------------------------------------------------


def build_stores(state_dir: Any) -> tuple[Any, Any, Any]:
    from kctl.storage.configs import FileConfigBackingStore
    from kctl.storage.offsets import FileOffsetBackingStore
    from kctl.storage.status import FileStatusBackingStore

    offsets = FileOffsetBackingStore(state_dir / "offsets.json")
    configs = FileConfigBackingStore(state_dir / "configs.json")
    statuses = FileStatusBackingStore(state_dir / "status.json")
    for s in (offsets, configs, statuses):
        s.start()
    return offsets, configs, statuses


def build_transport(config: Any) -> Any:
    if config.embedded:
        from kctl.transport.embedded import EmbeddedTransport

        # sink groups default to cooperative-sticky, as on the Kafka transport: a sink task
        # joining or leaving moves only the partitions that must move
        return EmbeddedTransport(config.state_dir, fsync=config.get_bool("log.fsync"),
                                 assignment_strategy="cooperative-sticky")
    from kctl.transport.kafka import KafkaTransport

    return KafkaTransport(config.get_list(BOOTSTRAP_SERVERS_CONFIG),
                          admin_config=config.with_prefix("admin."))
