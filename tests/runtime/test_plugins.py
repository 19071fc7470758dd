"""Connector plugins: built-in aliases, dotted paths, plugin.path directories, entry points."""

import importlib.metadata
from collections.abc import Mapping

import pytest

from kctl.api import ConfigDef, SourceConnector, SourceTask
from kctl.errors import PluginError
from kctl.runtime.plugins import Plugins


def test_builtin_aliases_and_class_names_resolve_to_the_same_plugin():
    p = Plugins()
    src = p.connector_plugin("FileSource")
    assert p.connector_plugin("FileSourceConnector") is src
    assert p.connector_plugin("kctl.connectors.file.source.FileSourceConnector").cls is src.cls \
        or p.connector_plugin(src.class_name) is src
    assert p.connector_plugin("FileSink").type.value == "sink"


def test_plugin_path_directory_is_scanned(tmp_path):
    (tmp_path / "my_plugin_mod.py").write_text(
        "from kctl.api import SourceConnector, ConfigDef\n"
        "class EchoSourceConnector(SourceConnector):\n"
        "    def config(self): return ConfigDef()\n"
        "    def start(self, props): pass\n"
        "    def task_class(self): return None\n"
        "    def task_configs(self, n): return []\n"
        "    def stop(self): pass\n")
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('nope')\n")
    p = Plugins([str(tmp_path)])
    assert p.connector_plugin("EchoSource").class_name == "my_plugin_mod.EchoSourceConnector"
    assert any("broken_mod" in e and "nope" in e for e in p.load_errors)


def test_unknown_class_names_the_known_plugins():
    with pytest.raises(PluginError) as e:
        Plugins().connector_plugin("Nope")
    assert "FileSink" in str(e.value) and "FileSource" in str(e.value)


class PingSourceConnector(SourceConnector):
    """Stands for a connector some installed distribution registers as an entry point."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def version(self) -> str:
        return "7.1.2"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        pass


class NotAConnector:
    pass


def fake_entry_points(monkeypatch, group: str, *targets: tuple[str, str]) -> None:
    """Make importlib.metadata answer `group` with these (name, "module:attr") entry points."""
    eps = importlib.metadata.EntryPoints(
        importlib.metadata.EntryPoint(n, v, group) for n, v in targets)
    real = importlib.metadata.entry_points

    def entry_points(**params):
        return eps if params.get("group") == group else real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_connectors_are_found_through_the_kctl_connectors_entry_point_group(monkeypatch):
    with pytest.raises(PluginError):
        Plugins().connector_plugin("Ping")
    fake_entry_points(monkeypatch, "kctl.connectors",
                      ("Ping", f"{__name__}:PingSourceConnector"),
                      ("Gone", "kctl_no_such_distribution.connectors:Gone"),
                      ("Odd", f"{__name__}:NotAConnector"))
    p = Plugins()
    ping = p.connector_plugin("Ping")  # the entry point's name is an alias
    assert ping.cls is PingSourceConnector and ping.type.value == "source"
    assert p.connector_plugin("PingSource") is ping
    assert p.connector_plugin(f"{__name__}.PingSourceConnector") is ping
    assert "Ping" in p.known_names() and "Odd" not in p.known_names()
    assert ping.info().version == "7.1.2"
    # a broken distribution is reported, and hides neither the built-ins nor the others
    assert any(e.startswith("entry point Gone:") for e in p.load_errors), p.load_errors
    assert p.connector_plugin("FileSource").type.value == "source"


def test_all_plugins_lists_every_type_and_any_plugin_resolves_each():
    p = Plugins()
    by_type: dict[str, set[str]] = {}
    for info in p.all_plugins():
        by_type.setdefault(info.type, set()).add(info.class_name.rsplit(".", 1)[-1])
    assert {"FileSourceConnector"} <= by_type["source"] and {"FileSinkConnector"} <= by_type["sink"]
    assert {"CastValue", "RegexRouter", "Filter"} <= by_type["transformation"]
    assert by_type["predicate"] == {"TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"}
    assert by_type["header_converter"] == {
        "JsonConverter", "StringConverter", "ByteArrayConverter"}
    assert by_type["converter"] == by_type["header_converter"] | {
        "AvroConverter", "JsonSchemaConverter", "ProtobufConverter"}
    assert p.any_plugin("Cast$Value")[0] == "transformation"
    assert p.any_plugin("org.apache.kafka.connect.transforms.predicates.HasHeaderKey")[0] \
        == "predicate"
    assert p.any_plugin("StringConverter")[0] == "converter"
    assert p.any_plugin("FileSink")[0] == "sink"
    with pytest.raises(PluginError, match="NoSuchPlugin"):
        p.any_plugin("NoSuchPlugin")
