"""Connector plugins: built-in aliases, dotted paths, plugin.path directories."""

import pytest

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
