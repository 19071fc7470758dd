"""A worker process, assembled: the runtime, the stores, the transport and the REST server.

The one module that knows both the runtime and the REST layer (Kafka's ConnectStandalone /
AbstractConnectCli): `kctl worker start` calls `run_worker`, tests build a
`StandaloneWorker`. Everything below it stays unaware of how it is served.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.errors import ConfigError, KctlError, TransportError, ValidationError
from kctl.exit_status import ExitStatus
from kctl.group.assignors.connect import ConnectAssignment, ConnectorsAndTasks
from kctl.group.driver import GroupDriver
from kctl.group.protocol import GroupMember
from kctl.rest.app import create_app
from kctl.rest.auth import BasicAuth, load_credentials
from kctl.rest.internal import InterWorkerClient
from kctl.rest.server import RestServer
from kctl.runtime.abstract_herder import AbstractHerder
from kctl.runtime.plugins import Plugins
from kctl.runtime.secrets import install_log_redaction
from kctl.runtime.spark import SparkEngine
from kctl.runtime.standalone import StandaloneHerder
from kctl.runtime.validation import ConnectorPolicy, raise_if_invalid, validate_config
from kctl.runtime.worker import Worker
from kctl.runtime.worker_config import (
    BOOTSTRAP_SERVERS_CONFIG,
    FETCH_MAX_WAIT_CONFIG,
    REVOCATION_REJOIN_DELAY_CONFIG,
    WorkerConfig,
)
from kctl.storage.configs import ConfigBackingStore
from kctl.storage.offsets import OffsetBackingStore
from kctl.storage.status import StatusBackingStore
from kctl.transport.base import Transport

log = logging.getLogger(__name__)


__all__ = ["DistributedWorker", "StandaloneWorker", "Stores", "build_transport", "file_stores",
           "run_worker", "topic_stores"]


# -- what a worker process is built from -----------------------------------------------------


def build_transport(config: WorkerConfig) -> Transport:
    """The embedded log under `state.dir`, or Kafka when `bootstrap.servers` is set."""
    if config.embedded:
        from kctl.transport.embedded import EmbeddedTransport

        # sink groups default to cooperative-sticky, as on the Kafka transport: a sink task
        # joining or leaving moves only the partitions that must move
        return EmbeddedTransport(config.state_dir, fsync=config.get_bool("log.fsync"),
                                 assignment_strategy="cooperative-sticky")
    from kctl.transport.kafka import KafkaTransport
    from kctl.transport.member_ids import MemberIds

    return KafkaTransport(config.get_list(BOOTSTRAP_SERVERS_CONFIG),
                          admin_config=config.with_prefix("admin."),
                          security=config.kafka_security(),
                          consumer_defaults={
                              "fetch.wait.max.ms": config.get_int(FETCH_MAX_WAIT_CONFIG)},
                          # group members join with the ids they held before a restart
                          member_ids=MemberIds(config.state_dir))


@dataclass(frozen=True)
class Stores:
    """A worker's config, status and offset stores, started."""

    configs: ConfigBackingStore
    statuses: StatusBackingStore
    offsets: OffsetBackingStore

    def stop(self) -> None:
        for s in (self.offsets, self.configs, self.statuses):
            try:
                s.stop()
            except Exception as e:
                log.warning("Stopping a store failed: %s", e)


def file_stores(state_dir: Path) -> Stores:
    """A standalone worker's stores: JSON files under `state.dir`."""
    from kctl.storage.configs import FileConfigBackingStore
    from kctl.storage.offsets import FileOffsetBackingStore
    from kctl.storage.status import FileStatusBackingStore

    stores = Stores(FileConfigBackingStore(state_dir / "configs.json"),
                    FileStatusBackingStore(state_dir / "status.json"),
                    FileOffsetBackingStore(state_dir / "offsets.json"))
    for s in (stores.offsets, stores.configs, stores.statuses):
        s.start()
    return stores


def topic_stores(transport: Transport, config: WorkerConfig) -> Stores:
    """A distributed worker's stores: Kafka Connect's compacted topics, read to their end
    (those already started are stopped when one cannot start)."""
    from kctl.storage.topic_stores import (
        KafkaConfigBackingStore,
        KafkaOffsetBackingStore,
        KafkaStatusBackingStore,
    )

    settings = dict(config.values)
    started: list[Any] = []
    try:
        for store in (KafkaConfigBackingStore(transport, settings),
                      KafkaStatusBackingStore(transport, settings),
                      KafkaOffsetBackingStore(transport, settings)):
            store.start()
            started.append(store)
    except BaseException:
        for store in started:
            store.stop()
        raise
    configs, statuses, offsets = started
    return Stores(configs, statuses, offsets)


def rest_app(config: WorkerConfig, herder: AbstractHerder) -> Any:
    """The REST API as the config asks: Basic auth (rest.extension.classes), and calls to
    other workers made with this worker's TLS settings and credentials."""
    app = create_app(herder, client=InterWorkerClient(config.rest_client_options()))
    if config.rest_auth == "basic":
        users = load_credentials(config.get_str("rest.basic.auth.credentials.file"))
        # only a cluster that signs its internal requests lets them pass unauthenticated
        app.add_middleware(BasicAuth, users=users,
                           signed_internal=config.distributed and
                           config.get_str("connect.protocol") == "sessioned")
    return app


class _WorkerProcess(ABC):
    """What every worker process does alike: Spark, plugins, the REST port bound before
    anything is touched, and the order things start and stop in. A kind of worker adds
    its transport, stores and herder (`_assemble`)."""

    herder: AbstractHerder
    transport: Transport
    stores: Stores

    def __init__(self, config: WorkerConfig, plugins: Plugins | None = None):
        self.config = config
        self._registry_store: Any = None
        self.spark = SparkEngine(config.spark_conf())
        self.plugins = plugins or Plugins(config.get_list("plugin.path"))
        for err in self.plugins.load_errors:
            log.warning("plugin: %s", err)
        host, port = config.listener()
        try:
            tls = config.rest_tls().server_context() if config.listener_scheme == "https" else None
            self.rest = RestServer(None, host, port, ssl_context=tls)
        except ConfigError as e:
            raise ConfigError(f"{config.source}: listeners: {e}", key="listeners",
                              source=config.source) from e
        try:
            self._assemble()
        except BaseException:
            self.rest.stop()
            raise
        self.rest.app = rest_app(config, self.herder)

    @abstractmethod
    def _assemble(self) -> None:
        """Build the transport, the stores and the herder (after the port is bound)."""

    # the stores, as tests and older callers name them
    @property
    def configs(self) -> ConfigBackingStore:
        return self.stores.configs

    @property
    def statuses(self) -> StatusBackingStore:
        return self.stores.statuses

    @property
    def offsets(self) -> OffsetBackingStore:
        return self.stores.offsets

    def _start_schema_registry(self) -> Any:
        """The worker's Schema Registry on its topic (None when schema.registry.enable is
        false); the herder serves it and decides who may write."""
        if not self.config.get_bool("schema.registry.enable"):
            return None
        from kctl.runtime.registry.store import TopicSchemaRegistry

        store = TopicSchemaRegistry(
            self.transport, self.config.get_str("schema.registry.topic"),
            int(self.config.get("schema.registry.topic.replication.factor")),
            require_writer=self.herder.require_schema_writer)
        store.start(wait=self.config.embedded)  # a Kafka cluster may not answer yet
        self.herder.schema_registry = store.registry
        return store

    def start(self) -> None:
        self.spark.preload()
        self.rest.start()
        self._registry_store = self._start_schema_registry()
        worker = Worker(self.config, worker_id=self.herder.worker_id, transport=self.transport,
                        offset_store=self.stores.offsets, status=self.herder,
                        plugins=self.plugins, spark=self.spark,
                        schema_registry=self.herder.schema_registry)
        self.herder.start(worker)

    def stop(self) -> None:
        try:
            self.rest.stop()
        finally:
            try:
                self.herder.stop()
            finally:
                if self._registry_store is not None:
                    self._registry_store.stop()
                self.spark.stop()
                self.stores.stop()
                self.transport.close()


class StandaloneWorker(_WorkerProcess):
    """Everything one `kctl worker start` runs, wired together; also used by tests.

    Nothing touches state.dir until everything that can be checked without it has been:
    the config (WorkerConfig), the Spark master, the plugins and the REST port. A worker
    that cannot start leaves no state directory, lock or log behind.
    """

    def _assemble(self) -> None:
        config = self.config
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.transport = build_transport(config)
        try:
            self.stores = file_stores(config.state_dir)
        except BaseException:
            self.transport.close()
            raise
        s = self.stores
        self.herder = StandaloneHerder(config.worker_id(self.rest.port), self.plugins,
                                       s.configs, s.statuses, s.offsets)


class DistributedWorker(_WorkerProcess):
    """One worker of a cluster (`group.id` and `bootstrap.servers` set): the Kafka stores,
    the group driver and the DistributedHerder behind the same REST API (Kafka's
    ConnectDistributed)."""

    def _assemble(self) -> None:
        from kctl.runtime.distributed import DistributedHerder

        config = self.config
        log.info("Source tasks of this distributed worker are at-least-once "
                 "(exactly.once.source.support applies to standalone workers); "
                 "exactly-once sinks keep their guarantee")
        self.transport = build_transport(config)
        try:
            self.stores = topic_stores(self.transport, config)
            # refuse a worker of another group on this group's topics, before it runs anything
            self.stores.configs.claim(config.get_str("group.id"),
                                      config.advertised(self.rest.port),
                                      int(time.time() * 1000))
        except BaseException:
            self.transport.close()
            raise
        url = config.advertised(self.rest.port)
        s = self.stores
        client = InterWorkerClient(config.rest_client_options())
        self.herder = DistributedHerder(
            url.split("://", 1)[1], self.plugins, s.configs, s.statuses, s.offsets, url=url,
            worker_config=config, driver_factory=self._driver,
            send_task_configs=client.post_task_configs, set_logger_level=client.put_logger_level)

    def _driver(self, member: GroupMember[ConnectorsAndTasks]
                ) -> GroupDriver[ConnectAssignment, ConnectorsAndTasks]:
        from kctl.transport.kafka_group import CONNECT_CODEC, BrokerGroupDriver

        # a worker that revoked work rejoins at once (Kafka's behaviour) unless the setting
        # paces it for a coordinator that answers waiting SyncGroups only periodically
        member.revocation_rejoin_delay_ms = self.config.get_int(REVOCATION_REJOIN_DELAY_CONFIG)

        return BrokerGroupDriver(",".join(self.config.get_list(BOOTSTRAP_SERVERS_CONFIG)),
                                 self.config.get_str("group.id"), member, CONNECT_CODEC,
                                 security=self.config.kafka_security(),
                                 # heartbeats go on while the herder starts and stops work
                                 heartbeat_thread=True,
                                 member_ids=getattr(self.transport, "member_ids", None))


def build_worker(config: WorkerConfig, plugins: Plugins | None = None
                 ) -> StandaloneWorker | DistributedWorker:
    """A distributed worker when the config names a group on a Kafka cluster, else a
    standalone one."""
    if config.distributed:
        return DistributedWorker(config, plugins)
    return StandaloneWorker(config, plugins)


def _load_connectors(files: list[str], plugins: Plugins, transformer: Any = None,
                     policy: Any = None) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """Read and validate every connector file, so a bad one stops the worker before it starts
    (connect-standalone exits on a connector it cannot create, too). Every problem of every
    file is reported at once; unknown keys are warnings."""
    from kctl.runtime.connector_config import known_keys, load_connector_file, unknown_keys

    loaded, problems, warnings = [], [], []
    for f in files:
        try:
            name, config = load_connector_file(f)
        except KctlError as e:
            problems.append(str(e) if f in str(e) else f"{f}: {e}")
            continue
        result = validate_config(plugins, config, transformer=transformer, policy=policy)
        warnings += [f"{f}: connector {name}: {w}" for w in unknown_keys(config, known_keys(result))]
        try:
            raise_if_invalid(result)
        except ValidationError as e:
            lines = [f"{k}: {m}" for k, ms in e.errors.items() for m in ms]
            problems.append(f"{f}: connector {name} is invalid:\n"
                            + "\n".join(f"  - {line}" for line in lines))
            continue
        loaded.append((name, config))
    if len(problems) == 1:
        raise ConnectorFilesError(problems[0], warnings)
    if problems:
        raise ConnectorFilesError(f"{len(problems)} connector files have problems:\n"
                                  + "\n".join(problems), warnings)
    return loaded, warnings


EXIT_GRACE_S = 10.0


def guard_exit(code: int, grace_s: float = EXIT_GRACE_S) -> None:
    """Make sure a stopped worker's process ends: once `run_worker` has returned, a thread
    left behind (a task abandoned while its SparkSession was still starting; py4j's
    callback server) can keep the interpreter from exiting, and a service manager then
    waits forever on a worker that said "worker stopped". Everything is stopped and
    flushed by then, so after `grace_s` the process leaves with `code` regardless."""
    import os
    import sys

    def leave() -> None:
        time.sleep(grace_s)
        stuck = [t.name for t in threading.enumerate()
                 if t is not threading.current_thread() and not t.daemon
                 and t is not threading.main_thread()]
        log.warning("The worker stopped but its process did not exit within %.0f s "
                    "(threads still running: %s); exiting", grace_s,
                    ", ".join(stuck) or "none; an exit handler hangs")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        logging.shutdown()
        os._exit(code)

    threading.Thread(target=leave, name="exit-guard", daemon=True).start()


class ConnectorFilesError(ConfigError):
    """Every problem of every connector file, and the warnings found on the way."""

    def __init__(self, message: str, warnings: list[str]):
        super().__init__(message)
        self.warnings = warnings


def run_worker(config_path: str | None, connector_files: list[str], console: Any,
               err_console: Any | None = None) -> int:
    """Run a standalone worker in the foreground until SIGINT/SIGTERM; returns an exit code.

    Progress goes to `console`, errors to `err_console` (stderr). The first Ctrl-C stops the
    worker cleanly (exit 0); a second one during a slow stop exits at once (130).
    """
    import os
    import signal

    from kctl.runtime.memory import configure_process_allocators

    configure_process_allocators()  # before the worker's threads (memory.py says why)
    err = err_console if err_console is not None else console
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            os._exit(ExitStatus.INTERRUPTED)  # asked twice: the user wants out now
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(config_path, connector_files, console, err, stop)
    finally:  # an in-process caller (a test) gets its own handlers back
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(config_path: str | None, connector_files: list[str], console: Any, err: Any,
           stop: threading.Event) -> int:
    """The body of run_worker, once its signal handlers are in place."""
    from rich.text import Text

    from kctl.runtime.worker_config import WorkerConfig

    def warn(warning: str) -> None:
        err.print(Text.assemble(("warning:", "yellow"), " ", warning), highlight=False,
                  soft_wrap=True)

    def error(e: BaseException) -> int:
        err.print(Text.assemble(("error:", "red"), " ", str(e)), highlight=False, soft_wrap=True)
        # a Kafka cluster nobody reaches is not a mistake in how kctl was called
        return ExitStatus.UNREACHABLE if isinstance(e, TransportError) else ExitStatus.USAGE

    try:
        config = WorkerConfig.from_file(config_path)
    except KctlError as e:
        return error(e)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python (the group driver's network client) logs every connection at INFO, half
    # a worker's log or more: WARNING unless asked (`kctl logger set kafka INFO`)
    logging.getLogger("kafka").setLevel(logging.WARNING)
    # its network thread warns whenever a callback held its event loop (another thread had
    # the GIL: busy tasks, Spark), a line every few seconds that asks nothing of the user
    logging.getLogger("kafka.net.selector").setLevel(logging.ERROR)
    # py4j logs each connection to Spark's JVM it opens and closes at INFO
    logging.getLogger("py4j").setLevel(logging.WARNING)
    install_log_redaction()  # before the first line that could carry a resolved secret
    try:
        if connector_files and config.distributed:
            raise ConfigError(
                "connector files are for standalone workers; a distributed worker (group.id "
                "is set) takes connectors through its REST API: kctl connector apply FILE")
        plugins = Plugins(config.get_list("plugin.path"))
        connectors, warnings = _load_connectors(connector_files, plugins,
                                                config.config_transformer,
                                                ConnectorPolicy.of(config))
        for warning in warnings:
            warn(warning)
        worker = build_worker(config, plugins)
    except ConnectorFilesError as e:
        code = error(e)
        for warning in e.warnings:
            warn(warning)
        return code
    except KctlError as e:
        return error(e)
    try:
        if not stop.is_set():
            worker.start()
            worker.spark.start_in_background()  # spark.start: eager (the default)
            where = (f"embedded log at {config.state_dir}" if config.embedded
                     else "Kafka " + ",".join(config.get_list(BOOTSTRAP_SERVERS_CONFIG)))
            if config.distributed:
                where += f", group {config.get_str('group.id')}"
            console.print(f"kctl worker {worker.herder.worker_id} ({where})", highlight=False,
                          markup=False)
            console.print(f"REST API listening on {worker.rest.url}", highlight=False,
                          markup=False)
        for name, cfg in connectors:
            if stop.is_set():
                break
            created, _ = worker.herder.put_connector_config(name, cfg)
            console.print(f"connector {name} {'created' if created else 'updated'}",
                          highlight=False, markup=False)
    except KctlError as e:
        code = error(e)
        worker.stop()
        return code
    except BaseException:
        worker.stop()
        raise
    try:
        while not stop.wait(0.5):
            pass
    finally:
        console.print("stopping worker...", highlight=False)
        worker.stop()
        console.print("worker stopped", highlight=False)
    return ExitStatus.SUCCESS


def prepare_spark(config_path: str | None, console: Any, err: Any) -> int:
    """Record Spark's class data now (what a worker's first local JVM does when it stops),
    so every worker of this machine or image starts its JVM from the archive."""
    from kctl.runtime import class_data

    def say(out: Any, text: str) -> None:
        out.print(text, highlight=False, markup=False, soft_wrap=True)

    try:
        config = WorkerConfig.from_file(config_path)
        engine = SparkEngine(config.spark_conf())
    except KctlError as e:
        say(err, f"error: {e}")
        return ExitStatus.USAGE
    if engine.class_data == "disabled" or engine.kind == "connect":
        why = ("spark.class.data.sharing is disabled" if engine.class_data == "disabled"
               else "a Spark Connect worker runs no JVM of its own")
        say(console, f"nothing to prepare: {why}")
        return ExitStatus.SUCCESS
    archive = class_data.ClassArchive.for_this_machine()
    if archive is None:
        say(err, "error: no java found (JAVA_HOME or PATH): Spark needs Java 17 or later")
        return ExitStatus.USAGE
    if not archive.ready:
        say(console, "starting Spark and recording the classes its jobs load...")
        try:
            engine.start_and_warm_up(rounds=1)
        finally:
            engine.stop()
        if not archive.ready:
            say(err, f"error: the JVM wrote no class data to {archive.path} (see the log)")
            return ExitStatus.ERROR
    say(console, f"Spark's class data: {archive.path}")
    return ExitStatus.SUCCESS
