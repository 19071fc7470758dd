"""The worker's one long-lived SparkSession.

A session costs seconds and hundreds of MB of JVM, so every task of a worker shares one,
stopped once, on shutdown. `kctl worker start` builds it in the background as soon as the
worker is up and runs a few small jobs of the kinds tasks run (`spark.start: eager`, the
default), so a connector's first records do not pay for the JVM's start and its JIT's
warm-up; with `spark.start: lazy` it is built when the first task asks. Client-only
commands never start a JVM.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kctl.errors import ConfigError, ConnectError
from kctl.runtime import class_data

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


# kctl's own keys among the spark.* settings: never passed to Spark
START_CONFIG = "spark.start"  # eager (build and warm up when the worker starts) or lazy
_KCTL_KEYS = ("spark.jdbc.driver.lookup", START_CONFIG, class_data.CONFIG)
START_MODES = ("eager", "lazy")
START_ENV = "KCTL_SPARK_START"  # the default of spark.start when the config has none
# The warm-up: rounds of small jobs of the kinds tasks run, until the JIT has compiled
# Spark's hot paths (a job's fixed cost roughly halves over its first ~50 jobs here) or a
# task starts using the session (then user data goes first) or the time is up.
WARM_UP_ROUNDS = 12
WARM_UP_SECONDS = 30.0
# How long a stop waits for a JVM that records Spark's class data to write it (once a
# machine; about 10 s here)
RECORD_TIMEOUT = 60.0

# What tasks and the warm-up import lazily (see SparkEngine.preload).
_PRELOAD = ("pyarrow", "pyarrow.compute", "pyarrow.json", "pyarrow.parquet", "pyspark.sql",
            "pyspark.sql.functions", "pyspark.sql.types", "pyspark.sql.pandas.conversion",
            "pyspark.sql.pandas.serializers", "pyspark.sql.pandas.types")

_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",  # the progress bar corrupts CLI output
    "spark.app.name": "kctl",
    "spark.sql.session.timeZone": "UTC",  # Connect timestamps are UTC epoch millis
    # An idle worker gives heap back: G1 collects every 30 s when nothing else ran one and
    # shrinks the heap to at most 40% free (the JVM kept 450-650 MB idle after a pipeline).
    # The defaultJavaOptions slot, so a user's spark.driver.extraJavaOptions add to it.
    "spark.driver.defaultJavaOptions":
        "-XX:G1PeriodicGCInterval=30000 -XX:MaxHeapFreeRatio=40 -XX:MinHeapFreeRatio=15",
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
        # KCTL_SPARK_START sets the default for every worker of a shell or a test suite
        # (most test workers run no Spark task and should not pay for a JVM)
        self.start_mode = (self.conf.get(START_CONFIG) or os.environ.get(START_ENV)
                           or "eager").strip().lower()
        if self.start_mode not in START_MODES:
            raise ConfigError(f"Invalid {START_CONFIG} {self.start_mode!r}: expected "
                              "eager (start Spark with the worker) or lazy (at the first task)",
                              key=START_CONFIG)
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._stopped = False
        self._background: threading.Thread | None = None
        self._warming = threading.local()  # set on the warm-up thread
        self._asked = threading.Event()  # a task asked for the session
        self.class_data = class_data.mode_of(self.conf)
        # the archive this engine's JVM records, to be kept when the JVM exits
        self._recording: class_data.ClassArchive | None = None
        self.warm_up_jobs = 0  # jobs the warm-up ran (for logs and tests)

    @property
    def started(self) -> bool:
        return self._session is not None

    @staticmethod
    def preload() -> None:
        """Import pyspark's SQL modules in the calling thread. Task threads import them
        lazily, and two threads importing them at once can deadlock on Python's module
        locks (seen after a restart: "deadlock detected by _ModuleLock('pyspark.sql.types')"
        failing a sink's first write), so the worker imports them once before any task runs,
        and before the background start's warm-up jobs import the Arrow side of pyspark."""
        for name in _PRELOAD:
            importlib.import_module(name)

    def spark(self) -> SparkSession:
        if not getattr(self._warming, "on", False):
            self._asked.set()
        session = self._session
        if session is not None and _alive(session):
            return session
        with self._lock:
            if self._stopped:
                raise ConnectError("The Spark engine has been stopped (worker shutting down)")
            if self._session is not None and not _alive(self._session):
                # a local session is one per process: another engine of this process (an
                # in-process worker, a test's) stopped it under us; build a new one
                log.warning("The SparkSession was stopped elsewhere in this process; "
                            "starting a new one")
                self._session = None
            if self._session is None:
                session = self._build()
                if self._stopped:  # stop() came while the JVM started: it left it to us
                    _stop_quietly(session)
                    raise ConnectError("The Spark engine has been stopped (worker shutting down)")
                self._session = session
            return self._session

    def start_in_background(self) -> None:
        """With `spark.start: eager`, build the session and warm it up on a thread of its
        own, so the worker answers at once and the first connector finds Spark ready."""
        if self.start_mode != "eager" or self._background is not None:
            return
        self._background = threading.Thread(target=self.start_and_warm_up,
                                            name="spark-start", daemon=True)
        self._background.start()

    def start_and_warm_up(self, rounds: int | None = None) -> None:
        """Build the session and run the warm-up's jobs on this thread (`rounds` of them:
        one loads every class tasks use, which is what recording class data needs)."""
        self._warming.on = True
        started = time.monotonic()
        try:
            self.spark()
        except Exception as e:  # the first task that needs Spark reports it, with its trace
            if self._stopped:  # the worker is stopping (Ctrl-C reaches the JVM too)
                log.debug("Spark's background start ended by the stop: %s", e)
            else:
                log.warning("Starting Spark in the background failed (tasks will retry): %s",
                            e)
            return
        log.info("SparkSession ready in %.1f s; warming up", time.monotonic() - started)
        try:
            self._warm_up(time.monotonic() + WARM_UP_SECONDS, rounds)
        except Exception as e:  # stopped meanwhile, or a job failed: only the warm-up ends
            log.debug("Spark warm-up ended early: %s", e)
        log.info("Spark warm-up: %d jobs, %.1f s after the start", self.warm_up_jobs,
                 time.monotonic() - started)

    def _warm_up(self, deadline: float, rounds: int | None = None) -> None:
        """Small jobs of the kinds tasks run (Arrow in and out, Parquet, JSON and text
        reads and writes, a filter and a sort), in a temporary directory; stops as soon
        as a task asks for the session, the engine stops, or the deadline passes."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        # on a remote server (Connect) only the client's side warms here
        rounds = rounds or (2 if self.kind == "connect" else WARM_UP_ROUNDS)
        n = 2000
        table = pa.table({"id": pa.array(range(n), pa.int64()),
                          "name": [f"name-{i % 97}" for i in range(n)],
                          "score": pa.array([i / 7 for i in range(n)], pa.float64()),
                          "ok": [i % 3 == 0 for i in range(n)]})
        work = tempfile.mkdtemp(prefix="kctl-spark-warm-up-")
        try:
            rows = os.path.join(work, "rows.parquet")
            pq.write_table(table, rows)
            lines = os.path.join(work, "rows.json")
            with open(lines, "w") as f:
                f.writelines(f'{{"id":{i},"name":"name-{i % 97}","score":{i / 7},'
                             f'"ok":{str(i % 3 == 0).lower()}}}\n' for i in range(n))
            ddl = "id BIGINT, name STRING, score DOUBLE, ok BOOLEAN"
            jobs = self._warm_up_jobs(table, rows, lines, ddl, work)
            for r in range(rounds):
                for job in jobs:
                    if self._asked.is_set() or self._stopped or time.monotonic() > deadline:
                        return
                    job(r)
                    self.warm_up_jobs += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _warm_up_jobs(self, table: Any, rows: str, lines: str, ddl: str,
                      work: str) -> list[Any]:
        spark = self.spark()
        local = self.kind == "local"

        def arrow_round_trip(r: int) -> None:
            spark.createDataFrame(table).filter("id % 2 = 0").toArrow()

        def sort(r: int) -> None:
            spark.createDataFrame(table).orderBy("name", "id").limit(10).toArrow()

        if not local:  # executors elsewhere may not see this machine's files
            return [arrow_round_trip, sort]

        def json_read(r: int) -> None:  # FileSource's parse of a spooled file
            spark.read.schema(ddl).options(lineSep="\n", mode="PERMISSIVE").json(lines) \
                .toArrow()

        def write(r: int) -> None:  # FileSink's write of a Parquet file's rows
            spark.read.parquet(rows).coalesce(1).write.mode("overwrite") \
                .format(("json", "parquet", "csv")[r % 3]).save(os.path.join(work, f"out-{r}"))

        return [arrow_round_trip, json_read, write, sort]

    def _effective_conf(self) -> dict[str, str]:
        conf = dict(_DEFAULTS)
        conf.update(self.conf)
        conf.pop("spark.master", None)
        for key in _KCTL_KEYS:
            conf.pop(key, None)
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
        from pyspark import SparkContext

        conf = self._effective_conf()
        archive = None
        if self.kind != "connect" and SparkContext._gateway is None:  # this launches the JVM
            archive = self._class_archive(conf)
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
        if archive is not None and not archive.ready:
            self._recording = archive
        _freeze_startup_objects()
        return session

    def _class_archive(self, conf: dict[str, str]) -> class_data.ClassArchive | None:
        """Adds the class-data archive's options to the JVM's (class_data.py says why)."""
        if self.class_data == "disabled":
            return None
        key = "spark.driver.defaultJavaOptions"
        users = f"{conf.get(key, '')} {conf.get('spark.driver.extraJavaOptions', '')}"
        if any(flag in users for flag in class_data.USERS_OWN):
            return None  # the user manages class-data sharing: theirs alone
        try:
            archive = class_data.ClassArchive.for_this_machine()
            if archive is None:
                return None
            opts = archive.java_options()
        except OSError as e:  # an unwritable cache costs the speed-up, never the start
            log.info("Spark's class data cannot be cached (%s); starting without", e)
            return None
        conf[key] = f"{conf.get(key, '')} {opts}".strip()
        return archive

    def stop(self) -> None:
        """Stop the session if one was started; later spark() calls fail. A session still
        starting is not waited for: its builder stops it once it is up (and the JVM exits
        with the process anyway)."""
        self._stopped = True
        if not self._lock.acquire(timeout=1.0):
            log.info("SparkSession still starting; it stops once up")
            return
        try:
            session, self._session = self._session, None
        finally:
            self._lock.release()
        if session is not None:
            log.info("Stopping SparkSession")
            _stop_quietly(session)
        if self._recording is not None:
            archive, self._recording = self._recording, None
            _exit_jvm_keeping(archive)

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _alive(session: Any) -> bool:
    """False once the session's SparkContext was stopped (pyspark drops its Java handle);
    a Spark Connect session has no local context to lose."""
    try:
        return session.sparkContext._jsc is not None
    except Exception:  # Spark Connect: no sparkContext on the client
        return True


def _exit_jvm_keeping(archive: class_data.ClassArchive) -> None:
    """End the JVM this process launched, so it writes the class data it recorded, and put
    the archive in place. The next session of this process launches a new JVM."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None or proc.stdin is None:
        return
    log.info("Saving Spark's class data for faster starts (once per Java and Spark version)")
    try:
        gateway.shutdown()
    except Exception as e:  # the JVM may be gone already; its stdin still ends it
        log.debug("Closing the py4j gateway: %s", e)
    SparkContext._gateway = None
    SparkContext._jvm = None
    try:
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
        proc.wait(RECORD_TIMEOUT)
    except Exception as e:  # too slow or gone: the next worker records again
        log.info("Spark's JVM did not exit within %.0f s; class data not saved: %s",
                 RECORD_TIMEOUT, e)
        return
    if proc.returncode != 0:  # a JVM that died mid-write leaves a file that would crash
        log.info("Spark's JVM exited with %s; class data not saved", proc.returncode)
        return
    try:
        archive.keep_recording()
    except OSError as e:
        log.info("Spark's class data could not be saved to %s: %s", archive.path, e)


def _stop_quietly(session: Any) -> None:
    try:
        session.stop()
    except Exception as e:  # shutting down: report, never mask the real exit
        log.warning("Stopping Spark failed: %s", e)


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
