"""The worker's one long-lived SparkSession.

A session costs seconds and hundreds of MB of JVM, so every task of a worker shares
one, created only when the first task asks for it (client-only commands never start a
JVM) and stopped once, on shutdown.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kctl.errors import ConfigError, ConnectError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"

# Under Spark Connect the session lives in the server; these only make sense for a driver
# this process launches itself, and the Connect client rejects or ignores them.
_DRIVER_ONLY_PREFIXES = ("spark.master", "spark.driver.", "spark.executor.", "spark.jars",
                         "spark.ui.", "spark.remote", "spark.app.name")

# JDBC drivers Debian installs (libpostgresql-jdbc-java, libxerial-sqlite-jdbc-java,
# libmariadb-java). One session serves every task of a worker, so drivers are a worker
# setting: those found here join `spark.jars` unless `spark.jars` already names a jar of
# the same file name or `spark.jdbc.driver.lookup` is false.
DRIVER_JARS = ("postgresql.jar", "sqlite-jdbc.jar", "mariadb-java-client.jar")
DRIVER_DIR = "/usr/share/java"


def driver_jars(conf: Mapping[str, str], directory: str = DRIVER_DIR) -> list[str]:
    """The jars `spark.jars` should carry: the user's, then the installed JDBC drivers."""
    jars = [j.strip() for j in str(conf.get("spark.jars", "")).split(",") if j.strip()]
    if str(conf.get("spark.jdbc.driver.lookup", "true")).lower() == "false":
        return jars
    named = {os.path.basename(j) for j in jars}
    for name in DRIVER_JARS:
        path = os.path.join(directory, name)
        if name not in named and os.path.exists(path):
            jars.append(os.path.realpath(path))
    return jars


_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",  # the progress bar corrupts CLI output
    "spark.app.name": "kctl",
    "spark.sql.session.timeZone": "UTC",  # Connect timestamps are UTC epoch millis
}


def master_kind(master: str) -> str:
    """`local`, `standalone` or `connect`: what kind of cluster `spark.master` names."""
    m = master.strip()
    if m == "local" or m.startswith("local["):
        return "local"
    if m.startswith("spark://"):
        return "standalone"
    if m.startswith("sc://"):
        return "connect"
    raise ConfigError(
        f"Invalid spark.master {master!r}: expected local[N], spark://host:port or sc://host:port",
        key="spark.master")


class SparkEngine:
    """Lazily builds (thread-safely) and stops the worker's SparkSession.

    Every `spark.*` key is Spark configuration; `spark.master` picks local mode,
    a standalone cluster (`spark://`) or a Spark Connect server (`sc://`).
    """

    def __init__(self, conf: Mapping[str, str]):
        self.conf: dict[str, str] = {k: str(v) for k, v in conf.items() if k.startswith("spark.")}
        self.master = self.conf.get("spark.master") or DEFAULT_MASTER
        self.kind = master_kind(self.master)
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._stopped = False

    @property
    def started(self) -> bool:
        return self._session is not None

    @staticmethod
    def preload() -> None:
        """Import pyspark's SQL modules in the calling thread. Task threads import them
        lazily, and two threads importing them at once can deadlock on Python's module
        locks (seen after a restart: "deadlock detected by _ModuleLock('pyspark.sql.types')"
        failing a sink's first write), so the worker imports them once before any task runs."""
        import pyspark.sql
        import pyspark.sql.functions
        import pyspark.sql.types  # noqa: F401

    def spark(self) -> SparkSession:
        session = self._session
        if session is not None:
            return session
        with self._lock:
            if self._stopped:
                raise ConnectError("The Spark engine has been stopped (worker shutting down)")
            if self._session is None:
                self._session = self._build()
            return self._session

    def _effective_conf(self) -> dict[str, str]:
        conf = dict(_DEFAULTS)
        conf.update(self.conf)
        conf.pop("spark.master", None)
        conf.pop("spark.jdbc.driver.lookup", None)
        jars = driver_jars(self.conf)
        if jars:
            conf["spark.jars"] = ",".join(jars)
        return conf

    def _build(self) -> SparkSession:
        # pyspark ignores spark.pyspark.python; Python workers must run this interpreter
        # or they cannot import kctl (or even pyarrow).
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        try:
            from pyspark.sql import SparkSession
        except ImportError as e:  # pragma: no cover - pyspark is a hard dependency
            raise ConnectError(f"pyspark is not installed: {e}") from e
        conf = self._effective_conf()
        builder: Any = SparkSession.builder
        if self.kind == "connect":
            builder = builder.remote(self.master)
            conf = {k: v for k, v in conf.items() if not k.startswith(_DRIVER_ONLY_PREFIXES)}
        else:
            builder = builder.master(self.master)
        for k, v in conf.items():
            builder = builder.config(k, v)
        log.info("Starting SparkSession (master %s)", self.master)
        if witness := os.environ.get("KCTL_SPARK_WITNESS"):  # the test suite's Spark guard
            with open(witness, "a") as f:
                f.write(f"{os.getpid()} {self.master}\n")
        try:
            session = builder.getOrCreate()
        except Exception as e:
            raise ConnectError(f"Could not start Spark with master {self.master}: {e}") from e
        _freeze_startup_objects()
        return session

    def stop(self) -> None:
        """Stop the session if one was started; later spark() calls fail."""
        with self._lock:
            self._stopped = True
            session, self._session = self._session, None
        if session is not None:
            log.info("Stopping SparkSession")
            try:
                session.stop()
            except Exception as e:  # shutting down: report, never mask the real exit
                log.warning("Stopping Spark failed: %s", e)

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _freeze_startup_objects() -> None:
    """Take what is alive once Spark has started (pyspark, py4j, pandas, the worker: some
    100k objects) out of the garbage collector's sight.

    Tasks allocate records in batches that outlive young collections, so a full collection
    runs every few batches, and each one walked all of these objects again: measured here,
    that was 45% of a consumer's time reading 200k records. Frozen objects are still freed
    when their references go; only cycles among them are never collected.
    """
    gc.collect()
    gc.freeze()


def small_conf(master: str = "local[2]") -> dict[str, str]:
    """Small, fast-starting settings for tests and short CLI runs: a serial GC and the C1 JIT
    start the JVM in about two thirds of the time, at the cost of slower heavy jobs."""
    opts = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    return {
        "spark.master": master,
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": opts,
        "spark.executor.extraJavaOptions": opts,
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    }
