"""Source records that fail go to the DLQ with their source position, on both transports.

The story a user lives through: a source connector's transform rejects every tenth record;
with `errors.tolerance=all` the rest flow on and the rejected ones land in the dead letter
queue with the error headers and their source partition and offset. The worker is restarted
mid-run: afterwards every good record has arrived exactly once and every bad one is in the
DLQ exactly once, because the source offset moves past a record only when it was delivered
or dead-lettered. The user looks at them with `kctl dlq show`, fixes the transform with
`kctl connector patch`, and `kctl dlq replay` delivers them. With `none` the task FAILs.

A shorter story, in the test's own process: the key and value converters refuse some
records; those go to the DLQ with the converter's stage and their source position, the rest
are produced, and the source offset moves past both.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from support.inprocess import running_worker, unique
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.runtime.dlq import read_topic

pytestmark = pytest.mark.slow

COUNT = 300
BAD = {v for v in range(COUNT) if v % 10 == 9}  # 10%, and the very last record is bad
HOLD_AT = 120  # the source stops there until the test has restarted the worker


def write(path: Path, settings: dict[str, object]) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


def values(path: Path) -> list[int]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_transform_failures_go_to_the_dlq_once_and_replay_after_the_fix(
        tmp_path, transport_settings, request):
    p = f"sdlq-{request.node.callspec.id}-"  # the broker is shared by the session
    topic, dlq, other = p + "numbers", p + "numbers-dlq", p + "replayed"
    w = Worker(tmp_path)
    write(tmp_path / "worker.yaml", {"state.dir": str(tmp_path / "state"), "listeners": LISTENER,
                                     "offset.flush.interval.ms": 200, **transport_settings})
    failing = {"transforms": "fail", "transforms.fail.type": "support.transforms.FailOn",
               "transforms.fail.modulo": 10, "transforms.fail.remainder": 9}
    source = write(tmp_path / "source.yaml", {
        "name": "numbers", "connector.class": "support.connectors.CounterSourceConnector",
        "topic": topic, "count": COUNT, "per.poll": 5, **failing,
        "hold.at": HOLD_AT, "hold.until": str(tmp_path / "go-on"),
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": 1,
        "errors.deadletterqueue.context.headers.enable": True})
    strict = write(tmp_path / "strict.yaml", {
        "name": "strict", "connector.class": "support.connectors.CounterSourceConnector",
        "topic": p + "strict", "count": COUNT, **failing})
    out, out_other = tmp_path / "out.jsonl", tmp_path / "other.jsonl"
    sinks = [write(tmp_path / f"{name}.yaml", {
        "name": name, "connector.class": "support.sinks.JsonLinesSinkConnector",
        "topics": t, "path": str(f)}) for name, t, f in (("sink", topic, out),
                                                          ("sink-other", other, out_other))]
    good = sorted(set(range(COUNT)) - BAD)

    w.start()
    try:
        for f in (source, strict, sinks[0]):
            w.kctl("connector", "create", str(f))

        # restart the worker while the source is mid-way: it holds at HOLD_AT until told
        wait_until(lambda: len(values(out)) >= len(set(range(HOLD_AT)) - BAD), timeout=60,
                   message="every good record before the hold delivered")
        w.stop()
        (tmp_path / "go-on").touch()
        w.start()

        wait_until(lambda: len(values(out)) >= len(good), timeout=90,
                   message="every good record delivered")

        def source_offset() -> int | None:
            got = w.offsets("numbers")
            return got[0]["offset"]["i"] if got else None

        # the offset reaches the last record, which was dead-lettered, not delivered
        wait_until(lambda: source_offset() == COUNT - 1, timeout=30, message="offset at end")

        # across the restart: no good record twice, no bad record delivered
        assert sorted(values(out)) == good

        # kctl dlq show: every rejected record exactly once, with the error headers
        rejected = json.loads(w.kctl("dlq", "show", "numbers", "--limit", "1000",
                                     "-o", "json").stdout)
        # the value as the worker's JsonConverter wrote it, schema envelope and all
        assert collections.Counter(json.loads(r["value"])["payload"] for r in rejected) == \
            collections.Counter(BAD), "each bad record dead-lettered exactly once"
        for r in rejected:
            h = r["headers"]
            assert r["stage"] == "TRANSFORMATION"
            assert r["exception"] == "builtins.ValueError"
            v = json.loads(r["value"])["payload"]
            assert r["message"] == f"FailOn rejects {v}"
            assert h["__connect.errors.connector.name"] == "numbers"
            assert h["__connect.errors.task.id"] == "0"
            assert h["__connect.errors.topic"] == topic
            assert h["__connect.errors.class.name"] == "support.transforms.FailOn"
            assert "ValueError: FailOn rejects" in h["__connect.errors.exception.stacktrace"]
            assert json.loads(h["__connect.errors.source.partition"]) == {"task": 0}
            assert json.loads(h["__connect.errors.source.offset"]) == {"i": v}
        table = w.kctl("dlq", "show", "numbers").stdout
        assert f"{len(BAD)} rejected record(s)" in table and "TRANSFORMATION" in table
        assert "ValueError: FailOn rejects 9" in table

        # fix the transform, replay: the rejected records arrive, once
        w.kctl("connector", "patch", "numbers", "transforms.fail.modulo=0")
        replayed = w.kctl("dlq", "replay", "numbers").stdout
        assert f"{len(BAD)} replayed, 0 skipped, 0 failed" in replayed
        wait_until(lambda: len(values(out)) >= COUNT, timeout=60, message="replayed records")
        assert sorted(values(out)) == list(range(COUNT))

        # --to: somewhere else instead of the original topic. (That topic's sink starts only
        # now: Tansu strands a group whose member leaves mid-join, as a restart here could.)
        w.kctl("connector", "create", str(sinks[1]))
        w.kctl("dlq", "replay", "numbers", "--to", other)
        wait_until(lambda: len(values(out_other)) >= len(BAD), timeout=60,
                   message="records replayed to another topic")
        assert sorted(values(out_other)) == sorted(BAD)
        assert sorted(values(out)) == list(range(COUNT))  # the original topic got no more

        # tolerance none: the first rejected record fails the task, naming the cause
        st = w.status("strict")
        assert st["tasks"][0]["state"] == "FAILED", st
        trace = st["tasks"][0]["trace"]
        assert "FailOn rejects 9" in trace and "TRANSFORMATION" in trace, trace
        assert "Tolerance exceeded" in trace
        got = w.offsets("strict")
        assert all(o["offset"]["i"] < 9 for o in got), got
        for name in ("numbers", "sink", "sink-other"):
            assert [t["state"] for t in w.status(name)["tasks"]] == ["RUNNING"], name
    finally:
        w.stop()


def test_records_the_converters_cannot_serialise_go_to_the_dlq_with_their_source_position(
        tmp_path, transport_settings):
    count = 98  # the last record (97) is one the value converter refuses
    bad_key = {i for i in range(count) if i % 10 == 3}
    bad_value = {i for i in range(count) if i % 10 == 7}
    good = sorted(set(range(count)) - bad_key - bad_value)
    name, topic, dlq = unique("keyed"), unique("keyed"), unique("keyed-dlq")
    converter = "support.probes.RejectingConverter"
    with running_worker(tmp_path / "state", transport_settings) as w:
        h = w.herder
        h.create_connector(name, {
            "connector.class": "support.probes.KeyedSourceConnector", "topic": topic,
            "count": count, "key.converter": converter, "key.converter.reject": r"k\d*3",
            "value.converter": converter, "value.converter.reject": r"\d*7",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": 1,
            "errors.deadletterqueue.context.headers.enable": "true"})

        # the offset reaches the last record, which was dead-lettered, not produced
        wait_until(lambda: h.connector_offsets(name) == [
            {"partition": {"source": "keyed"}, "offset": {"i": count - 1}}], timeout=60,
            message="source offset at the last record")
        produced = read_topic(w.transport, topic)
        assert sorted(int(r.value) for r in produced) == good
        assert all(r.key == f"k{int(r.value)}".encode() for r in produced)

        rejected = h.dlq_records(name)
        assert len(rejected) == len(bad_key) + len(bad_value)
        for r in rejected:
            hd = r["headers"]
            i = json.loads(hd["__connect.errors.source.offset"])["i"]
            # the converters cannot write it, so the DLQ holds it as plain JSON
            assert (json.loads(r["key"]), json.loads(r["value"])) == (f"k{i}", i)
            if i in bad_key:
                assert r["stage"] == "KEY_CONVERTER"
                assert r["message"] == f"cannot represent 'k{i}'"
            else:
                assert i in bad_value
                assert r["stage"] == "VALUE_CONVERTER"
                assert r["message"] == f"cannot represent {i}"
            assert r["exception"] == "kctl.errors.DataError"
            assert hd["__connect.errors.class.name"] == converter
            assert hd["__connect.errors.topic"] == topic
            assert json.loads(hd["__connect.errors.source.partition"]) == {"source": "keyed"}
            assert hd["__connect.errors.connector.name"] == name
        assert sorted(json.loads(r["headers"]["__connect.errors.source.offset"])["i"]
                      for r in rejected) == sorted(bad_key | bad_value), "each exactly once"
