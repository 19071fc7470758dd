"""A sink's dead letter queue, on the embedded log and on the broker.

Two stories. In the first, a sink rejects records itself through the errant record reporter
(KIP-610): some as put() sees them, some only when it flushes, after later batches were put
(as a sink that buffers would). Every rejected record is in the DLQ with the position it was
consumed from, every other one is written, none is lost.

In the second, the topic holds bytes the sink's converter cannot parse and a transform
rejects some records. With `errors.tolerance=all` the good records arrive and the bad ones
are in the DLQ with the stage that failed and their original position; with `none` the task
is FAILED with the cause. After the transform is fixed, `dlq replay` sends the rejected
records back to their topic: the ones the transform refused arrive, the unparsable ones are
dead-lettered again.
"""

from __future__ import annotations

import collections
import json

import pytest
from support import connectors as sc
from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.states import State

TOLERANT = {"errors.tolerance": "all",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.deadletterqueue.topic.replication.factor": 1}
PLAIN_JSON = {"value.converter": "JsonConverter", "value.converter.schemas.enable": "false"}


def envelope(v: int) -> bytes:
    return json.dumps({"schema": {"type": "struct", "fields": [
        {"field": "v", "type": "int32", "optional": False}]}, "payload": {"v": v}},
        separators=(",", ":")).encode()


def dlq_values(transport, dlq: str) -> dict[int, bytes]:
    """The DLQ's records: the offset each was consumed from (its context header) -> value."""
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    try:
        consumer.assign([TopicPartition(dlq, 0)])
        out = {}
        while batch := consumer.poll_batch(100, 1.0):
            for r in batch:
                offset = dict(r.headers)["__connect.errors.offset"]
                out[int(offset)] = r.value
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("columns", [False, True], ids=["records", "columns"])
def test_records_a_sink_reports_reach_the_dlq_whenever_it_reports_them(
        tmp_path, transport_settings, columns):
    """With `columns` the sink takes batches (put_batch) of schema'd values and reports
    records of a batch: the DLQ still gets each one's original bytes."""
    count = 100
    in_put = {v for v in range(count) if v % 10 == 3}
    at_flush = {v for v in range(count) if v % 10 == 6}
    good = sorted(set(range(count)) - in_put - at_flush)
    topic, dlq, name = unique("errant"), unique("errant-dlq"), unique("reporting")
    values = [envelope(v) if columns else str(v).encode() for v in range(count)]
    with running_worker(tmp_path / "state", transport_settings) as w:
        produce(w.transport, topic, values)  # offset == v
        w.herder.create_connector(name, {
            "connector.class": "support.probes.ReportingColumnSinkConnector" if columns
            else "support.probes.ReportingSinkConnector", "topics": topic,
            **({} if columns else PLAIN_JSON), **TOLERANT,
            "errors.deadletterqueue.topic.name": dlq,
            "consumer.max.poll.records": 7,  # many put() batches between two flushes
            "report.in.put": r"\d*3", "report.at.flush": r"\d*6"})

        wait_until(lambda: len(probes.WRITTEN[name]) >= len(good), timeout=60,
                   message="every accepted record written")
        rejected = wait_until(lambda: len(r := w.herder.dlq_records(name)) >= 20 and r,
                              timeout=60, message="every rejected record in the DLQ")

        # nothing lost, nothing twice: each record is either written or dead-lettered
        assert sorted(probes.WRITTEN[name]) == good
        by_value = {int(r["offset"]): r for r in rejected}
        assert len(rejected) == len(by_value) == 20
        assert set(by_value) == in_put | at_flush
        dead = dlq_values(w.transport, dlq)
        assert {v: dead[v] for v in in_put} == {v: values[v] for v in in_put}, \
            "reported from the poll that brought them: the original bytes"
        data = (lambda b: json.loads(b)["payload"]) if columns else json.loads
        assert {v: data(dead[v]) for v in at_flush} == {v: data(values[v]) for v in at_flush}, \
            "reported later: encoded again by the task's converter"
        if columns:
            assert probes.COLUMN_RECORDS[name] == count
        for v, r in by_value.items():
            h = r["headers"]
            assert (r["topic"], r["partition"], r["offset"]) == (topic, "0", str(v)), \
                "the position the record was consumed from"
            assert r["stage"] == "TASK_PUT"
            assert r["exception"] == "support.probes.Rejected"
            when = "put" if v in in_put else "flush"
            assert r["message"] == f"{when} rejects {v}"
            assert h["__connect.errors.class.name"] == \
                f"support.probes.Reporting{'Column' if columns else ''}SinkTask"
            assert h["__connect.errors.connector.name"] == name
            assert h["__connect.errors.task.id"] == "0"
            assert "Rejected" in h["__connect.errors.exception.stacktrace"]

        # the group's offset moves past all of them
        wait_until(lambda: w.herder.connector_offsets(name) == [
            {"partition": {"kafka_topic": topic, "kafka_partition": 0},
             "offset": {"kafka_offset": count}}], timeout=30, message="offsets committed")
        assert [t.state for t in w.herder.connector_status(name).tasks] == [State.RUNNING]


def test_records_the_sink_cannot_read_or_transform_are_dead_lettered_and_replayed(
        tmp_path, transport_settings):
    count = 60
    unparsable = {i for i in range(count) if i % 10 == 4}
    refused = {i for i in range(count) if i % 10 == 7}  # by the transform
    good = sorted(set(range(count)) - unparsable - refused)
    raw = [b'{"id": ' if i in unparsable else str(i).encode() for i in range(count)]
    topic, dlq = unique("dirty"), unique("dirty-dlq")
    tolerant, strict = unique("tolerant"), unique("strict")
    failing = {"transforms": "fail", "transforms.fail.type": "support.transforms.FailOn",
               "transforms.fail.modulo": 10, "transforms.fail.remainder": 7}
    sink = {"connector.class": "support.connectors.CollectingSinkConnector", "topics": topic,
            **PLAIN_JSON, **failing}

    def arrived() -> list[int]:
        return [v for *_, v in sc.SINK_RECEIVED[tolerant]]

    with running_worker(tmp_path / "state", transport_settings) as w:
        h = w.herder
        produce(w.transport, topic, raw)  # offset i holds record i
        h.create_connector(tolerant, {**sink, **TOLERANT,
                                      "errors.deadletterqueue.topic.name": dlq})
        h.create_connector(strict, sink)

        wait_until(lambda: len(arrived()) >= len(good), timeout=60,
                   message="every good record at the sink")
        rejected = wait_until(lambda: len(r := h.dlq_records(tolerant)) >= 12 and r,
                              timeout=60, message="every bad record in the DLQ")
        assert sorted(arrived()) == good
        assert len(rejected) == 12
        for r in rejected:
            hd = r["headers"]
            offset = int(r["offset"])
            assert (r["topic"], r["partition"]) == (topic, "0")
            assert r["value"] == raw[offset].decode(), "the bytes as they were consumed"
            assert hd["__connect.errors.connector.name"] == tolerant
            assert hd["__connect.errors.task.id"] == "0"
            if offset in unparsable:
                assert r["stage"] == "VALUE_CONVERTER"
                assert hd["__connect.errors.class.name"] == \
                    "kctl.runtime.converters.JsonConverter"
                assert r["exception"] == "kctl.errors.DataError"
            else:
                assert offset in refused
                assert r["stage"] == "TRANSFORMATION"
                assert hd["__connect.errors.class.name"] == "support.transforms.FailOn"
                assert r["exception"] == "builtins.ValueError"
                assert r["message"] == f"FailOn rejects {offset}"
            assert "Traceback" in hd["__connect.errors.exception.stacktrace"]
        assert {int(r["offset"]) for r in rejected} == unparsable | refused

        # tolerance none: the first bad record (unparsable, at offset 4) fails the task
        st = wait_until(lambda: (s := h.connector_status(strict)).tasks and
                        s.tasks[0].state is State.FAILED and s, timeout=60,
                        message="the strict sink FAILED")
        trace = st.tasks[0].trace
        assert "Tolerance exceeded" in trace and "VALUE_CONVERTER" in trace, trace
        assert "JsonConverter" in trace
        assert all(v < 4 for *_, v in sc.SINK_RECEIVED[strict]), \
            "nothing past the bad record reached the strict sink"

        # fix the transform, replay: what it refused arrives; what cannot be parsed is
        # dead-lettered again, from its new position in the topic
        h.patch_connector_config(tolerant, {"transforms.fail.modulo": "0"})
        wait_until(lambda: [t.state for t in h.connector_status(tolerant).tasks]
                   == [State.RUNNING], timeout=30, message="tolerant sink running again")
        assert h.dlq_replay(tolerant).replayed == 12
        wait_until(lambda: len(arrived()) >= len(good) + len(refused), timeout=60,
                   message="the replayed records at the sink")
        assert collections.Counter(arrived()) == collections.Counter(good + sorted(refused)), \
            "each record arrived exactly once"
        again = wait_until(lambda: len(r := h.dlq_records(tolerant)) >= 18 and r[12:],
                           timeout=60, message="unparsable records dead-lettered again")
        assert len(h.dlq_records(tolerant)) == 18
        assert {r["stage"] for r in again} == {"VALUE_CONVERTER"}
        assert sorted(r["value"] for r in again) == [raw[i].decode() for i in sorted(unparsable)]
        assert all(int(r["offset"]) >= count for r in again)
        assert [t.state for t in h.connector_status(tolerant).tasks] == [State.RUNNING]
