"""FileSink follows an evolving value schema: a record whose schema differs from the one
before starts a new file, so each Parquet and csv file holds one schema (and one header)."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from file_support import SinkContext

from kctl.api import SchemaBuilder, SinkBatch, SinkRecord, Struct, TopicPartition
from kctl.api.arrow import connect_to_arrow_type
from kctl.api.data import OPTIONAL_FLOAT64_SCHEMA, OPTIONAL_INT64_SCHEMA, OPTIONAL_STRING_SCHEMA
from kctl.connectors.file import FileSinkTask
from kctl.connectors.file.sink import committed_files

pytestmark = pytest.mark.spark

TP = TopicPartition("events", 0)
V1 = SchemaBuilder.struct().version(1).field("id", OPTIONAL_INT64_SCHEMA) \
    .field("v", OPTIONAL_INT64_SCHEMA).build()
V2 = SchemaBuilder.struct().version(2).field("id", OPTIONAL_INT64_SCHEMA) \
    .field("v", OPTIONAL_FLOAT64_SCHEMA).build()
V3 = SchemaBuilder.struct().version(3).field("id", OPTIONAL_INT64_SCHEMA) \
    .field("v", OPTIONAL_FLOAT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()
STREAM = [(V1, {"id": 1, "v": 4}), (V1, {"id": 2, "v": 5}), (V2, {"id": 3, "v": 4.5}),
          (V3, {"id": 4, "v": 6.0, "note": "new"}), (V3, {"id": 5, "v": None, "note": "x"})]


def start(engine, root, fmt: str) -> FileSinkTask:
    props = {"topics": TP.topic, "path": str(root), "format": fmt, "flush.size": "100"}
    task = FileSinkTask()
    task.initialize(SinkContext(engine, props))
    task.start(props)
    task.open([TP])
    return task


def as_records() -> list[SinkRecord]:
    return [SinkRecord(TP.topic, 0, None, None, s, Struct(s, v), kafka_offset=i)
            for i, (s, v) in enumerate(STREAM)]


def as_batches() -> list[SinkBatch]:
    """Columns, one batch per run of a schema, as a columnar source would hand them."""
    out, i = [], 0
    while i < len(STREAM):
        s = STREAM[i][0]
        run = []
        j = i
        while j < len(STREAM) and STREAM[j][0] == s:
            run.append(STREAM[j][1])
            j += 1
        out.append(SinkBatch(TP.topic, 0, list(range(i, j)), [0] * len(run), [()] * len(run),
                             s, pa.array(run, connect_to_arrow_type(s))))
        i = j
    return out


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("columnar", [False, True])
def test_a_new_schema_version_starts_a_new_file(engine, tmp_path, fmt, columnar):
    task = start(engine, tmp_path, fmt)
    if columnar:
        for b in as_batches():
            task.put_batch(b)
    else:
        task.put(as_records())
    task.flush({})
    task.stop()
    files = committed_files(str(tmp_path), TP)
    assert [(start, end) for start, end, _ in files] == [(0, 1), (2, 2), (3, 4)]
    if fmt == "parquet":
        schemas = [pq.read_schema(p) for _, _, p in files]
        assert [str(s.field("v").type) for s in schemas] == ["int64", "double", "double"]
        assert schemas[2].names == ["id", "v", "note"] and "note" not in schemas[1].names
        assert pq.read_table(files[0][2]).column("v").to_pylist() == [4, 5]  # 4 stays 4
    else:
        rows = [list(csv.reader(Path(p).read_text().splitlines())) for _, _, p in files]
        assert [r[0] for r in rows] == [["id", "v"], ["id", "v"], ["id", "v", "note"]]
        assert rows[0][1:] == [["1", "4"], ["2", "5"]]
