"""The Worker runs connectors and tasks on one process; herders decide what it runs.

It owns the process-wide resources: the transport, the plugin registry, the one
SparkSession (created lazily by the SparkEngine) and the offset store.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from kctl.api.connector import Connector, SinkConnector, SinkTask, SourceTask
from kctl.api.converter import Converter
from kctl.api.paths import ALLOWED_PATHS_PROP, path_problem
from kctl.errors import ConfigError, ConnectError
from kctl.runtime import connector_config as cc
from kctl.runtime.config_providers import (
    ConfigResolutionError,
    ConfigTransformer,
    providers_from_config,
)
from kctl.runtime.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    DLQ_TOPIC_NAME_CONFIG,
    KEY_CONVERTER_CLASS_CONFIG,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    TRANSFORMS_CONFIG,
    VALUE_CONVERTER_CLASS_CONFIG,
)
from kctl.runtime.error_handling import (
    DeadLetterQueueReporter,
    ErrorReporter,
    LogReporter,
    operator_from_config,
)
from kctl.runtime.plugins import Plugins
from kctl.runtime.secrets import install_log_redaction, register_secrets, secret_keys
from kctl.runtime.tasks import StatusListener, WorkerSinkTask, WorkerSourceTask, WorkerTask
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import State, TargetState, TaskId
from kctl.storage.offsets import OffsetBackingStore
from kctl.transport.base import Admin, Consumer, Producer, TopicSpec, Transport

log = logging.getLogger(__name__)

TOPIC_PARTITIONS = "topic.creation.default.partitions"
TOPIC_REPLICATION = "topic.creation.default.replication.factor"


def _topic_setting(cfg: Mapping[str, str], key: str, default: int) -> int:
    """A positive count, or -1 for the broker's default (as Kafka Connect accepts)."""
    raw = cfg.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value < 1 and not (value == -1 and key == TOPIC_REPLICATION):
        allowed = "a positive integer" + (" or -1" if key == TOPIC_REPLICATION else "")
        raise ConfigError(f"Invalid value {raw!r} for {key}: must be {allowed}", key=key)
    return value


class ClientSettings:
    """A client's settings: the worker's `producer.*` / `consumer.*` / `admin.*` under the
    connector's `*.override.*`, remembering which key of which config set each, so a setting
    the client rejects is reported by the key the user wrote."""

    def __init__(self, kind: str, worker_settings: Mapping[str, Any],
                 connector_config: Mapping[str, str]):
        self.kind = kind  # "producer", "consumer" or "admin"
        override = f"{kind}.override."
        self.config: dict[str, Any] = dict(worker_settings)
        self.origin: dict[str, str] = {k: f"{kind}.{k} (worker)" for k in worker_settings}
        for k, v in connector_config.items():
            if k.startswith(override) and len(k) > len(override):
                name = k[len(override):]
                self.config[name] = v
                self.origin[name] = k

    def culprit(self, error: BaseException) -> str | None:
        """The user key the client's error is about (its name or its quoted value appears in
        the message; librdkafka may name an alias, e.g. request.required.acks for acks)."""
        text = str(error)
        named = [k for k in self.origin if k in text]
        valued = [k for k in self.origin if f'"{self.config[k]}"' in text]
        found = named or valued
        return self.origin[max(found, key=len)] if found else None

    def rejected(self, connector: str, error: BaseException) -> ConfigError:
        culprit = self.culprit(error)
        if culprit is not None:
            key = culprit.split(" ")[0]
            value = self.config[key.removeprefix(f"{self.kind}.override.")
                                .removeprefix(f"{self.kind}.")]
            return ConfigError(f"Invalid {self.kind} setting {culprit} = {value!r} for "
                               f"connector {connector}: {error}", key=key, source=connector)
        given = ", ".join(sorted(self.origin.values())) or "none"
        return ConfigError(f"The {self.kind} of connector {connector} rejected its settings "
                           f"({given}): {error}", source=connector)


class ConnectorListener(StatusListener):
    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None: ...


class _ConnectorContext:
    def __init__(self, worker: Worker, name: str, on_reconfigure: Callable[[str], None]):
        self._worker = worker
        self._name = name
        self._on_reconfigure = on_reconfigure

    def request_task_reconfiguration(self) -> None:
        self._on_reconfigure(self._name)

    def raise_error(self, error: BaseException) -> None:
        self._worker.status.on_connector_state(self._name, State.FAILED,
                                               "".join(traceback.format_exception(error)))

    def warn(self, message: str | None) -> None:
        self._worker.warn_connector(self._name, message)

    @property
    def offset_storage_reader(self) -> Any:
        return self._worker.offset_reader(self._name)

    def spark(self) -> Any:
        return self._worker.spark.spark()


class SourceReplayer:
    """`kctl dlq replay` for one connector: re-encodes source DLQ records with its current
    converters and transforms, and, for sinks and sources alike, makes the replay's producer
    with the connector's producer settings (`new_producer`, which `kctl.runtime.dlq.replay`
    uses), like every other producer of the connector."""

    def __init__(self, worker: Worker, connector_config: Mapping[str, str]):
        self._worker = worker
        self._config = dict(connector_config)
        self._name = str(connector_config.get("name", ""))
        self._settings = worker.producer_settings(connector_config)
        self._kc = worker._converter(connector_config, KEY_CONVERTER_CLASS_CONFIG)
        self._vc = worker._converter(connector_config, VALUE_CONVERTER_CLASS_CONFIG)
        self._transforms = worker._transforms(connector_config)

    def new_producer(self) -> Producer:
        return self._worker.new_producer(self._name, self._settings)

    def __call__(self, rec: Any, topic: str) -> Any:
        from kctl.api.records import SourceRecord
        from kctl.transport.base import ProducerRecord

        kc, vc = self._kc, self._vc
        key = kc.to_connect_data(topic, rec.key)
        value = vc.to_connect_data(topic, rec.value)
        sr = SourceRecord(topic, None, key.schema, key.value, value.schema, value.value)
        if self._transforms is not None:
            sr = self._transforms.apply(sr)
            if sr is None:
                return None
        self._worker.ensure_topic(sr.topic, connector_config=self._config, owner=self._name)
        return ProducerRecord(sr.topic, vc.from_connect_data(sr.topic, sr.value_schema, sr.value),
                              kc.from_connect_data(sr.topic, sr.key_schema, sr.key),
                              sr.kafka_partition)


class WorkerConnector:
    """A connector on this worker: `config` as stored (placeholders), `resolved` as the
    connector was started with (secrets), which task configs are reverse-transformed
    against."""

    def __init__(self, name: str, connector: Connector, config: dict[str, str],
                 resolved: dict[str, str] | None = None):
        self.name = name
        self.connector = connector
        self.config = config
        self.resolved = dict(config) if resolved is None else resolved
        self.started = False
        self.state: State | None = None  # as last reported
        self.warning: str | None = None  # ConnectorContext.warn: shown as RUNNING's trace

    @property
    def is_sink(self) -> bool:
        return isinstance(self.connector, SinkConnector)


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        *,
        worker_id: str,
        transport: Transport,
        offset_store: OffsetBackingStore,
        status: ConnectorListener,
        plugins: Plugins,
        spark: Any,
        schema_registry: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.clock = clock  # the tasks' commit intervals (kctl.testing moves its own)
        self.worker_id = worker_id
        # the worker's own Schema Registry, for converters that name no schema.registry.url
        self.schema_registry = schema_registry
        self.transport = transport
        self.offset_store = offset_store
        self.status = status
        self.plugins = plugins
        self.spark = spark
        self.connectors: dict[str, WorkerConnector] = {}
        self.tasks: dict[TaskId, WorkerTask] = {}
        # Kafka's connect-worker-metrics startup counters, read by /metrics:
        # kind ("connector" or "task") -> outcome ("attempts", "success", "failure") -> count
        self.startups = {kind: dict.fromkeys(("attempts", "success", "failure"), 0)
                         for kind in ("connector", "task")}
        self._lock = threading.RLock()
        self._admin = transport.admin()
        transformer = getattr(config, "config_transformer", None)
        self.config_transformer: ConfigTransformer = transformer if transformer is not None \
            else ConfigTransformer(providers_from_config(getattr(config, "originals", {})))
        install_log_redaction()

    # -- config providers --------------------------------------------------------------------
    def resolve(self, config: Mapping[str, str], definition: Any, what: str) -> dict[str, str]:
        """The config with its placeholders replaced, its secret values (literal or
        resolved) known to the log redactor before anything can log them.
        ConfigResolutionError names the placeholder when one cannot be resolved."""
        resolved = self.config_transformer.transform(config, what=what).data
        register_secrets(resolved, definition)
        return resolved

    def _confine(self, connector: Any, resolved: dict[str, str]) -> dict[str, str]:
        """A config whose local paths the worker allows (checked again at start: a symlink
        may have moved since it was validated), with the allowed directories handed on
        for the files the connector finds later."""
        roots = list(self.config.get_list("file.connector.allowed.paths")) \
            if hasattr(self.config, "get_list") else []
        if not roots:
            return resolved
        for key, path in connector.local_paths(resolved).items():
            problem = path_problem(path, roots)
            if problem:
                raise ConfigError(problem, key=key)
        return {**resolved, ALLOWED_PATHS_PROP: ",".join(roots)}

    def _fail_connector(self, name: str, e: BaseException) -> None:
        """A connector that cannot start: FAILED with the trace, or with one line when its
        config could not be resolved (the traceback says nothing more)."""
        self.startups["connector"]["failure"] += 1
        if isinstance(e, ConfigResolutionError):
            log.error("Connector %s failed to start: %s", name, e)
            self.status.on_connector_state(name, State.FAILED, str(e))
            return
        log.error("Connector %s failed to start: %s", name, e, exc_info=e)
        self.status.on_connector_state(name, State.FAILED, "".join(traceback.format_exception(e)))

    # -- offsets ---------------------------------------------------------------------------
    def offset_reader(self, connector: str) -> Any:
        from kctl.storage.offsets import OffsetStorageReaderImpl

        return OffsetStorageReaderImpl(self.offset_store, connector)

    def offset_writer(self, connector: str) -> Any:
        from kctl.storage.offsets import OffsetStorageWriter

        return OffsetStorageWriter(self.offset_store, connector)

    # -- connectors --------------------------------------------------------------------------
    def start_connector(self, name: str, config: dict[str, str], target: TargetState,
                        on_reconfigure: Callable[[str], None]) -> bool:
        """Instantiate and (unless STOPPED) start; failures become FAILED, never raise."""
        with self._lock:
            if name in self.connectors:
                raise ConnectError(f"Connector {name} is already running on this worker")
            self.startups["connector"]["attempts"] += 1
            try:
                connector = self.plugins.new_connector(config.get(CONNECTOR_CLASS_CONFIG, ""))
                wc = WorkerConnector(name, connector, config)
                connector.initialize(_ConnectorContext(self, name, on_reconfigure))
                self.connectors[name] = wc
                if target is not TargetState.STOPPED:
                    wc.resolved = self._confine(connector, self.resolve(
                        config, connector.config(), f"connector {name}"))
                    connector.start(wc.resolved)
                    wc.started = True
            except Exception as e:
                self._fail_connector(name, e)
                return False
            state = {TargetState.STARTED: State.RUNNING, TargetState.PAUSED: State.PAUSED,
                     TargetState.STOPPED: State.STOPPED}[target]
            self.startups["connector"]["success"] += 1
            self._report(wc, state)
            return True

    def _report(self, wc: WorkerConnector, state: State) -> None:
        """A connector's state; RUNNING carries its warning (if any) as the trace."""
        wc.state = state
        self.status.on_connector_state(wc.name, state,
                                       wc.warning if state is State.RUNNING else None)

    def warn_connector(self, name: str, message: str | None) -> None:
        """A running connector says what the user should know although nothing failed
        (e.g. no table matches its include list, so it runs no task); None takes it back."""
        wc = self.connectors.get(name)
        if wc is None or wc.warning == message:
            return
        wc.warning = message
        if message:
            log.warning("Connector %s: %s", name, message)
        if wc.state is State.RUNNING:
            self._report(wc, State.RUNNING)

    def is_running(self, name: str) -> bool:
        wc = self.connectors.get(name)
        return wc is not None and wc.started

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        wc = self.connectors[name]
        configs = wc.connector.task_configs(max_tasks)
        if len(configs) > max_tasks:
            raise ConnectError(
                f"Connector {name} produced {len(configs)} task configs, more than tasks.max={max_tasks}")
        task_class = wc.connector.task_class()
        secrets = secret_keys(wc.config, wc.connector.config())
        result = []
        for tc in configs:
            # placeholders back in, so stored and shown task configs never hold a secret
            generated = self.config_transformer.reverse(wc.config, wc.resolved, secrets,
                                                        cc.as_strings(tc))
            generated.pop(ALLOWED_PATHS_PROP, None)  # the worker's, handed on at each start
            merged = {**generated, "task.class": f"{task_class.__module__}.{task_class.__qualname__}"}
            if wc.is_sink:
                for k in (TOPICS_CONFIG, TOPICS_REGEX_CONFIG):
                    if k in wc.config:
                        merged.setdefault(k, wc.config[k])
            result.append(merged)
        return result

    def stop_connector(self, name: str) -> None:
        with self._lock:
            wc = self.connectors.pop(name, None)
        if wc is not None and wc.started:
            self._stop_connector_within(wc)

    def _stop_connector_within(self, wc: WorkerConnector) -> None:
        """Stop a connector, waiting as long as for a task, then going on without it (as
        Kafka's Worker does): a plugin whose stop() blocks must not hang the herder."""
        wc.started = False
        done = threading.Event()

        def stop() -> None:
            try:
                wc.connector.stop()
            except Exception as e:
                log.warning("Connector %s failed to stop cleanly: %s", wc.name, e)
            finally:
                done.set()

        threading.Thread(target=stop, name=f"stop-{wc.name}", daemon=True).start()
        timeout = self.config.get_int("task.shutdown.graceful.timeout.ms") / 1000
        if not done.wait(timeout):
            log.warning("Connector %s did not stop within %.1fs; abandoning its thread "
                        "(it may still hold what it opened)", wc.name, timeout)

    def set_connector_target(self, name: str, target: TargetState) -> None:
        wc = self.connectors.get(name)
        if wc is None:
            return
        if target is TargetState.STOPPED:
            if wc.started:
                self._stop_connector_within(wc)
            self._report(wc, State.STOPPED)
            return
        if not wc.started:
            try:  # resolved again: a rotated secret is picked up on resume
                wc.resolved = self.resolve(wc.config, wc.connector.config(), f"connector {name}")
                wc.connector.start(wc.resolved)
                wc.started = True
            except Exception as e:
                trace = str(e) if isinstance(e, ConfigResolutionError) else \
                    "".join(traceback.format_exception(e))
                self.status.on_connector_state(name, State.FAILED, trace)
                return
        self._report(wc, State.PAUSED if target is TargetState.PAUSED else State.RUNNING)

    # -- tasks -------------------------------------------------------------------------------
    def _converter(self, config: Mapping[str, str], which: str) -> Converter:
        from kctl.runtime.converters import load_converter, resolve_converter

        name = config.get(which) or self.config.get_str(which)
        prefix = which + "."
        configs: dict[str, Any] = {
            **self.config.with_prefix(prefix),
            **{k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}}
        if self.schema_registry is not None and \
                getattr(resolve_converter(name), "uses_schema_registry", False):
            from kctl.runtime.converters.avro import LOCAL_REGISTRY

            configs[LOCAL_REGISTRY] = self.schema_registry
        return load_converter(name, configs, which == KEY_CONVERTER_CLASS_CONFIG)

    def _transforms(self, config: Mapping[str, str]) -> Any:
        if not config.get(TRANSFORMS_CONFIG):
            return None
        from kctl.transforms.chain import TransformationChain

        return TransformationChain.from_config(config)

    # -- clients: every producer of a connector (its task's, its DLQ's, a replay's) and its
    # consumer take the worker's settings under the connector's overrides, as Kafka Connect
    def producer_settings(self, connector_config: Mapping[str, str]) -> ClientSettings:
        return ClientSettings("producer", self.config.with_prefix("producer."), connector_config)

    def consumer_settings(self, connector_config: Mapping[str, str]) -> ClientSettings:
        return ClientSettings("consumer", self.config.with_prefix("consumer."), connector_config)

    def admin_settings(self, connector_config: Mapping[str, str]) -> ClientSettings:
        return ClientSettings("admin", self.config.with_prefix("admin."), connector_config)

    def new_admin(self, connector: str, settings: ClientSettings) -> Admin:
        """The admin client Kafka Connect opens on a connector's behalf (its topics, its
        dead letter queue): the worker's `admin.*` under the connector's `admin.override.*`.
        The caller closes it."""
        try:
            return self.transport.admin(settings.config)
        except Exception as e:
            raise settings.rejected(connector, e) from e

    def connector_admin(self, name: str, config: Mapping[str, str]) -> Admin:
        """An admin client for work done on a connector's behalf outside its tasks (a
        sink's offsets reset), from its stored config with placeholders resolved."""
        resolved = self.resolve(config, None, f"connector {name}")
        return self.new_admin(name, self.admin_settings(resolved))

    def new_producer(self, connector: str, settings: ClientSettings) -> Producer:
        """A producer with these settings; a setting the client rejects is a ConfigError
        naming the key, which fails the task (never the worker)."""
        try:
            return self.transport.producer(settings.config)
        except Exception as e:
            raise settings.rejected(connector, e) from e

    def new_consumer(self, connector: str, group_id: str | None,
                     settings: ClientSettings, client_id: str | None = None) -> Consumer:
        config = settings.config if client_id is None else \
            {"client.id": client_id, **settings.config}
        try:
            return self.transport.consumer(group_id, config)
        except Exception as e:
            raise settings.rejected(connector, e) from e

    def _reporters(self, name: str, parsed: Mapping[str, Any], connector_config: Mapping[str, str],
                   key_conv: Converter, value_conv: Converter) -> list[ErrorReporter]:
        reporters: list[ErrorReporter] = []
        if parsed["errors.log.enable"]:
            reporters.append(LogReporter(parsed["errors.log.include.messages"]))
        dlq = parsed[DLQ_TOPIC_NAME_CONFIG]
        if dlq:
            self.ensure_topic(dlq, replication=int(parsed["errors.deadletterqueue.topic.replication.factor"]),
                              owner=name, owner_config=connector_config)
            def encode(r: Any) -> tuple[bytes | None, bytes | None]:
                return (key_conv.from_connect_data(r.topic, r.key_schema, r.key),
                        value_conv.from_connect_data(r.topic, r.value_schema, r.value))

            reporters.append(DeadLetterQueueReporter(
                self.new_producer(name, self.producer_settings(connector_config)), dlq,
                context_headers=parsed["errors.deadletterqueue.context.headers.enable"],
                encode_source=encode))
        return reporters

    def topic_creation(self, connector_config: Mapping[str, str] | None = None) -> tuple[int, int]:
        """Partitions and replication factor of topics a connector creates: the connector's
        `topic.creation.default.*` (as a Kafka Connect source may set them), else the worker's."""
        cfg = connector_config or {}
        partitions = _topic_setting(cfg, TOPIC_PARTITIONS, self.config.get_int(TOPIC_PARTITIONS))
        replication = _topic_setting(cfg, TOPIC_REPLICATION,
                                     self.config.get_int(TOPIC_REPLICATION))
        return partitions, replication

    def ensure_topic(self, topic: str, *, replication: int | None = None,
                     connector_config: Mapping[str, str] | None = None,
                     owner: str | None = None,
                     owner_config: Mapping[str, str] | None = None) -> None:
        """Create `topic` when missing. `owner`: the connector it is created for, whose
        admin client does it (its `owner_config`, else `connector_config`)."""
        if topic in self._admin.list_topics():
            return
        partitions, default_replication = self.topic_creation(connector_config)
        spec = TopicSpec(topic, partitions,
                         replication if replication is not None else default_replication)
        if owner is None:
            self._admin.create_topics([spec])
            return
        admin = self.new_admin(owner, self.admin_settings(owner_config or connector_config or {}))
        try:
            admin.create_topics([spec])
        finally:
            admin.close()

    def start_task(self, task_id: TaskId, connector_config: dict[str, str],
                   task_config: dict[str, str], target: TargetState) -> bool:
        with self._lock:
            if task_id in self.tasks:
                raise ConnectError(f"Task {task_id} is already running on this worker")
            self.startups["task"]["attempts"] += 1
            try:
                wt = self.build_task(task_id, connector_config, task_config, target)
            except Exception as e:
                self.startups["task"]["failure"] += 1
                if isinstance(e, ConfigResolutionError):  # one line says it all
                    log.error("Task %s failed to build: %s", task_id, e)
                    self.status.on_task_state(task_id, State.FAILED, str(e))
                else:
                    log.error("Task %s failed to build: %s", task_id, e, exc_info=e)
                    self.status.on_task_state(task_id, State.FAILED,
                                              "".join(traceback.format_exception(e)))
                return False
            self.tasks[task_id] = wt
            wt.start()
            self.startups["task"]["success"] += 1
            return True

    def build_task(self, task_id: TaskId, connector_config: dict[str, str],
                   task_config: dict[str, str], target: TargetState) -> WorkerTask:
        """The task loop with its converters, transforms, error handling and clients, not
        started (`start_task` runs it on its thread; kctl.testing turns it itself)."""
        plugin = self.plugins.connector_plugin(connector_config.get(CONNECTOR_CLASS_CONFIG, ""))
        task_class_name = task_config.get("task.class")
        connector = plugin.cls()
        task_cls = connector.task_class()
        if task_class_name and task_class_name != f"{task_cls.__module__}.{task_cls.__qualname__}":
            raise ConfigError(f"Task class {task_class_name} does not match the connector's")
        # the task, its converters, transforms and clients get resolved values; the herder
        # and the stores keep the placeholders
        definition = connector.config()
        connector_config = self.resolve(connector_config, definition,
                                        f"connector {task_id.connector}")
        task_config = self._confine(connector, self.resolve(task_config, definition,
                                                            f"task {task_id}"))
        is_sink = issubclass(task_cls, SinkTask)
        parsed = cc.connector_def(is_sink).parse(connector_config)
        key_conv = self._converter(connector_config, KEY_CONVERTER_CLASS_CONFIG)
        value_conv = self._converter(connector_config, VALUE_CONVERTER_CLASS_CONFIG)
        transforms = self._transforms(connector_config)
        reporters = self._reporters(task_id.connector, parsed, connector_config,
                                    key_conv, value_conv)
        holder: list[WorkerTask] = []

        def backoff(seconds: float) -> None:
            if holder:
                holder[0].wait_unless_stopping(seconds)
            else:
                time.sleep(seconds)

        operator = operator_from_config(parsed, connector=task_id.connector, task=task_id.task,
                                        reporters=reporters,
                                        should_stop=lambda: bool(holder) and holder[0].stopping,
                                        sleep=backoff)
        try:
            wt = self._new_task(task_id, task_cls, connector_config, task_config, target, parsed,
                                dict(status=self.status, key_converter=key_conv,
                                     value_converter=value_conv, transforms=transforms,
                                     operator=operator, spark=self.spark,
                                     paused=target is TargetState.PAUSED, clock=self.clock,
                                     commit_interval_ms=self.config.get_int(
                                         "offset.flush.interval.ms")),
                                has_reporters=bool(reporters))
        except BaseException:
            operator.close()  # the DLQ producer would otherwise outlive the failed build
            raise
        holder.append(wt)
        return wt

    def _new_task(self, task_id: TaskId, task_cls: type, connector_config: dict[str, str],
                  task_config: dict[str, str], target: TargetState, parsed: Mapping[str, Any],
                  common: dict[str, Any], *, has_reporters: bool) -> WorkerTask:
        if issubclass(task_cls, SinkTask):
            # a sink never creates its input topics (Kafka Connect's don't): its consumer
            # group takes their partitions when they appear, as the source that writes
            # them created them (with the partitions it asked for)
            topics = list(parsed[TOPICS_CONFIG])
            settings = self.consumer_settings(connector_config)
            max_poll_records = self._max_poll_records(connector_config, parsed, settings)
            wt: WorkerTask = WorkerSinkTask(
                task_id, task_cls(), task_config,
                consumer=self.new_consumer(task_id.connector, f"connect-{task_id.connector}",
                                           settings, f"connector-consumer-{task_id}"),
                topics=topics, topics_regex=parsed[TOPICS_REGEX_CONFIG] or None,
                list_topics=lambda: list(self._admin.list_topics()),
                max_poll_records=max_poll_records, has_reporters=has_reporters, **common)
            for t in topics:
                self.status.on_topic_used(task_id.connector, t)
            return wt
        assert issubclass(task_cls, SourceTask)

        def ensure(topic: str, connector: str = task_id.connector) -> None:
            self.ensure_topic(topic, connector_config=connector_config, owner=connector)
            self.status.on_topic_used(connector, topic)

        self.topic_creation(connector_config)  # a bad value fails the task now, not mid-poll
        return WorkerSourceTask(
            task_id, task_cls(), task_config,
            producer=self.new_producer(task_id.connector, self.producer_settings(connector_config)),
            offset_reader=self.offset_reader(task_id.connector),
            offset_writer=self.offset_writer(task_id.connector),
            commit_timeout_ms=self.config.get_int("offset.flush.timeout.ms"),
            ensure_topic=ensure,
            partition_count=lambda t: self._admin.list_topics().get(t, 1),
            exactly_once=self.config.exactly_once_source,
            log_reader=lambda: self.transport.consumer(None, {"kctl.passive": "true"}),
            stored_offsets=lambda c=task_id.connector: self._stored_offsets(c),
            **common)

    @staticmethod
    def _max_poll_records(connector_config: Mapping[str, str], parsed: Mapping[str, Any],
                          settings: ClientSettings) -> int:
        """Most records per put(): `consumer.override.max.poll.records` or the worker's
        `consumer.max.poll.records` (Kafka Connect's names) unless the connector sets kctl's
        `consumer.max.poll.records` itself."""
        if "consumer.max.poll.records" in connector_config:
            return int(parsed["consumer.max.poll.records"])
        raw = settings.config.get("max.poll.records")
        if raw is None:
            return int(parsed["consumer.max.poll.records"])
        try:
            value = int(str(raw))
        except ValueError:
            value = 0
        if value < 1:
            key = settings.origin["max.poll.records"].split(" ")[0]
            raise ConfigError(f"Invalid value {raw!r} for {key}: must be a positive integer",
                              key=key)
        return value

    def source_replayer(self, connector_config: Mapping[str, str]) -> SourceReplayer:
        """Decode a source DLQ record and send it through the connector's current transforms;
        the replay's producer takes the connector's producer settings (resolved, as a task's)."""
        plugin = self.plugins.connector_plugin(connector_config.get(CONNECTOR_CLASS_CONFIG, ""))
        name = connector_config.get("name", "")
        return SourceReplayer(self, self.resolve(connector_config, plugin.cls().config(),
                                                 f"connector {name}"))

    def record_converters(self, connector_config: Mapping[str, str] | None = None,
                          key: str | None = None, value: str | None = None
                          ) -> tuple[Converter, Converter]:
        """The converters a connector's records are read with (`kctl topic read`): its own
        (resolved, as a task's), else the worker's; `key` or `value` names another."""
        config: dict[str, str] = {}
        if connector_config:
            plugin = self.plugins.connector_plugin(
                connector_config.get(CONNECTOR_CLASS_CONFIG, ""))
            config = dict(self.resolve(connector_config, plugin.cls().config(),
                                       f"connector {connector_config.get('name', '')}"))
        for which, name in ((KEY_CONVERTER_CLASS_CONFIG, key),
                            (VALUE_CONVERTER_CLASS_CONFIG, value)):
            if name:
                config[which] = name
        return (self._converter(config, KEY_CONVERTER_CLASS_CONFIG),
                self._converter(config, VALUE_CONVERTER_CLASS_CONFIG))

    def _stored_offsets(self, connector: str) -> list[tuple[dict, dict | None]]:
        from kctl.storage.offsets import list_connector_offsets

        return list_connector_offsets(self.offset_store, connector)

    def set_task_target(self, task_id: TaskId, target: TargetState) -> None:
        wt = self.tasks.get(task_id)
        if wt is None:
            return
        if target is TargetState.PAUSED:
            wt.pause()
        else:
            wt.resume()

    def stop_tasks(self, ids: list[TaskId]) -> None:
        """Signal all, then wait for all, so stopping many tasks costs one timeout, not N."""
        with self._lock:
            tasks = [(i, self.tasks.pop(i)) for i in ids if i in self.tasks]
        for _, t in tasks:
            t.stop()
        timeout = self.config.get_int("task.shutdown.graceful.timeout.ms") / 1000
        for tid, t in tasks:
            if not t.join(timeout):
                t.abandon()
                log.warning("Task %s did not stop within %.1fs; abandoning its thread", tid,
                            timeout)

    def tasks_of(self, connector: str) -> list[TaskId]:
        return sorted(t for t in self.tasks if t.connector == connector)

    def stop(self) -> None:
        self.stop_tasks(list(self.tasks))
        for name in list(self.connectors):
            self.stop_connector(name)
