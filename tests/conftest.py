import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from support.broker import start_broker
from support.cluster import FETCH_MAX_WAIT_MS, SINK_CONSUMERS
from support.databases import Database, start_mariadb, start_postgres

from kctl.runtime.spark import SparkEngine

# pytest-xdist's workers run with COLUMNS=80 and LINES=24 set; the CLI's consoles would take
# them as the terminal's size (a test widening the terminal later could not). Every run sees
# what a serial run in CI sees: no terminal size given.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# Markers mean what they say: a test that uses the real broker or a SparkSession carries
# `broker` or `spark`, so `-m "not spark and not broker and not slow"` is a fast suite.
SPARK_FIXTURES = {"engine"}
BROKER_FIXTURES = {"kafka_broker", "tls_broker", "sasl_broker", "sasl_front_broker"}
BROKER_PARAMS = {"broker", "kafka"}  # transport_settings[broker], transport[kafka]


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        params = {str(v) for v in callspec.params.values()} if callspec else set()
        if names & BROKER_FIXTURES or params & BROKER_PARAMS:
            item.add_marker(pytest.mark.broker)
        if names & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        items[:] = slow_at_the_heads(items, workers)


def slow_at_the_heads(items: list, workers: int) -> list:
    """The order that lets xdist's worksteal share the worker-process stories out.

    worksteal splits the collection into one contiguous part per test process and lets an
    idle process steal from the tail of a busy one. The stories with worker processes take
    a minute or two each and mostly wait: dealt round-robin to the heads of the parts they
    start at once, side by side, and the quick tests behind them are what gets stolen.
    The order is the same in every test process, as xdist requires.
    """
    slow = [item for item in items if item.get_closest_marker("slow")]
    quick = [item for item in items if not item.get_closest_marker("slow")]
    parts: list[list] = [[] for _ in range(workers)]
    for index, item in enumerate(slow):
        parts[index % workers].append(item)
    remaining = len(items)
    for number, part in enumerate(parts):
        size = remaining // (workers - number)  # worksteal's first split
        remaining -= size
        take = max(0, size - len(part))
        part.extend(quick[:take])
        del quick[:take]
    parts[-1].extend(quick)
    return [item for part in parts for item in part]


def prepare_spark_classes() -> None:
    """Record Spark's class data before any test starts a JVM (once a machine: the archive
    stays in kctl's cache), so the ~50 JVMs the suite starts all map it, and no worker a
    test stops spends its stop writing it. Done here, in the one process that runs before
    xdist's test processes (or the only one), not in each of them."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from kctl.runtime.class_data import ClassArchive

    archive = ClassArchive.for_this_machine()
    if archive is None or archive.ready:
        return
    done = subprocess.run([sys.executable, "-m", "kctl.cli.main", "worker", "prepare"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:  # the tests still run, each JVM only slower
        print(f"kctl worker prepare failed:\n{done.stdout}{done.stderr[-3000:]}",
              file=sys.stderr)


prepare_spark_classes()

# Worker processes a test starts inherit this; a SparkEngine that builds a session writes
# "pid master" into the file (kctl/runtime/spark.py), so the guard below sees Spark started in
# a worker subprocess too. Lines written during a test's setup and call belong to it.
SPARK_WITNESS = Path(tempfile.mkdtemp(prefix="kctl-spark-witness-")) / "starts"
SPARK_WITNESS.touch()
os.environ["KCTL_SPARK_WITNESS"] = str(SPARK_WITNESS)
# A worker process starts Spark when it starts (spark.start: eager) unless told otherwise;
# most workers the tests start run no Spark task, so they start it when a task asks. A test
# of the eager start says so in its worker's config.
os.environ.setdefault("KCTL_SPARK_START", "lazy")
_witnessed_from = pytest.StashKey[int]()


def pytest_runtest_setup(item):
    item.stash[_witnessed_from] = SPARK_WITNESS.stat().st_size


def spark_in_subprocesses(item) -> list[str]:
    with open(SPARK_WITNESS) as f:
        f.seek(item.stash.get(_witnessed_from, 0))
        return [line.split(" ", 1)[1].strip() for line in f
                if line.split(" ", 1)[0] != str(os.getpid())]  # this process: see below


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a test that starts a SparkSession, here or in a worker process it started,
    without the `spark` marker."""
    started: list[str] = []
    build = SparkEngine._build

    def recording(self):
        session = build(self)
        if type(session).__module__.startswith("pyspark"):  # not a test's stand-in builder
            started.append(self.master)
        return session

    SparkEngine._build = recording
    try:
        result = yield
    finally:
        SparkEngine._build = build
    if item.get_closest_marker("spark") is None:
        if started:
            pytest.fail(f"{item.nodeid} starts Spark ({started[0]}) but is not marked "
                        "@pytest.mark.spark", pytrace=False)
        if elsewhere := spark_in_subprocesses(item):
            pytest.fail(f"{item.nodeid} starts Spark ({elsewhere[0]}) in a worker process "
                        "but is not marked @pytest.mark.spark", pytrace=False)
    return result


@pytest.fixture(scope="session")
def kafka_broker():
    """One real Kafka-protocol broker for the test session (in-memory: fresh every run)."""
    broker = start_broker()
    yield broker
    broker.stop()


@pytest.fixture(params=["embedded", "broker"])
def transport_settings(request):
    """Worker settings for each transport: the embedded log, then the real broker."""
    if request.param == "broker":
        return {"bootstrap.servers": request.getfixturevalue("kafka_broker").bootstrap,
                "topic.creation.default.replication.factor": 1,
                "fetch.max.wait.ms": FETCH_MAX_WAIT_MS, **SINK_CONSUMERS}
    return {}


@pytest.fixture(scope="session")
def postgres_server():
    """PostgreSQL on loopback: the running one, or a throwaway cluster (tests/support)."""
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mariadb_server():
    server = start_mariadb()
    yield server
    server.stop()


@pytest.fixture
def postgres_db(postgres_server):
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    with postgres_server.database() as db:
        yield db


@pytest.fixture
def mariadb_db(mariadb_server):
    with mariadb_server.database() as db:
        yield db


@pytest.fixture
def sqlite_db(tmp_path):
    return Database(None, str(tmp_path / "test.db"))


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def jdbc_db(request):
    """Each database the JDBC connectors support, one after the other."""
    return request.getfixturevalue({"sqlite": "sqlite_db", "postgresql": "postgres_db",
                                    "mariadb": "mariadb_db"}[request.param])
