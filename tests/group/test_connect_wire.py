"""Connect's group wire format: what a worker's ConnectHandler hands the broker.

Metadata and assignments round-trip for every subprotocol, and the bytes are Kafka
Connect's own layout (checked field by field for one small assignment), so a Java worker
or any Kafka tool reads what kctl writes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.errors import ProtocolError
from kctl.group.assignors.connect import ConnectAssignment, ConnectorsAndTasks, WorkerMetadata
from kctl.group.connect_coordinator import (
    ConnectHandler,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from kctl.states import TaskId

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=12)
work = st.builds(
    lambda cs, ts: ConnectorsAndTasks(frozenset(cs), frozenset(TaskId(c, n) for c, n in ts)),
    st.sets(names, max_size=5),
    st.sets(st.tuples(names, st.integers(0, 500)), max_size=12),
)
versions = st.sampled_from([0, 1, 2])


@given(work, work, versions, st.integers(0, 2**31 - 1), st.integers(-1, 2**40), names,
       st.integers(0, 1))
def test_assignment_round_trips(assigned, revoked, version, delay, offset, leader, error):
    a = ConnectAssignment(leader, f"http://{leader}:8083", offset, assigned=assigned,
                          revoked=revoked if version else ConnectorsAndTasks(),
                          delay_ms=delay if version else 0, error=error, version=version)
    assert decode_assignment(encode_assignment(a)) == a


@given(work, versions, st.integers(-1, 2**40), st.integers(-1, 2**31 - 1))
def test_metadata_round_trips(owned, version, offset, epoch):
    meta = WorkerMetadata(url="http://w1:8083", config_offset=offset,
                          owned=owned if version else ConnectorsAndTasks(),
                          protocol_version=version, epoch=epoch)
    assert decode_metadata(encode_metadata(meta)) == meta


@given(work, versions, st.integers(0, 2**31 - 1))
def test_the_epoch_trails_connects_fields_so_java_workers_read_past_it(owned, version, epoch):
    """Kafka Connect reads its fields and ignores what follows; kctl reads a Java worker's
    metadata (no epoch) as epoch -1."""
    meta = WorkerMetadata("http://w1:8083", 7, owned if version else ConnectorsAndTasks(),
                          protocol_version=version, epoch=epoch)
    raw = encode_metadata(meta)
    assert raw[-4:] == struct.pack(">i", epoch)
    assert decode_metadata(raw[:-4]) == WorkerMetadata(
        meta.url, 7, meta.owned, protocol_version=version, epoch=-1)


def test_eager_assignment_is_connect_protocol_v0_byte_for_byte():
    a = ConnectAssignment("w1-1", "http://w1:8083", 7,
                          assigned=ConnectorsAndTasks.of(["ct1"], ["ct1-0", "ct1-1"]),
                          version=0)
    expected = (
        struct.pack(">hh", 0, 0)                       # version, error
        + struct.pack(">h", 4) + b"w1-1"               # leader
        + struct.pack(">h", 14) + b"http://w1:8083"    # leader url
        + struct.pack(">q", 7)                         # config offset
        + struct.pack(">i", 1)                         # one connector
        + struct.pack(">h", 3) + b"ct1"
        + struct.pack(">iiii", 3, -1, 0, 1)            # the connector itself (-1), tasks 0, 1
    )
    assert encode_assignment(a) == expected


def test_sessioned_metadata_embeds_the_running_work_as_an_assignment():
    owned = ConnectorsAndTasks.of([], ["ct1-2"])
    raw = encode_metadata(WorkerMetadata("http://w2:8083", 3, owned, protocol_version=2))
    version, = struct.unpack_from(">h", raw)
    assert version == 2
    # version, url, offset, then the allocation as nullable bytes
    at = 2 + 2 + len("http://w2:8083") + 8
    length, = struct.unpack_from(">i", raw, at)
    assert decode_assignment(raw[at + 4:at + 4 + length]).assigned == owned


def test_truncated_bytes_are_a_protocol_error_naming_what_was_read():
    raw = encode_assignment(ConnectAssignment("l", "u", 1, version=1))
    with pytest.raises(ProtocolError, match="truncated connect assignment"):
        decode_assignment(raw[:-3])


def test_handler_offers_follow_connect_protocol():
    class Snapshot:
        connectors = {"ct1": 1}
        config_offset = 5

    h = ConnectHandler("w1", Snapshot(), "sessioned", 1000, url="http://10.0.0.1:8083")
    offered = h.metadata(ConnectorsAndTasks.of(["ct1"]), generation=3)
    assert [p for p, _ in offered] == ["sessioned", "compatible", "default"]
    assert all(m.url == "http://10.0.0.1:8083" and m.config_offset == 5 for _, m in offered)
    assert dict(offered)["default"].owned.is_empty  # eager members report nothing owned
    with pytest.raises(ProtocolError, match=r"unknown connect\.protocol"):
        ConnectHandler("w1", Snapshot(), "fancy", 1000)
