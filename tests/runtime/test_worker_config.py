"""The worker refuses unknown or invalid keys, naming the key and the file."""

import pytest

from kctl.errors import ConfigError
from kctl.runtime.worker_config import WorkerConfig, load_config_file


def test_yaml_with_nested_spark_keys(tmp_path):
    f = tmp_path / "worker.yaml"
    f.write_text("state.dir: /tmp/x\nspark:\n  master: local[2]\n  driver.memory: 1g\n"
                 "listeners: http://127.0.0.1:9000\n")
    cfg = WorkerConfig.from_file(f)
    assert cfg.spark_conf() == {"spark.master": "local[2]", "spark.driver.memory": "1g"}
    assert cfg.listener() == ("127.0.0.1", 9000)
    assert cfg.embedded


def test_properties_file(tmp_path):
    f = tmp_path / "worker.properties"
    f.write_text("# comment\nbootstrap.servers=localhost:9092\noffset.flush.interval.ms: 500\n"
                 "plugin.path=/a,\\\n  /b\n")
    cfg = WorkerConfig.from_file(f)
    assert cfg.get_list("bootstrap.servers") == ["localhost:9092"] and not cfg.embedded
    assert cfg.get_int("offset.flush.interval.ms") == 500
    assert cfg.get_list("plugin.path") == ["/a", "/b"]


def test_unknown_key_names_key_file_and_suggestion(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("offset.flush.interval: 5\n")
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_file(f)
    msg = str(e.value)
    assert str(f) in msg and "'offset.flush.interval'" in msg and "offset.flush.interval.ms" in msg


def test_invalid_value_and_bad_listener(tmp_path):
    with pytest.raises(ConfigError, match=r"offset\.flush\.interval\.ms"):
        WorkerConfig({"offset.flush.interval.ms": "-5"}, "w.yaml")
    with pytest.raises(ConfigError, match=r"http://HOST:PORT"):
        WorkerConfig({"listeners": "127.0.0.1:8083"}, "w.yaml")


def test_yaml_that_is_not_a_mapping(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config_file(f)


def test_every_problem_in_a_file_is_reported_at_once(tmp_path):
    f = tmp_path / "w.properties"
    f.write_text("ofset.flush.interval.ms=100\noffset.flush.interval.ms=soon\nspark.master=local[1]\n")
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_file(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: 2 problems:")
    assert "'ofset.flush.interval.ms' (did you mean 'offset.flush.interval.ms'?)" in msg
    assert "'soon'" in msg and "offset.flush.interval.ms" in msg
    assert e.value.key == "ofset.flush.interval.ms" and e.value.source == str(f)
