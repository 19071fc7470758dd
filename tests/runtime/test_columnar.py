"""Columnar batches mean exactly what their records mean.

A SourceBatch goes through the worker as one column (one conversion, one append, one
acknowledgement) and a sink that takes columns gets SinkBatches; these stories check the
log and the sink see the same bytes, headers, offsets and records as on the per-record
path, and that the columnar path was really taken.
"""

from __future__ import annotations

import json

import pytest
from support import connectors as sc
from support.waiting import wait_until

from kctl.api import TopicPartition
from kctl.launch import StandaloneWorker
from kctl.runtime.source_positions import SOURCE_HEADER
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import TaskId

COLUMNS = "support.connectors.ColumnSourceConnector"
COLUMN_SINK = "support.connectors.ColumnSinkConnector"
ROW_SINK = "support.connectors.CollectingSinkConnector"
N = 1000


@pytest.fixture
def worker(tmp_path):
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100}))
    w.start()
    yield w
    w.stop()


def read_topic(worker: StandaloneWorker, topic: str, n: int) -> list:
    consumer = worker.transport.consumer(None, {"kctl.passive": "true"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        out: list = []
        while len(out) < n:
            batch = consumer.poll_batch(n, 1.0)
            assert batch, f"{topic}: only {len(out)} of {n} records"
            out.extend(batch)
        return out
    finally:
        consumer.close()


def topic_size(worker: StandaloneWorker, topic: str) -> int:
    if topic not in worker.transport.topics():
        return 0
    return worker.transport.end_offset(TopicPartition(topic, 0))


def source_header(record) -> list:
    [(key, value)] = record.headers
    assert key == SOURCE_HEADER
    return json.loads(value)


def test_a_source_batch_writes_exactly_what_its_records_write(worker):
    h = worker.herder
    h.create_connector("cols", {"connector.class": COLUMNS, "topic": "t-cols", "count": N})
    h.create_connector("rows", {"connector.class": COLUMNS, "topic": "t-rows", "count": N,
                                "columnar": "false"})
    wait_until(lambda: topic_size(worker, "t-cols") == N and topic_size(worker, "t-rows") == N,
               message=f"{N} records in both topics")
    cols, rows = read_topic(worker, "t-cols", N), read_topic(worker, "t-rows", N)

    # the same value bytes, row by row (JsonConverter envelopes with schema, every escape)
    assert [r.value for r in cols] == [r.value for r in rows]
    assert [r.key for r in cols] == [r.key for r in rows] == [None] * N
    # the same exactly-once source positions; only the connector name and sequence differ
    col_headers, row_headers = map(source_header, cols), map(source_header, rows)
    col_h, row_h = list(col_headers), list(row_headers)
    assert [h[2:] for h in col_h] == [h[2:] for h in row_h]
    assert col_h[0][2:] == [{"task": 0}, {"i": 0, "half": 0}]
    assert {h[0] for h in col_h} == {"cols"}
    seqs = [h[1] for h in col_h]
    assert seqs == sorted(set(seqs)), "sequence numbers increase record by record"

    # offsets commit to the last row of the last acknowledged batch
    for name in ("cols", "rows"):
        wait_until(lambda n=name: [o["offset"] for o in h.connector_offsets(n)
                                   if o["partition"] == {"task": 0}] == [{"i": N - 1,
                                                                          "half": (N - 1) // 2}],
                   message=f"{name}: source offset at the last row")

    # and the columnar path was taken for the one, not the other
    tasks = worker.herder.worker.tasks
    assert tasks[TaskId("cols", 0)].columns_sent == N
    assert tasks[TaskId("rows", 0)].columns_sent == 0


def test_a_keyed_source_batch_writes_exactly_what_its_records_write(worker):
    """Keys (a primary key, say) stay on the columnar path: the same key and value bytes and
    source positions as the records the batch stands for, sent as columns."""
    h = worker.herder
    for name, columnar in (("cols", "true"), ("rows", "false")):
        h.create_connector(name, {"connector.class": COLUMNS, "topic": f"t-{name}", "count": N,
                                  "columnar": columnar, "keyed": "true"})
    wait_until(lambda: topic_size(worker, "t-cols") == N and topic_size(worker, "t-rows") == N,
               message=f"{N} records in both topics")
    cols, rows = read_topic(worker, "t-cols", N), read_topic(worker, "t-rows", N)
    assert [(r.key, r.value) for r in cols] == [(r.key, r.value) for r in rows]
    assert [json.loads(r.key)["payload"] for r in cols] == [{"id": i} for i in range(N)]
    assert [source_header(r)[2:] for r in cols] == [source_header(r)[2:] for r in rows]
    tasks = worker.herder.worker.tasks
    assert tasks[TaskId("cols", 0)].columns_sent == N
    assert tasks[TaskId("rows", 0)].columns_sent == 0


def test_a_restarted_columnar_source_resumes_after_its_last_batch(worker):
    h = worker.herder
    h.create_connector("cols", {"connector.class": COLUMNS, "topic": "t", "count": 500})
    wait_until(lambda: topic_size(worker, "t") == 500, message="500 records")
    wait_until(lambda: [o["offset"]["i"] for o in h.connector_offsets("cols")
                        if "task" in o["partition"]] == [499], message="offset committed")
    h.put_connector_config("cols", {"connector.class": COLUMNS, "topic": "t", "count": 800})
    wait_until(lambda: topic_size(worker, "t") == 800, message="800 records")
    ids = [json.loads(r.value)["payload"]["id"] for r in read_topic(worker, "t", 800)]
    assert ids == list(range(800)), "nothing repeated, nothing skipped"


def test_a_sink_that_takes_columns_gets_the_records_a_row_sink_gets(worker):
    h = worker.herder
    h.create_connector("cols", {"connector.class": COLUMNS, "topic": "t", "count": N})
    wait_until(lambda: topic_size(worker, "t") == N, message=f"{N} records")
    h.create_connector("col-sink", {"connector.class": COLUMN_SINK, "topics": "t"})
    h.create_connector("row-sink", {"connector.class": ROW_SINK, "topics": "t"})
    wait_until(lambda: len(sc.SINK_RECEIVED["col-sink"]) == N
               and len(sc.SINK_RECEIVED["row-sink"]) == N, message="both sinks have every record")
    assert sc.SINK_RECEIVED["col-sink"] == sc.SINK_RECEIVED["row-sink"]
    assert sc.SINK_BATCHES["col-sink"] == N, "every record came as a column"
    first = sc.SINK_RECEIVED["col-sink"][1][3]
    assert first.to_dict() == sc.column_row(1)


def test_keyed_records_reach_a_column_sink_as_columns_with_their_keys(worker):
    """Records keyed by a primary key (as JdbcSource writes them) stay on the columnar
    path: the sink gets the keys and values a row sink gets, as SinkBatches."""
    h = worker.herder
    h.create_connector("cols", {"connector.class": COLUMNS, "topic": "t", "count": N,
                                "keyed": "true"})
    wait_until(lambda: topic_size(worker, "t") == N, message=f"{N} records")
    h.create_connector("keyed-col-sink", {"connector.class": COLUMN_SINK, "topics": "t"})
    h.create_connector("keyed-row-sink", {"connector.class": ROW_SINK, "topics": "t"})
    wait_until(lambda: len(sc.SINK_RECEIVED["keyed-col-sink"]) == N
               and len(sc.SINK_RECEIVED["keyed-row-sink"]) == N,
               message="both sinks have every record")
    assert sc.SINK_RECEIVED["keyed-col-sink"] == sc.SINK_RECEIVED["keyed-row-sink"]
    assert sc.SINK_KEYS["keyed-col-sink"] == sc.SINK_KEYS["keyed-row-sink"]
    assert [k.to_dict() for _, k in sc.SINK_KEYS["keyed-col-sink"]] == \
        [{"id": i} for i in range(N)]
    assert sc.SINK_BATCHES["keyed-col-sink"] == N, "every keyed record came as a column"


def test_a_sink_batch_with_a_bad_record_goes_record_by_record(worker):
    """One value the converter cannot read: the rest still arrive, the bad one is
    dead-lettered with its own error, as on the per-record path."""
    h = worker.herder
    h.create_connector("cols", {"connector.class": COLUMNS, "topic": "t", "count": 300})
    wait_until(lambda: topic_size(worker, "t") == 300, message="300 records")
    producer = worker.transport.producer()
    from kctl.transport.base import ProducerRecord
    producer.send(ProducerRecord("t", b"{not json", partition=0))
    producer.flush()
    h.create_connector("dirty-sink", {"connector.class": COLUMN_SINK, "topics": "t",
                                    "errors.tolerance": "all",
                                    "errors.deadletterqueue.topic.name": "dlq"})
    wait_until(lambda: len(sc.SINK_RECEIVED["dirty-sink"]) == 300, message="300 good records")
    wait_until(lambda: topic_size(worker, "dlq") == 1, message="the bad record in the DLQ")
    [dead] = read_topic(worker, "dlq", 1)
    assert dead.value == b"{not json"
    assert [offset for _, _, offset, _ in sc.SINK_RECEIVED["dirty-sink"]] == list(range(300))


def test_batch_offsets_become_the_json_each_record_would_write():
    """The exactly-once header's source offsets are built column-wise when they can be
    (ints, and strings the same in every row such as a file's path), else row by row; the
    bytes are json.dumps' either way."""
    from kctl.runtime.source_positions import _offset_json

    n = 4
    cases = [
        {"position": [10, 20, 30, 40], "line": [1, 2, 3, 4], "path": ['/in/"a".log'] * n,
         "fp": ["00ff"] * n, "fplen": [4] * n},
        {"row": [1, 2, 3, 4], "complete": [False, False, False, True]},
        {"name": ["a", "b", "a", "a"], "x": [1.5, 2.5, 3.5, 4.5]},
        {"flag": [True] * n, "path": ["é"] * n},
    ]
    for offsets in cases:
        expected = [json.dumps(dict(zip(offsets, row, strict=True)), separators=(",", ":"))
                    for row in zip(*offsets.values(), strict=True)]
        assert _offset_json(offsets, n).to_pylist() == expected, offsets
