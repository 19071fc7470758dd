"""A bad plugin never hurts the worker: its task fails with the trace, a task or a connector
that will not stop is abandoned with one warning, a plugin that cannot be imported is
listed as broken, and a name two plugins claim is refused naming both.

(A task failing in `poll` is tests/runtime/test_standalone.py's
test_task_failure_is_reported_with_its_trace_and_restart_only_failed; one stuck in `poll`
is its test_a_task_that_ignores_stop_is_abandoned_after_the_graceful_timeout.)
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from support.inprocess import running_worker, unique
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.api import (
    ConfigDef,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kctl.errors import PluginError
from kctl.runtime.plugins import Plugins
from kctl.states import State

REPO = Path(__file__).resolve().parents[2]
RELEASE = threading.Event()  # lets a task blocked in stop() go at the end of the test


def _fail_if(props: Mapping[str, str], step: str) -> None:
    if props.get("fail.in") == step:
        raise RuntimeError(f"the plugin broke in {step}")


class _Connector:
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        if self.props.get("block.in") == "connector stop":
            RELEASE.wait(60)


class BadSourceConnector(_Connector, SourceConnector):
    def task_class(self) -> type[SourceTask]:
        return BadSourceTask


class BadSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = props
        _fail_if(props, "start")

    def poll(self) -> Sequence[SourceRecord]:
        _fail_if(self.props, "poll")
        return [SourceRecord(self.props["topic"], None, None, None, None, "x")]

    def stop(self) -> None:
        if self.props.get("block.in") == "stop":
            RELEASE.wait(60)


class BadSinkConnector(_Connector, SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return BadSinkTask


class BadSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = props
        _fail_if(props, "start")

    def put(self, records: Sequence[SinkRecord]) -> None:
        if records:
            _fail_if(self.props, "put")

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(("kind", "step"), [("Source", "start"), ("Source", "poll"),
                                            ("Sink", "start"), ("Sink", "put")])
def test_a_task_that_raises_is_failed_with_its_trace_and_the_worker_goes_on(tmp_path, kind, step):
    with running_worker(tmp_path / "state", {}) as w:
        h = w.herder
        name, topic = unique("bad"), unique("t")
        h.create_connector(name, {"connector.class": f"{__name__}.Bad{kind}Connector",
                                  "topic": topic, "topics": topic, "fail.in": step,
                                  "value.converter": "StringConverter"})
        if kind == "Sink":
            h.create_connector(unique("feed"), {"connector.class": f"{__name__}.BadSourceConnector",
                                                "topic": topic, "value.converter": "StringConverter"})
        status = wait_until(lambda: (s := h.connector_status(name)).tasks
                            and s.tasks[0].state is State.FAILED and s, message="task FAILED")
        assert f"RuntimeError: the plugin broke in {step}" in status.tasks[0].trace
        assert status.state is State.RUNNING  # the connector, and the worker, carry on
        other = unique("good")
        h.create_connector(other, {"connector.class": f"{__name__}.BadSourceConnector",
                                   "topic": unique("t"), "value.converter": "StringConverter"})
        wait_until(lambda: [t.state for t in h.connector_status(other).tasks] == [State.RUNNING])


def test_a_task_that_blocks_in_stop_is_abandoned_with_one_warning_and_the_worker_stops(
        tmp_path, caplog):
    RELEASE.clear()
    try:
        with caplog.at_level(logging.WARNING, logger="kctl.runtime.worker"):
            stopped = threading.Event()
            with running_worker(tmp_path / "state",
                                {"task.shutdown.graceful.timeout.ms": 300}) as w:
                name = unique("stuck")
                w.herder.create_connector(name, {
                    "connector.class": f"{__name__}.BadSourceConnector", "topic": unique("t"),
                    "block.in": "stop", "value.converter": "StringConverter"})
                wait_until(lambda: [t.state for t in w.herder.connector_status(name).tasks]
                           == [State.RUNNING])
                stopping = threading.Thread(target=lambda: (w.stop(), stopped.set()))
                stopping.start()
                assert stopped.wait(30), "the worker waited for a task that never stops"
        warnings = [r for r in caplog.records if name in r.getMessage()
                    and r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "did not stop within 0.3s" in warnings[0].getMessage()
        assert warnings[0].levelno == logging.WARNING
    finally:
        RELEASE.set()


def test_a_connector_that_blocks_in_stop_is_abandoned_and_the_worker_goes_on(tmp_path, caplog):
    RELEASE.clear()
    try:
        with caplog.at_level(logging.WARNING, logger="kctl.runtime.worker"), \
                running_worker(tmp_path / "state", {"task.shutdown.graceful.timeout.ms": 300}) as w:
            h = w.herder
            name = unique("stuck")
            h.create_connector(name, {"connector.class": f"{__name__}.BadSourceConnector",
                                      "topic": unique("t"), "block.in": "connector stop",
                                      "value.converter": "StringConverter"})
            wait_until(lambda: [t.state for t in h.connector_status(name).tasks]
                       == [State.RUNNING])
            deleting = threading.Thread(target=h.delete_connector, args=(name,), daemon=True)
            deleting.start()
            deleting.join(30)
            assert not deleting.is_alive(), "deleting waited for a connector that never stops"
            assert name not in h.connectors()
            other = unique("good")
            h.create_connector(other, {"connector.class": f"{__name__}.BadSourceConnector",
                                       "topic": unique("t"), "value.converter": "StringConverter"})
            wait_until(lambda: [t.state for t in h.connector_status(other).tasks]
                       == [State.RUNNING], message="the next connector runs")
        warnings = [r.getMessage() for r in caplog.records if name in r.getMessage()
                    and r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "did not stop within 0.3s" in warnings[0], warnings
    finally:
        RELEASE.set()


def broken_distribution(site: Path) -> None:
    """An installed distribution whose kctl.connectors entry point fails to import."""
    info = site / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[kctl.connectors]\nBrokenThing = broken_plugin:BrokenThingConnector\n")
    (site / "broken_plugin.py").write_text("import no_such_module_anywhere\n")


@pytest.mark.slow
def test_an_entry_point_that_fails_to_import_is_listed_broken_and_the_worker_starts(tmp_path):
    site = tmp_path / "site"
    broken_distribution(site)
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "kctl.cli.main", "plugins", "list", "--local",
                        "-o", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert listed["broken"] == [{
        "plugin": "entry point BrokenThing (distribution broken-plugin)",
        "error": "ModuleNotFoundError: No module named 'no_such_module_anywhere'"}]
    assert "FileSource" in {p["aliases"][0] for p in listed["plugins"]}
    table = subprocess.run([sys.executable, "-m", "kctl.cli.main", "plugins", "list", "--local"],
                           capture_output=True, text=True, env=env, timeout=120).stdout
    assert "broken plugin" in table and "no_such_module_anywhere" in table

    (tmp_path / "worker.yaml").write_text(json.dumps({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER, "spark.start": "lazy"}))
    w = Worker(tmp_path, env={"PYTHONPATH": env["PYTHONPATH"]})
    w.start()
    try:
        plugins = {p["class"] for p in json.loads(w.kctl("plugins", "list", "-o", "json").stdout)}
        assert "kctl.connectors.file.source.FileSourceConnector" in plugins
        assert "entry point BrokenThing (distribution broken-plugin): ModuleNotFoundError" \
            in w.log()
    finally:
        w.stop()


class TwinSourceConnector(BadSourceConnector):
    pass


class OtherTwinSourceConnector(BadSourceConnector):
    pass


def test_two_plugins_claiming_one_name_are_both_named_and_neither_is_picked(monkeypatch):
    import importlib.metadata as md

    eps = md.EntryPoints([md.EntryPoint("Twin", f"{__name__}:TwinSourceConnector", "kctl.connectors"),
                          md.EntryPoint("Twin", f"{__name__}:OtherTwinSourceConnector",
                                        "kctl.connectors")])
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points",
                        lambda **p: eps if p.get("group") == "kctl.connectors" else real(**p))
    plugins = Plugins()
    first, second = f"{__name__}.TwinSourceConnector", f"{__name__}.OtherTwinSourceConnector"
    assert plugins.ambiguous == {"Twin": [first, second]}
    assert any(first in e and second in e and "'Twin'" in e for e in plugins.load_errors)
    with pytest.raises(PluginError) as e:
        plugins.connector_plugin("Twin")
    assert first in str(e.value) and second in str(e.value) and "full class name" in str(e.value)
    # each is still reachable by its full name, and by the names only it has
    assert plugins.connector_plugin(second).cls is OtherTwinSourceConnector
    assert plugins.connector_plugin("TwinSource").cls is TwinSourceConnector
