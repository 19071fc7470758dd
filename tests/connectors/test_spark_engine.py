"""The SparkEngine: one session per worker, built lazily and once, torn down once."""

from __future__ import annotations

import gc
import threading
import time

import pytest
from pyspark.sql import SparkSession
from support.waiting import wait_until

from kctl.errors import ConfigError, ConnectError
from kctl.runtime.spark import SparkEngine, master_kind, small_conf


class RecordingBuilder:
    """Stands in for SparkSession.builder: records what the engine asks for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.session = FakeSession()

    def master(self, m: str) -> RecordingBuilder:
        self.calls.append(("master", m))
        return self

    def remote(self, url: str) -> RecordingBuilder:
        self.calls.append(("remote", url))
        return self

    def config(self, k: str, v: str) -> RecordingBuilder:
        self.calls.append(("config", k, v))
        return self

    def getOrCreate(self) -> FakeSession:
        self.calls.append(("getOrCreate",))
        time.sleep(0.05)  # widen the window a missing lock would let other threads in
        return self.session


class FakeSession:
    def __init__(self) -> None:
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1


@pytest.fixture
def builder(monkeypatch) -> RecordingBuilder:
    b = RecordingBuilder()
    monkeypatch.setattr(SparkSession, "builder", b)
    return b


def test_nothing_starts_until_a_task_asks_and_then_only_once(builder):
    engine = SparkEngine({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"})
    assert not engine.started and builder.calls == []
    sessions = []
    threads = [threading.Thread(target=lambda: sessions.append(engine.spark())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sessions) == 8 and all(s is builder.session for s in sessions)
    assert builder.calls.count(("getOrCreate",)) == 1
    assert ("master", "local[2]") in builder.calls
    conf = {c[1]: c[2] for c in builder.calls if c[0] == "config"}
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.ui.showConsoleProgress"] == "false"
    assert "spark.master" not in conf


def test_objects_alive_once_spark_has_started_are_frozen_out_of_the_collector(builder):
    gc.unfreeze()
    try:
        engine = SparkEngine({})
        assert gc.get_freeze_count() == 0  # creating the engine starts nothing
        engine.spark()
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()


def test_default_master_is_all_local_cores(builder):
    SparkEngine({}).spark()
    assert ("master", "local[*]") in builder.calls


def test_spark_connect_masters_use_a_remote_session_without_driver_settings(builder):
    engine = SparkEngine({"spark.master": "sc://127.0.0.1:15002", "spark.driver.memory": "1g",
                          "spark.sql.ansi.enabled": "true"})
    engine.spark()
    assert ("remote", "sc://127.0.0.1:15002") in builder.calls
    assert not any(c[0] == "master" for c in builder.calls)
    keys = {c[1] for c in builder.calls if c[0] == "config"}
    assert "spark.sql.ansi.enabled" in keys and "spark.driver.memory" not in keys


def test_standalone_cluster_master_is_passed_through(builder):
    SparkEngine({"spark.master": "spark://10.0.0.1:7077"}).spark()
    assert ("master", "spark://10.0.0.1:7077") in builder.calls


def test_stop_stops_once_and_later_requests_fail(builder):
    engine = SparkEngine({})
    session = engine.spark()
    engine.stop()
    engine.stop()
    assert session.stops == 1
    with pytest.raises(ConnectError, match="stopped"):
        engine.spark()


def test_stop_without_a_session_starts_nothing(builder):
    SparkEngine({}).stop()
    assert builder.calls == []


@pytest.mark.parametrize("master,kind", [("local", "local"), ("local[4]", "local"),
                                         ("spark://h:7077", "standalone"), ("sc://h:15002", "connect")])
def test_master_kinds(master, kind):
    assert master_kind(master) == kind


def test_an_unknown_master_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError) as e:
        SparkEngine({"spark.master": "yarn"})
    assert e.value.key == "spark.master"


@pytest.mark.spark
def test_the_real_session_runs_jobs_on_arrow(engine):
    import pyarrow as pa

    spark = engine.spark()
    assert spark is engine.spark()
    out = spark.createDataFrame(pa.table({"x": [1, 2, 3]})).selectExpr("x * 2 AS y").toArrow()
    assert out.column("y").to_pylist() == [2, 4, 6]
    assert spark.conf.get("spark.ui.showConsoleProgress") == "false"


def test_lazy_start_starts_nothing_in_the_background_and_spark_start_stays_out_of_spark(builder):
    engine = SparkEngine({"spark.start": "lazy"})
    engine.start_in_background()
    assert not engine.started and builder.calls == []
    engine.spark()
    assert "spark.start" not in {c[1] for c in builder.calls if c[0] == "config"}


def test_an_unknown_start_mode_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="eager") as e:
        SparkEngine({"spark.start": "sometimes"})
    assert e.value.key == "spark.start"


def test_a_stop_during_the_background_start_does_not_wait_for_it(builder, monkeypatch):
    """A worker stopped while its JVM still starts exits without waiting: the builder stops
    the session once it is up, and no task gets it."""
    release = threading.Event()
    building = threading.Event()
    create = builder.getOrCreate

    def slow() -> FakeSession:
        building.set()
        release.wait(30)
        return create()

    monkeypatch.setattr(builder, "getOrCreate", slow)
    engine = SparkEngine({"spark.start": "eager"})
    engine.start_in_background()
    assert building.wait(10)
    engine.stop()  # returns while the session is being built
    assert not release.is_set()
    release.set()
    engine._background.join(10)
    assert not engine._background.is_alive()
    assert builder.session.stops == 1 and not engine.started
    with pytest.raises(ConnectError, match="stopped"):
        engine.spark()


@pytest.mark.spark
def test_an_eager_engine_starts_and_warms_up_until_a_task_asks():
    """spark.start eager: the session is built and warmed with small jobs on a thread of
    its own; the first task that asks gets it and the warm-up gives way."""
    from kctl.runtime.spark import small_conf

    engine = SparkEngine({**small_conf("local[1]"), "spark.start": "eager"})
    try:
        engine.start_in_background()
        wait_until(lambda: engine.warm_up_jobs >= 4, timeout=120,
                   message="the warm-up ran a round of jobs")
        spark = engine.spark()  # a task asks
        engine._background.join(60)
        assert not engine._background.is_alive(), "the warm-up stopped for the task"
        jobs = engine.warm_up_jobs
        assert spark.range(5).count() == 5
        assert engine.warm_up_jobs == jobs
    finally:
        engine.stop()


def test_a_session_start_is_witnessed_for_the_suites_spark_guard(builder, monkeypatch, tmp_path):
    """tests/conftest.py names the file in KCTL_SPARK_WITNESS; a worker process a test
    started inherits it, so the guard sees Spark started there too."""
    import os

    witness = tmp_path / "starts"
    monkeypatch.setenv("KCTL_SPARK_WITNESS", str(witness))
    engine = SparkEngine({"spark.master": "local[1]"})
    assert not witness.exists()
    engine.spark()
    engine.spark()
    assert witness.read_text() == f"{os.getpid()} local[1]\n"  # one line per session built


def test_kctl_spark_start_is_the_default_and_the_config_key_wins(monkeypatch):
    monkeypatch.setenv("KCTL_SPARK_START", "lazy")
    assert SparkEngine({}).start_mode == "lazy"
    assert SparkEngine({"spark.start": "eager"}).start_mode == "eager"
    monkeypatch.delenv("KCTL_SPARK_START")
    assert SparkEngine({}).start_mode == "eager"
    monkeypatch.setenv("KCTL_SPARK_START", "sometimes")
    with pytest.raises(ConfigError, match=r"spark\.start"):
        SparkEngine({})


def test_a_session_another_engine_of_the_process_stopped_is_built_again(engine):
    """A local SparkSession is one per process: a second engine in it (an in-process worker,
    a test's) is handed the same session, and stopping that engine stops it for both."""
    assert engine.spark().range(2).count() == 2
    other = SparkEngine(small_conf("local[2]"))
    assert other.spark().sparkContext is engine.spark().sparkContext
    other.stop()
    # the first engine notices, builds a new session and runs on it
    assert engine.spark().range(3).count() == 3
