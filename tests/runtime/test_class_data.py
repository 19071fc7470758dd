"""Spark's class-data archive: the first JVM records, later ones map, nothing half-written is
ever used, and a user can switch it off."""

import os
import subprocess
import sys

import pytest

from kctl.errors import ConfigError, ValidationError
from kctl.runtime import class_data
from kctl.runtime.class_data import ClassArchive
from kctl.runtime.spark import SparkEngine
from kctl.runtime.worker_config import WorkerConfig


def test_without_an_archive_the_jvm_records_one_under_a_name_of_its_own(tmp_path):
    archive = ClassArchive(tmp_path / "spark-x.jsa")
    opts = archive.java_options()
    assert f"-XX:ArchiveClassesAtExit={tmp_path}/spark-x.jsa.{os.getpid()}.partial" in opts
    assert "SharedArchiveFile" not in opts
    assert "-Xlog:cds=off" in opts  # hundreds of "Skipping ... Signed JAR" lines otherwise


def test_a_kept_recording_is_what_later_jvms_map(tmp_path):
    archive = ClassArchive(tmp_path / "spark-x.jsa")
    assert archive.keep_recording() is False  # the JVM wrote nothing: nothing is promoted
    assert not archive.ready
    archive.recording_path().write_bytes(b"class data")
    assert archive.keep_recording() is True
    assert archive.path.read_bytes() == b"class data"
    assert not archive.recording_path().exists()
    opts = archive.java_options()
    assert f"-XX:SharedArchiveFile={archive.path}" in opts
    assert "ArchiveClassesAtExit" not in opts


def test_recordings_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    archive = ClassArchive(tmp_path / "spark-x.jsa")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = archive.recording_path(int(dead.stdout))
    live = archive.recording_path(os.getppid())
    stale.write_bytes(b"half")
    live.write_bytes(b"being written")
    archive.java_options()
    assert not stale.exists()
    assert live.exists()


def test_the_archive_name_changes_with_java_and_spark_jars(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core_2.13-4.0.0.jar").touch()
    java = tmp_path / "java"
    java.write_bytes(b"#!")
    first = class_data.archive_key(str(java), str(jars))
    assert class_data.archive_key(str(java), str(jars)) == first
    (jars / "spark-core_2.13-4.0.0.jar").rename(jars / "spark-core_2.13-4.1.0.jar")
    upgraded_spark = class_data.archive_key(str(java), str(jars))
    assert upgraded_spark != first
    java.write_bytes(b"#!/another/java")
    assert class_data.archive_key(str(java), str(jars)) != upgraded_spark


def test_the_cache_directory_follows_kctl_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("KCTL_CACHE_DIR", str(tmp_path / "k"))
    assert class_data.cache_dir() == tmp_path / "k"
    monkeypatch.delenv("KCTL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert class_data.cache_dir() == tmp_path / "xdg" / "kctl"


def test_a_mistyped_setting_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"spark\.class\.data\.sharing"):
        SparkEngine({"spark.class.data.sharing": "sometimes"})
    with pytest.raises(ValidationError) as e:
        WorkerConfig({"spark.class.data.sharing": "sometimes"}, "worker.yaml")
    assert "spark.class.data.sharing" in str(e.value)


def test_a_worker_yaml_can_disable_it(tmp_path):
    """enabled/disabled, as Kafka names such switches: YAML would read on/off as booleans."""
    config = tmp_path / "worker.yaml"
    config.write_text("spark.class.data.sharing: disabled\n")
    assert SparkEngine(WorkerConfig.from_file(config).spark_conf()).class_data == "disabled"
    assert SparkEngine(WorkerConfig.from_file(None).spark_conf()).class_data == "enabled"


def test_disabled_adds_no_java_options(tmp_path, monkeypatch):
    monkeypatch.setenv("KCTL_CACHE_DIR", str(tmp_path))
    conf: dict[str, str] = {}
    assert SparkEngine({"spark.class.data.sharing": "disabled"})._class_archive(conf) is None
    assert conf == {}
    assert list(tmp_path.iterdir()) == []
    SparkEngine({})._class_archive(conf)  # enabled: records, next to the user's own options
    assert "-XX:ArchiveClassesAtExit=" in conf["spark.driver.defaultJavaOptions"]


def test_a_user_who_manages_class_data_sharing_gets_no_options_of_ours(tmp_path, monkeypatch):
    monkeypatch.setenv("KCTL_CACHE_DIR", str(tmp_path))
    for theirs in ("-XX:SharedArchiveFile=/opt/app.jsa", "-Xshare:off"):
        conf = {"spark.driver.extraJavaOptions": f"-Xmx2g {theirs}"}
        assert SparkEngine({})._class_archive(conf) is None
        assert "spark.driver.defaultJavaOptions" not in conf


@pytest.mark.spark
@pytest.mark.slow
def test_prepare_records_the_archive_that_a_strict_jvm_then_maps(tmp_path):
    """`kctl worker prepare` goes through a worker engine's own stop (the JVM exits, writes
    its class data, and the file is put in place); then a JVM told to fail rather than start
    without the archive (-Xshare:on) runs a Spark job from it."""
    env = {**os.environ, "KCTL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KCTL_SPARK_WITNESS", None)
    config = tmp_path / "worker.yaml"
    config.write_text("spark.master: local[1]\nspark.ui.enabled: 'false'\n")

    def prepare() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kctl.cli.main", "worker", "prepare",
                               str(config)], capture_output=True, text=True, env=env,
                              timeout=300)

    first = prepare()
    assert first.returncode == 0, first.stderr[-3000:]
    assert "recording the classes" in first.stdout
    archives = list((tmp_path / "cache").glob("spark-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10_000_000
    assert not list((tmp_path / "cache").glob("*.partial"))

    again = prepare()
    assert again.returncode == 0
    assert "recording" not in again.stdout and str(archives[0]) in again.stdout

    strict = subprocess.run([sys.executable, "-c", (
        "from kctl.runtime.spark import SparkEngine\n"
        "e = SparkEngine({'spark.master': 'local[1]', 'spark.ui.enabled': 'false',\n"
        "                 'spark.driver.extraJavaOptions': '-Xshare:on'})\n"
        "print(e.spark().range(5).count()); e.stop()\n")],
        capture_output=True, text=True, env=env, timeout=300)
    assert strict.returncode == 0, strict.stderr[-3000:]
    assert strict.stdout.strip().endswith("5")
