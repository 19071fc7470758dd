"""Operating kctl day to day: contexts, writes that answer with their resource, changes shown
before they are made, unknown keys, exit statuses a script can branch on, and the DLQ from
show to replay to purge. Each test is a session at the terminal against a live worker.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from support.inprocess import produce
from support.waiting import wait_until

from kctl.cli.main import app, hoist_global_options
from kctl.exit_status import ExitStatus
from kctl.states import State

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"


@pytest.fixture(autouse=True)
def own_contexts(tmp_path, monkeypatch):
    """Contexts live in a file of this test's own, never the user's."""
    monkeypatch.setenv("KCTL_CONFIG", str(tmp_path / "kctl-config.yaml"))
    monkeypatch.delenv("KCTL_URL", raising=False)


def source_file(kctl, name: str, **extra: object) -> str:
    doc = {"name": name, "connector.class": SOURCE, "topic": f"{name}-t", "count": 20, **extra}
    return kctl.file(f"{name}.yaml", yaml.safe_dump(doc))


def bare(kctl, *args: str, input: str | None = None):
    """kctl without the fixture's --url (the URL comes from contexts and the environment),
    global options placed as the console script places them."""
    return kctl.runner.invoke(app, hoist_global_options(list(args)), input=input)


def test_contexts_name_workers_and_the_url_comes_from_flag_env_context_default(
        kctl, tmp_path, monkeypatch):
    # no context yet: the default URL, and nobody listens there in this test
    assert json.loads(bare(kctl, "context", "current", "-o", "json").stdout) == {
        "name": None, "url": "http://127.0.0.1:8083", "from": "default"}

    # the first context becomes current; commands use it
    out = bare(kctl, "context", "set", "local", "--url", kctl.url + "/").stdout
    assert f"context local set to {kctl.url} (current)" in out
    assert bare(kctl, "connector", "list").exit_code == ExitStatus.SUCCESS
    bare(kctl, "context", "set", "elsewhere", "--url", "http://127.0.0.1:9")
    listed = json.loads(bare(kctl, "context", "list", "-o", "json").stdout)
    assert listed == [{"name": "elsewhere", "url": "http://127.0.0.1:9", "current": False},
                      {"name": "local", "url": kctl.url, "current": True}]
    saved = yaml.safe_load((tmp_path / "kctl-config.yaml").read_text())
    assert saved["current-context"] == "local"

    # switching makes commands go elsewhere (unreachable: its own exit status)
    assert "now using context elsewhere" in bare(kctl, "context", "use", "elsewhere").stdout
    r = bare(kctl, "connector", "list")
    assert r.exit_code == ExitStatus.UNREACHABLE and "127.0.0.1:9" in r.stderr
    # --context picks one for a single command, after the subcommand too
    assert bare(kctl, "connector", "list", "--context", "local").exit_code == 0
    # KCTL_URL and --url win over any context
    monkeypatch.setenv("KCTL_URL", kctl.url)
    assert bare(kctl, "connector", "list").exit_code == 0
    current = json.loads(bare(kctl, "context", "current", "-o", "json").stdout)
    assert current == {"name": "elsewhere", "url": kctl.url, "from": "--url / KCTL_URL"}
    monkeypatch.delenv("KCTL_URL")
    assert bare(kctl, "--url", kctl.url, "connector", "list").exit_code == 0

    r = bare(kctl, "context", "use", "nope")
    assert r.exit_code == ExitStatus.NOT_FOUND
    assert "no context named 'nope' (known: elsewhere, local;" in r.stderr
    assert bare(kctl, "context", "set", "bad name", "--url", kctl.url).exit_code == \
        ExitStatus.USAGE
    bare(kctl, "context", "delete", "elsewhere")
    assert [c["name"] for c in json.loads(bare(kctl, "context", "list", "-o", "json").stdout)] \
        == ["local"]


def test_writes_answer_with_the_resulting_resource_in_machine_formats(kctl, worker):
    created = json.loads(kctl.ok("connector", "create", source_file(kctl, "w"), "-o", "json"))
    assert created["name"] == "w" and created["config"]["connector.class"] == SOURCE
    wait_until(lambda: worker.herder.connector_status("w").state is State.RUNNING)

    paused = yaml.safe_load(kctl.ok("connector", "pause", "w", "-o", "yaml"))
    assert paused["name"] == "w" and "connector" in paused and "tasks" in paused
    # -o before the subcommand means the same
    resumed = json.loads(kctl.ok("-o", "json", "connector", "resume", "w"))
    assert resumed["name"] == "w"
    stopped = json.loads(kctl.ok("connector", "stop", "w", "-o", "json"))
    assert stopped["name"] == "w"
    wait_until(lambda: worker.herder.connector_status("w").state is State.STOPPED)
    offsets = json.loads(kctl.ok("connector", "offsets", "reset", "w", "-o", "json"))
    assert offsets == {"offsets": []}
    patched = json.loads(kctl.ok("connector", "patch", "w", "count=5", "-o", "json"))
    assert patched["config"]["count"] == "5"
    deleted = json.loads(kctl.ok("connector", "delete", "w", "-o", "json"))
    assert deleted["name"] == "w" and deleted["config"]["count"] == "5"
    assert worker.herder.connectors() == []


def test_apply_and_patch_show_changed_keys_with_secrets_masked_and_dry_run_writes_nothing(
        kctl, worker):
    f = source_file(kctl, "a", **{"db.password": "hunter2", "per.poll": 5})
    kctl.ok("connector", "apply", f)

    f2 = source_file(kctl, "a", **{"db.password": "s3cret", "count": 30, "poll.sleep.ms": 1})
    out = kctl.ok("connector", "apply", f2, "--dry-run")
    assert "a: would be updated (dry run)" in out
    rows = {m[0]: m[1:] for m in re.findall(
        r"│ (\S+)\s+│ (\w+)\s+│ ([^│]*?)\s*│ ([^│]*?)\s*│", out)}
    assert rows == {"count": ("changed", "20", "30"), "db.password": ("changed", "******", "******"),
                    "per.poll": ("removed", "5", ""), "poll.sleep.ms": ("added", "", "1")}
    assert "hunter2" not in out and "s3cret" not in out
    assert worker.herder.connector_config("a")["count"] == "20", "a dry run writes nothing"

    as_json = json.loads(kctl.ok("connector", "apply", f2, "--dry-run", "-o", "json"))
    assert as_json["dry_run"] is True and as_json["result"] == "updated"
    assert {c["key"]: c["change"] for c in as_json["changes"]} == {
        "count": "changed", "db.password": "changed", "per.poll": "removed",
        "poll.sleep.ms": "added"}

    # a dry run validates: what the worker would refuse fails it, still writing nothing
    r = kctl("connector", "patch", "a", "count=many", "--dry-run")
    assert r.exit_code == ExitStatus.ERROR and "count" in r.stderr
    assert worker.herder.connector_config("a")["count"] == "20"

    out = kctl.ok("connector", "patch", "a", "count=7", "per.poll=")
    assert re.search(r"count\s+│\s+changed\s+│\s+20\s+│\s+7\s+│", out), out
    assert re.search(r"per\.poll\s+│\s+removed\s+│\s+5\s+│", out), out
    assert "connector a updated" in out
    cfg = worker.herder.connector_config("a")
    assert cfg["count"] == "7" and "per.poll" not in cfg
    assert "connector a unchanged" in kctl.ok("connector", "patch", "a", "count=7")


def test_unknown_keys_are_warned_with_a_did_you_mean_not_refused(kctl, worker):
    f = source_file(kctl, "typo", **{"per.pol": 5, "transforms": "", "consumer.override.x": 1})
    r = kctl("connector", "create", f)
    assert r.exit_code == ExitStatus.SUCCESS
    assert "warning: unknown key 'per.pol' (did you mean 'per.poll'?)" in r.stderr
    assert "consumer.override.x" not in r.stderr, "pass-through keys are free"
    assert worker.herder.connector_config("typo")["per.pol"] == "5"


def test_exit_statuses_tell_not_found_from_conflict_from_usage(kctl, worker):
    assert kctl("connector", "status", "ghost").exit_code == ExitStatus.NOT_FOUND
    kctl.ok("connector", "create", source_file(kctl, "c"))
    r = kctl("connector", "create", source_file(kctl, "c"))
    assert r.exit_code == ExitStatus.CONFLICT and "already exists" in r.stderr
    assert kctl("connector", "patch", "c", "oops").exit_code == ExitStatus.USAGE
    assert kctl("connector", "create", "/no/such/file.yaml").exit_code == ExitStatus.USAGE


def test_dlq_show_replay_and_purge_say_what_happened(kctl, worker):
    """A sink whose DLQ has no context headers: show says what is missing, replay skips
    every record (no original topic) and exits 1 saying why, replay --to sends them again
    (they fail again and the DLQ doubles), purge clears it after a confirmation."""
    topic, bad = "dirty", 6
    produce(worker.transport, topic, [b'{"broken' for _ in range(bad)])
    kctl.ok("connector", "create", kctl.file("sink.yaml", yaml.safe_dump({
        "name": "sink", "connector.class": SINK, "topics": topic,
        "value.converter": "JsonConverter", "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "sink-dlq",
        "errors.deadletterqueue.topic.replication.factor": 1})))
    wait_until(lambda: len(worker.herder.dlq_records("sink")) == bad, timeout=60,
               message="every record dead-lettered")

    r = kctl("dlq", "show", "sink")
    assert r.exit_code == 0 and "sink: 6 rejected record(s)" in r.stdout
    assert "errors.deadletterqueue.context.headers.enable=true" in r.stderr
    shown = json.loads(kctl("dlq", "show", "sink", "-o", "json").stdout)
    assert len(shown) == bad and all(s["value"] == '{"broken' for s in shown)

    r = kctl("dlq", "replay", "sink")
    assert r.exit_code == ExitStatus.ERROR
    assert "0 replayed, 6 skipped, 0 failed (of 6 record(s) in sink's DLQ)" in r.stdout
    assert "names no original topic" in r.stdout and "--to TOPIC" in r.stdout
    assert "nothing in sink's DLQ could be replayed" in r.stderr

    report = json.loads(kctl.ok("dlq", "replay", "sink", "--to", topic, "-o", "json"))
    assert (report["replayed"], report["skipped"], report["failed"]) == (6, 0, 0)
    wait_until(lambda: len(worker.herder.dlq_records("sink")) == 2 * bad, timeout=60,
               message="the replayed records failed again")

    r = kctl("dlq", "purge", "sink")
    assert r.exit_code == ExitStatus.USAGE and "--yes" in r.stderr
    assert len(worker.herder.dlq_records("sink")) == 2 * bad, "nothing purged unconfirmed"
    assert "12 record(s) purged from sink's DLQ" in kctl.ok("dlq", "purge", "sink", "--yes")
    assert "sink: 0 rejected record(s)" in kctl.ok("dlq", "show", "sink")
    r = kctl("dlq", "replay", "sink")
    assert r.exit_code == 0 and "0 replayed, 0 skipped, 0 failed" in r.stdout

    # what fails after the purge is in the DLQ again
    produce(worker.transport, topic, [b"{nope"])
    wait_until(lambda: len(worker.herder.dlq_records("sink")) == 1, timeout=60,
               message="a new failure after the purge")


def test_log_levels_change_at_run_time_as_kip_495(kctl, worker):
    import logging

    import httpx

    child = logging.getLogger("kctl.runtime.tasks.sink")
    own = logging.getLogger("kctl.transport.kafka")
    own.setLevel(logging.ERROR)  # a logger with a level of its own
    try:
        listed = json.loads(kctl.ok("logger", "list", "-o", "json"))
        assert listed["root"]["level"] in ("INFO", "WARN", "DEBUG", "ERROR", "TRACE")
        assert listed["kctl.transport.kafka"] == {"level": "ERROR", "last_modified": None}

        out = kctl.ok("logger", "set", "kctl", "debug")
        assert out.startswith("DEBUG: kctl, ") and "kctl.transport.kafka" in out
        assert child.getEffectiveLevel() == logging.DEBUG, "inherited"
        assert own.level == logging.DEBUG, "a descendant's own level is set too"
        got = json.loads(kctl.ok("logger", "get", "kctl.runtime.tasks.sink", "-o", "json"))
        assert got["level"] == "DEBUG" and got["last_modified"] > 0

        # Kafka Connect's REST shapes, for clients that already speak them
        r = httpx.put(f"{kctl.url}/admin/loggers/kctl.runtime", json={"level": "TRACE"})
        assert r.status_code == 200 and "kctl.runtime.tasks.sink" in r.json()
        assert child.getEffectiveLevel() == 5
        r = httpx.put(f"{kctl.url}/admin/loggers/kctl", json={"level": "LOUD"})
        assert r.status_code == 400 and "Invalid log level 'LOUD'" in r.json()["message"]
        r = kctl("logger", "get", "no.such.logger")
        assert r.exit_code == ExitStatus.NOT_FOUND and "Logger no.such.logger not found" in r.stderr
    finally:
        for name in ("kctl", "kctl.runtime", "kctl.runtime.tasks.sink"):
            logging.getLogger(name).setLevel(logging.NOTSET)
        own.setLevel(logging.NOTSET)


def test_status_with_metrics_shows_counts_and_rates_per_task(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "m", count=10**9, **{"poll.sleep.ms": 2}))
    wait_until(lambda: worker.herder.connector_status("m").tasks and
               worker.herder.connector_status("m").tasks[0].state is State.RUNNING)
    doc = json.loads(kctl.ok("connector", "status", "m", "--metrics", "--interval", "0.5",
                             "-o", "json"))
    polled = doc["metrics"]["0"]["polled"]
    assert polled["total"] > 0 and polled["rate"] > 0, doc["metrics"]
    table = kctl.ok("connector", "status", "m", "--metrics", "--interval", "0.3")
    assert "m: records per task" in table and re.search(r"\d+ \(\d[\d,]*/s\)", table), table


def test_metrics_show_a_sink_task_catching_up_per_partition(kctl, worker):
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    produce(worker.transport, "lagging", [str(i).encode() for i in range(300)])
    kctl.ok("connector", "create", kctl.file("lag.yaml", yaml.safe_dump({
        "name": "lag", "connector.class": SINK, "topics": "lagging",
        "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"})))

    def samples() -> dict:
        text = httpx.get(f"{kctl.url}/metrics").text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    task = (("connector", "lag"), ("task", "0"))
    partition = (("connector", "lag"), ("partition", "0"), ("task", "0"), ("topic", "lagging"))
    final = wait_until(lambda: (m := samples()).get(
        ("kafka_connect_sink_task_metrics_partition_lag", partition)) == 0 and m,
        timeout=30, message="the sink caught up, as its lag says")
    assert final[("kafka_connect_sink_task_metrics_sink_record_read_total", task)] == 300
    assert final[("kafka_connect_sink_task_metrics_sink_record_send_total", task)] == 300
    assert final[("kafka_connect_sink_task_metrics_sink_record_lag_max", task)] == 0


def test_status_metrics_show_what_a_file_source_lost():
    """FileSource counts bytes never read (a truncated or deleted file); `connector status
    --metrics` shows them next to the record counts."""
    from kctl.cli.connector import _task_counters

    text = ("# TYPE kafka_connect_connector_task_metrics_file_bytes_lost counter\n"
            'kafka_connect_connector_task_metrics_file_bytes_lost_total{connector="tail",task="0"}'
            " 42.0\n"
            "# TYPE kafka_connect_connector_task_metrics_file_truncations counter\n"
            'kafka_connect_connector_task_metrics_file_truncations_total{connector="tail",task="0"}'
            " 1.0\n"
            'kafka_connect_connector_task_metrics_file_truncations_total{connector="other",task="0"}'
            " 9.0\n")
    assert _task_counters(text, "tail") == {"0": {"bytes lost": 42.0, "truncations": 1.0}}
