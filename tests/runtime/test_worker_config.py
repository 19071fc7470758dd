"""The worker refuses unknown or invalid keys, naming the key and the file."""

import pytest

from kctl.errors import ConfigError
from kctl.runtime.worker_config import WorkerConfig, load_config_file, parse_properties


def test_yaml_with_nested_spark_keys(tmp_path):
    f = tmp_path / "worker.yaml"
    f.write_text("state.dir: /tmp/x\nspark:\n  master: local[2]\n  driver.memory: 1g\n"
                 "listeners: http://127.0.0.1:9000\n")
    cfg = WorkerConfig.from_file(f)
    assert cfg.spark_conf() == {"spark.master": "local[2]", "spark.driver.memory": "1g",
                                # REST on loopback: Spark listens there only (Security)
                                "spark.driver.bindAddress": "127.0.0.1",
                                "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false"}
    assert cfg.listener() == ("127.0.0.1", 9000)
    assert cfg.embedded


def test_properties_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    f = tmp_path / "worker.properties"
    f.write_text("# comment\nbootstrap.servers=localhost:9092\noffset.flush.interval.ms: 500\n"
                 f"plugin.path={a},\\\n  {b}\n")
    cfg = WorkerConfig.from_file(f)
    assert cfg.get_list("bootstrap.servers") == ["localhost:9092"] and not cfg.embedded
    assert cfg.get_int("offset.flush.interval.ms") == 500
    assert cfg.get_list("plugin.path") == [str(a), str(b)]



def test_properties_read_as_java_reads_them():
    # What a Kafka Connect .properties file may hold and java.util.Properties accepts.
    text = (
        "! a comment\n"
        "# another\n"
        "equals = one\n"
        "colon:two\n"
        "space three\n"
        "tabbed\t\tfour\n"
        "key\\ with\\:escapes=a\\=b\n"
        "continued = first, \\\n"
        "            second\n"
        "unicode = caf\\u00e9\n"
        "escapes = tab\\there\\nnewline\n"
        "empty\n"
        "repeated = old\n"
        "repeated = new\n"
    )
    assert parse_properties(text) == {
        "equals": "one",
        "colon": "two",
        "space": "three",
        "tabbed": "four",
        "key with:escapes": "a=b",
        "continued": "first, second",
        "unicode": "caf\u00e9",
        "escapes": "tab\there\nnewline",
        "empty": "",
        "repeated": "new",
    }

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


@pytest.mark.parametrize("master", ["yarn", "local[x]", "local[2", "spark://", "sc://", "k8s://h"])
def test_a_spark_master_spark_cannot_use_is_refused_naming_key_and_file(master):
    with pytest.raises(ConfigError) as e:
        WorkerConfig({"spark.master": master}, "w.yaml")
    msg = str(e.value)
    assert msg.startswith("w.yaml: ") and "spark.master" in msg and repr(master) in msg
    assert "spark://HOST:PORT" in msg and e.value.key == "spark.master"


@pytest.mark.parametrize("master", ["local", "local[4]", "local[*]", "local[2,3]",
                                    "spark://10.0.0.1:7077", "sc://localhost:15002"])
def test_the_spark_masters_kctl_supports_are_accepted(master):
    assert WorkerConfig({"spark.master": master}).spark_conf()["spark.master"] == master


def test_converters_must_resolve_and_accept_their_settings():
    with pytest.raises(ConfigError) as e:
        WorkerConfig({"key.converter": "NoSuchConverter",
                      "value.converter": "json", "value.converter.schemas.enable": "maybe"},
                     "w.yaml")
    assert set(e.value.errors) == {"key.converter", "value.converter.schemas.enable"}
    msg = str(e.value)
    assert msg.startswith("w.yaml: 2 problems:")
    assert "'NoSuchConverter'" in msg and "StringConverter" in msg  # names the known ones
    assert "'maybe'" in msg
    ok = WorkerConfig({"key.converter": "org.apache.kafka.connect.storage.StringConverter",
                       "value.converter": "kctl.runtime.converters.ByteArrayConverter"})
    assert ok.get_str("key.converter").endswith("StringConverter")


def test_plugin_path_entries_must_be_existing_directories(tmp_path):
    plain = tmp_path / "plugin.py"
    plain.write_text("")
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as e:
        WorkerConfig({"plugin.path": [str(tmp_path), str(missing), str(plain)]}, "w.yaml")
    msg = str(e.value)
    assert set(e.value.errors) == {"plugin.path"} and msg.startswith("w.yaml: 2 problems:")
    assert f"'{missing}' for configuration plugin.path: no such directory" in msg
    assert f"'{plain}' for configuration plugin.path: not a directory" in msg


def test_a_state_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "state"
    f.write_text("")
    with pytest.raises(ConfigError, match=r"state\.dir.*not a directory"):
        WorkerConfig({"state.dir": str(f)}, "w.yaml")


def test_semantic_problems_are_reported_with_parse_problems_at_once(tmp_path):
    with pytest.raises(ConfigError) as e:
        WorkerConfig({"offset.flush.interval.ms": "soon", "spark.master": "yarn",
                      "listeners": "127.0.0.1:8083", "bogus": 1}, "w.yaml")
    assert set(e.value.errors) == {"offset.flush.interval.ms", "spark.master", "listeners",
                                   "bogus"}
    assert str(e.value).startswith("w.yaml: 4 problems:")


@pytest.mark.parametrize("content, fragment", [
    (b"state.dir: [unclosed\n", "not valid YAML: "),
    (b"\xff\xfe not text", "not UTF-8"),
])
def test_unreadable_files_are_one_line_errors_naming_the_file(tmp_path, content, fragment):
    f = tmp_path / "w.yaml"
    f.write_bytes(content)
    with pytest.raises(ConfigError) as e:
        load_config_file(f)
    assert str(f) in str(e.value) and fragment in str(e.value)
    assert "\n" not in str(e.value)  # PyYAML's caret drawing is folded into one line
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing\.yaml"):
        load_config_file(tmp_path / "missing.yaml")


DISTRIBUTED = {"bootstrap.servers": "localhost:9092", "group.id": "connect-cluster",
               "config.storage.topic": "c", "offset.storage.topic": "o",
               "status.storage.topic": "s"}


def test_exactly_once_sources_are_standalone_only_and_never_weakened_silently():
    assert WorkerConfig({}).exactly_once_source  # standalone: on by default
    assert not WorkerConfig({"exactly.once.source.support": "disabled"}).exactly_once_source
    # a cluster cannot fence a zombie's producers yet: at-least-once, as Kafka's default
    assert not WorkerConfig(DISTRIBUTED).exactly_once_source
    with pytest.raises(ConfigError) as e:
        WorkerConfig({**DISTRIBUTED, "exactly.once.source.support": "enabled"})
    assert "exactly.once.source.support=enabled is not available on a distributed worker" \
        in str(e.value)
    assert "zombie" in str(e.value)
