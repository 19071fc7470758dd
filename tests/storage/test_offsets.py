"""Source offsets: stored in Kafka Connect's bytes, flushed as snapshots, kept across restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import Future
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.api.connector import partition_key
from kctl.errors import ConnectError, DataError
from kctl.storage.offsets import (
    FileOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    delete_connector_offsets,
    list_connector_offsets,
    serialize_key,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path):
    s = MemoryOffsetBackingStore() if request.param == "memory" else \
        FileOffsetBackingStore(tmp_path / "offsets.json")
    s.start()
    yield s
    s.stop()


def commit(store, connector, offsets):
    w = OffsetStorageWriter(store, connector)
    for p, o in offsets.items():
        w.offset(dict(p), o)
    assert w.begin_flush()
    w.do_flush().result(5)


def test_keys_and_values_are_the_bytes_kafka_connect_writes(store):
    commit(store, "file-source", {(("filename", "/data/a.txt"),): {"position": 42}})
    assert store.snapshot() == {
        b'["file-source",{"filename":"/data/a.txt"}]': b'{"position":42}'}


def test_a_connector_reads_back_only_its_own_offsets_in_one_batch(store):
    a, b = {"file": "a"}, {"file": "b"}
    commit(store, "one", {partition_key(a): {"line": 1}, partition_key(b): {"line": 2}})
    commit(store, "two", {partition_key(a): {"line": 99}})
    calls = []
    real_get = store.get
    store.get = lambda keys: calls.append(list(keys)) or real_get(keys)
    reader = OffsetStorageReaderImpl(store, "one")
    got = reader.offsets([a, b, {"file": "c"}])
    assert got == {partition_key(a): {"line": 1}, partition_key(b): {"line": 2},
                   partition_key({"file": "c"}): None}
    assert len(calls) == 1 and len(calls[0]) == 3
    assert reader.offset(a) == {"line": 1}
    assert OffsetStorageReaderImpl(store, "two").offset(a) == {"line": 99}


def test_offsets_written_between_flushes_wait_for_the_next_flush(store):
    w = OffsetStorageWriter(store, "c")
    reader = OffsetStorageReaderImpl(store, "c")
    w.offset({"p": 0}, {"o": 1})
    assert w.begin_flush()
    w.offset({"p": 0}, {"o": 2})  # arrives while the snapshot is in flight
    with pytest.raises(ConnectError, match="already flushing"):
        w.begin_flush()
    w.do_flush().result(5)
    assert reader.offset({"p": 0}) == {"o": 1}
    assert w.begin_flush()
    w.do_flush().result(5)
    assert reader.offset({"p": 0}) == {"o": 2}
    assert not w.begin_flush()  # nothing new


class FailingStore(MemoryOffsetBackingStore):
    def __init__(self):
        super().__init__()
        self.fail = True

    def set(self, values):
        if self.fail:
            f: Future = Future()
            f.set_exception(OSError("disk full"))
            return f
        return super().set(values)


def test_a_failed_flush_keeps_its_offsets_for_the_next_one_under_newer_ones():
    store = FailingStore()
    store.start()
    w = OffsetStorageWriter(store, "c")
    w.offset({"p": 0}, {"o": 1})
    w.offset({"p": 1}, {"o": 10})
    assert w.begin_flush()
    w.offset({"p": 1}, {"o": 11})
    with pytest.raises(OSError):
        w.do_flush().result(5)
    assert not w.flushing  # the failure cancelled the flush itself
    store.fail = False
    assert w.begin_flush()
    w.do_flush().result(5)
    r = OffsetStorageReaderImpl(store, "c")
    assert r.offset({"p": 0}) == {"o": 1} and r.offset({"p": 1}) == {"o": 11}


def test_offsets_must_be_maps_of_primitives():
    w = OffsetStorageWriter(MemoryOffsetBackingStore(), "c")
    with pytest.raises(DataError):
        w.offset({"p": 0}, {"o": [1, 2]})
    with pytest.raises(DataError):
        w.offset({1: "x"}, {"o": 1})


def test_listing_and_resetting_a_connectors_offsets(store):
    commit(store, "src", {partition_key({"t": "a"}): {"id": 1}, partition_key({"t": "b"}): {"id": 2}})
    commit(store, "other", {partition_key({"t": "a"}): {"id": 7}})
    assert list_connector_offsets(store, "src") == [({"t": "a"}, {"id": 1}), ({"t": "b"}, {"id": 2})]
    assert sorted(store.connector_partitions("src"), key=str) == [{"t": "a"}, {"t": "b"}]
    # a None offset is a tombstone
    commit(store, "src", {partition_key({"t": "a"}): None})
    assert list_connector_offsets(store, "src") == [({"t": "b"}, {"id": 2})]
    delete_connector_offsets(store, "src").result(5)
    assert list_connector_offsets(store, "src") == []
    assert list_connector_offsets(store, "other") == [({"t": "a"}, {"id": 7})]


def test_the_file_store_keeps_offsets_across_a_restart(tmp_path):
    path = tmp_path / "offsets.json"
    s = FileOffsetBackingStore(path)
    s.start()
    commit(s, "src", {partition_key({"f": "ü.txt"}): {"pos": 5}})
    s.stop()
    s2 = FileOffsetBackingStore(path)
    s2.start()
    assert OffsetStorageReaderImpl(s2, "src").offset({"f": "ü.txt"}) == {"pos": 5}
    assert not list(tmp_path.glob(".*.tmp"))  # the rewrite went through a temp file


def test_a_corrupt_offsets_file_is_a_clear_error(tmp_path):
    path = tmp_path / "offsets.json"
    path.write_text("{not json")
    with pytest.raises(Exception, match=str(path)):
        FileOffsetBackingStore(path).start()


CHILD = textwrap.dedent("""
    import sys
    from kctl.storage.offsets import FileOffsetBackingStore, OffsetStorageWriter
    s = FileOffsetBackingStore(sys.argv[1])
    s.start()
    w = OffsetStorageWriter(s, "src")
    i = 0
    while True:
        w.offset({"file": "a"}, {"line": i})
        w.begin_flush()
        w.do_flush().result()
        print(i, flush=True)
        i += 1
""")


def test_a_flushed_offset_survives_sigkill(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    path = tmp_path / "offsets.json"
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    last = -1
    try:
        assert child.stdout is not None
        for line in child.stdout:
            last = int(line)
            if last >= 200:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    s = FileOffsetBackingStore(path)
    s.start()
    stored = OffsetStorageReaderImpl(s, "src").offset({"file": "a"})
    assert stored is not None and stored["line"] >= last


@given(st.dictionaries(st.text(min_size=1, max_size=5),
                       st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()),
                       max_size=4))
def test_partition_key_bytes_do_not_depend_on_dict_order(partition):
    reversed_ = dict(reversed(list(partition.items())))
    assert serialize_key("c", partition) == serialize_key("c", reversed_)
    assert json.loads(serialize_key("c", partition)) == ["c", partition]
