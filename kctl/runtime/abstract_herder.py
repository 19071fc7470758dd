"""AbstractHerder: what every herder does the same way, whatever runs the connectors.

Reads from the shared stores (configs, statuses, offsets), the status listener the worker
reports to, validation, the offsets API, topics, the dead letter queue and plugins, as
Kafka's AbstractHerder. A herder adds how connectors and tasks come to run: one worker
doing what each request says (StandaloneHerder), or a group of workers doing what their
assignment says (a distributed herder).
"""
from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from kctl import __version__
from kctl.errors import (
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
)
from kctl.runtime.herder import READY, Health, Herder
from kctl.runtime.loggers import Loggers
from kctl.runtime.plugins import Plugins
from kctl.runtime.secrets import REDACTOR, mask, register_secrets, restore_hidden
from kctl.runtime.validation import plugin_config_keys, raise_if_invalid, validate_config
from kctl.runtime.worker import ConnectorListener, Worker
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
from kctl.storage.configs import ConfigBackingStore, RestartRequest, SessionKey
from kctl.storage.offsets import OffsetBackingStore
from kctl.storage.status import StatusBackingStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kctl.runtime.dlq import ReplayReport
    from kctl.runtime.groups import Groups
    from kctl.runtime.registry import SchemaRegistry
    from kctl.runtime.topics import Decoders, ReadRequest

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RestartPlan:
    """What a restart request restarts (Kafka's RestartPlan): the connector or not, which
    tasks, and the status REST answers with (RESTARTING for each of them)."""

    status: ConnectorStatus
    connector: bool
    tasks: frozenset[int]


def merge_patch(config: Mapping[str, Any], patch: Mapping[str, Any | None]) -> dict[str, Any]:
    """PATCH /connectors/{name}/config: a None value removes the key."""
    merged: dict[str, Any] = dict(config)
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return merged


class AbstractHerder(Herder, ConnectorListener):
    def __init__(self, worker_id: str, plugins: Plugins, config_store: ConfigBackingStore,
                 status_store: StatusBackingStore, offset_store: OffsetBackingStore):
        self.worker_id = worker_id
        self.registry = plugins
        self.configs = config_store
        self.statuses = status_store
        self.offsets = offset_store
        self.worker: Worker | None = None
        # the worker's Schema Registry (schema.registry.enable), served by REST
        self.schema_registry: SchemaRegistry | None = None
        self.loggers = Loggers()  # /admin/loggers of this worker
        self._lock = threading.RLock()
        self._stopped = False
        self._metrics: CollectorRegistry | None = None

    def require_schema_writer(self) -> None:
        """Raise unless this worker may write to the Schema Registry (it is the group's
        leader, or standalone)."""

    @property
    def _w(self) -> Worker:
        assert self.worker is not None, "herder not started"
        return self.worker

    # -- status listener (task and connector threads) ---------------------------------------
    # Traces are redacted here, the one door to the status store: a connector or a library
    # may put a password in an exception message, and statuses are shown by REST and CLI.
    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        if self._stopped and state is not State.FAILED:
            return
        self.statuses.put_connector_state(name, state, self.worker_id,
                                          REDACTOR.redact(trace) if trace else trace)

    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None:
        if self._stopped and state not in (State.FAILED,):
            return
        self.statuses.put_task_state(task.connector, task.task, state, self.worker_id,
                                     REDACTOR.redact(trace) if trace else trace)

    def on_topic_used(self, connector: str, topic: str) -> None:
        self.statuses.put_topic(connector, topic)

    # -- helpers ------------------------------------------------------------------------------
    def _require(self, name: str) -> dict[str, str]:
        config = self.configs.connector_config(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _generate_task_configs(self, name: str, config: Mapping[str, str]
                               ) -> list[dict[str, str]] | None:
        """The running connector's task configs; None (and the connector FAILED) when it
        cannot give them."""
        try:
            return self._w.connector_task_configs(name, int(config.get(cc.TASKS_MAX_CONFIG, "1")))
        except Exception as e:
            import traceback

            log.error("Connector %s failed to generate task configs: %s", name, e)
            self.on_connector_state(name, State.FAILED, "".join(traceback.format_exception(e)))
            return None

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Kafka Connect's internal POST /connectors/{name}/tasks: only a distributed
        group's leader takes task configs from the other workers."""
        raise ConflictError("Only the leader of a distributed worker group accepts task "
                            "configs from other workers")

    @property
    def signs_internal_requests(self) -> bool:
        return False

    def session_key(self) -> SessionKey | None:
        return None

    # -- what both herders do alike around their writes -------------------------------------
    def _serially(self, fn: Callable[[], T]) -> T:
        """Run `fn` with no other write in between (here: under the herder's lock; a
        distributed herder runs it on its tick thread)."""
        with self._lock:
            return fn()

    @staticmethod
    def _check_name(name: str) -> None:
        if not name or "/" in name:
            raise ValidationError("Connector name must be non-empty and contain no '/'",
                                  {"name": ["invalid connector name"]})

    def patch_connector_config(self, name: str, patch: Mapping[str, Any | None]) -> ConnectorInfo:
        return self._serially(
            lambda: self.put_connector_config(name, merge_patch(self._require(name), patch))[1])

    def _restart_plan(self, name: str, request: RestartRequest) -> RestartPlan:
        """Kafka's RestartPlan: the connector unless only failed ones are asked for and it
        has not failed; its tasks when asked for (the failed ones under only_failed)."""
        status = self.connector_status(name)
        connector = not request.only_failed or status.state is State.FAILED
        tasks = frozenset(t.task for t in status.tasks if request.include_tasks and (
            not request.only_failed or t.state is State.FAILED))
        shown = replace(
            status, state=State.RESTARTING if connector else status.state,
            tasks=tuple(replace(t, state=State.RESTARTING, trace=None)
                        if t.task in tasks else t for t in status.tasks),
            trace=None if connector else status.trace)
        return RestartPlan(shown, connector, tasks)

    @abstractmethod
    def _set_target(self, name: str, target: TargetState) -> None:
        """Pause, resume or stop a connector and its tasks."""

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STOPPED)

    def _type(self, config: Mapping[str, str]) -> ConnectorType:
        try:
            return self.registry.connector_plugin(config.get(CONNECTOR_CLASS_CONFIG, "")).type
        except Exception:
            return ConnectorType.UNKNOWN


    # -- reads -------------------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        return sorted(self.configs.connector_names())

    # -- secrets ---------------------------------------------------------------------------
    # The public reads below are what REST answers, so they mask: a secret key (PASSWORD in
    # the connector's ConfigDef) given literally reads `[hidden]`, a placeholder reads as
    # written. Kafka Connect returns the stored config unmasked; kctl's issue asks for no
    # password in any REST answer, and `restore_hidden` keeps a GET-edit-PUT round trip
    # from overwriting the password with the mask. Internal code reads `self.configs`.
    def _definition(self, config: Mapping[str, str]) -> Any:
        """The connector's ConfigDef (None when its plugin cannot be loaded: then keys
        named like secrets are masked)."""
        try:
            return self.registry.new_connector(config.get(CONNECTOR_CLASS_CONFIG, "")).config()
        except Exception:
            return None

    def _masked(self, config: Mapping[str, str], definition: Any = None) -> dict[str, str]:
        return mask(config, definition if definition is not None else self._definition(config))

    def _unmasked(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """An incoming config with `[hidden]` secret values replaced by the stored ones."""
        return restore_hidden(config, self.configs.connector_config(name),
                              self._definition(cc.as_strings(config)))

    def _transformer(self) -> Any:
        return self.worker.config_transformer if self.worker is not None else None

    def _policy(self) -> Any:
        from kctl.runtime.validation import ConnectorPolicy

        return ConnectorPolicy.of(self.worker.config if self.worker is not None else None)

    def connector_info(self, name: str) -> ConnectorInfo:
        config = self._require(name)
        n = len(self.configs.task_configs(name))
        return ConnectorInfo(name, self._masked(config), tuple(range(n)), self._type(config))

    def connector_config(self, name: str) -> dict[str, str]:
        return self._masked(self._require(name))

    def _validated(self, name: str, config: Mapping[str, Any]) -> dict[str, str]:
        config = cc.as_strings(config)
        if "name" in config and config["name"] != name:
            raise ValidationError(
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})", {"name": ["does not match the connector name"]})
        config["name"] = name
        raise_if_invalid(validate_config(self.registry, config, transformer=self._transformer(),
                                         policy=self._policy()))
        # a literal password is known to the log redactor from the moment it arrives
        register_secrets(config, self._definition(config))
        return config

    def connector_status(self, name: str) -> ConnectorStatus:
        config = self._require(name)
        conn = self.statuses.connector_state(name)
        state, worker, trace = conn if conn else self._unplaced()
        n = len(self.configs.task_configs(name))
        tasks = []
        for i in range(n):
            ts = self.statuses.task_state(name, i)
            s, w, t = ts if ts else self._unplaced()
            tasks.append(TaskStatus(name, i, s, w, t))
        return ConnectorStatus(name, state, worker, self._type(config), tuple(tasks), trace)

    def _unplaced(self) -> tuple[State, str, str | None]:
        """The status of what no worker has reported on yet (standalone: this worker's)."""
        return State.UNASSIGNED, self.worker_id, None

    def task_configs(self, name: str) -> list[dict[str, str]]:
        definition = self._definition(self._require(name))
        return [self._masked(c, definition) for c in self.configs.task_configs(name)]

    def task_status(self, name: str, task: int) -> TaskStatus:
        status = self.connector_status(name)
        for t in status.tasks:
            if t.task == task:
                return t
        raise NotFoundError(f"Task {name}-{task} not found")

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
                from kctl.api.records import TopicPartition

                # the connector's admin client, as Kafka Connect's (its admin.override.*)
                admin = self._w.connector_admin(name, config)
                try:
                    tps = [TopicPartition(t, p) for t, n in admin.list_topics().items()
                           for p in range(n)]
                    admin.delete_group_offsets(f"connect-{name}", tps)
                finally:
                    admin.close()
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

    # -- topics (kctl extension, read only) --------------------------------------------------------
    def list_topics(self) -> list[dict[str, Any]]:
        from kctl.runtime.topics import list_topics

        return list_topics(self._w.transport)

    def _decoders(self, topic: str, connector: str | None, key_converter: str | None,
                  value_converter: str | None) -> Decoders:
        """The converters to decode `topic` with; an unknown topic is NotFoundError first,
        whatever the converters named."""
        from kctl.runtime.topics import Decoders

        if topic not in self._w.transport.admin().list_topics():
            raise NotFoundError(f"Topic {topic} not found")
        config = self._require(connector) if connector else None
        key, value = self._w.record_converters(config, key_converter, value_converter)
        named = [f"connector {connector}"] if connector else []
        if key_converter or value_converter:
            named.append("options")
        return Decoders(key, value, " and ".join(named) or "worker defaults")

    def describe_topic(self, topic: str, connector: str | None = None,
                       value_converter: str | None = None) -> dict[str, Any]:
        from kctl.runtime.topics import describe_topic

        decoders = self._decoders(topic, connector, None, value_converter)
        return {**describe_topic(self._w.transport, topic, decoders.value),
                "decoded_by": decoders.source}

    def read_topic(self, topic: str, request: ReadRequest, connector: str | None = None,
                   key_converter: str | None = None,
                   value_converter: str | None = None) -> dict[str, Any]:
        from kctl.runtime.topics import read_records

        return read_records(self._w.transport, topic, request,
                            self._decoders(topic, connector, key_converter, value_converter))

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
        return validate_config(self.registry, cfg, transformer=self._transformer(),
                               policy=self._policy())

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

    def set_cluster_logger_level(self, name: str, level: str) -> list[str]:
        """A standalone worker is its whole cluster (as Kafka's StandaloneHerder)."""
        return self.loggers.set(name, level)

    def health(self) -> Health:
        if self.worker is None or self._stopped:
            return Health("unhealthy", "Worker is starting or stopping")
        return self._running_health()

    def _running_health(self) -> Health:
        """A started worker: unhealthy when its Kafka cluster does not answer, degraded
        while any of its tasks is stalled."""
        unreachable = self._w.transport.unreachable()
        if unreachable is not None:
            return Health("unhealthy", f"Worker cannot reach its Kafka cluster: {unreachable}",
                          (unreachable,))
        stalled = []
        for tid, wt in sorted(self._w.tasks.items()):
            stall = wt.counters.stall
            if stall is not None:
                since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stall.since_ms / 1000))
                stalled.append(f"Task {tid} stalled since {since}: {stall.reason}")
        if stalled:
            return Health("degraded", f"{len(stalled)} task(s) of this worker cannot move "
                          "records: " + stalled[0], tuple(stalled))
        return Health("healthy", READY)

    # -- rebalances and groups (kctl extension) -------------------------------------------------
    def worker_group(self) -> str:
        """The group.id this worker's group has (a standalone worker has none)."""
        return ""

    def group_broker(self) -> tuple[str, Mapping[str, Any]]:
        """Where to ask about groups (bootstrap servers, none for a standalone worker) and
        the security settings to ask with."""
        return "", {}

    def rebalance_history(self, *, last: int | None = None, connector: str | None = None,
                          since_ms: int | None = None,
                          generation: int | None = None) -> dict[str, Any]:
        from kctl.runtime.groups import rebalance_history

        return rebalance_history(self.statuses, last=last, connector=connector,
                                 since_ms=since_ms, generation=generation)

    def replay_generation(self, generation: int) -> dict[str, Any]:
        from kctl.runtime.groups import replay_generation

        return replay_generation(self.statuses, generation)

    def groups(self) -> Groups:
        from kctl.runtime.groups import groups

        return groups(self)

    def describe_group(self, group: str) -> dict[str, Any]:
        from kctl.runtime.groups import describe_group

        return describe_group(self, group)

    def metrics(self) -> CollectorRegistry:
        if self._metrics is None:
            from kctl.runtime.metrics import worker_registry

            self._metrics = worker_registry(lambda: self.worker, self)
        return self._metrics
