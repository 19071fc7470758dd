"""Kafka's ConsumerProtocol: subscriptions and assignments round-trip, and the bytes are
Kafka's layout (checked field by field for a small assignment)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.errors import ProtocolError
from kctl.group.assignors.consumer import Assignment, Subscription, TopicPartition
from kctl.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

topics = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                 max_size=10)
partitions = st.sets(st.builds(TopicPartition, topics, st.integers(0, 200)), max_size=10)
blobs = st.none() | st.binary(max_size=40)


@given(st.lists(topics, max_size=5, unique=True), blobs, partitions,
       st.integers(-1, 2**31 - 1), st.none() | topics)
def test_subscription_round_trips(names, user_data, owned, generation, rack):
    s = Subscription(tuple(names), user_data, tuple(sorted(owned)), generation, rack)
    assert decode_subscription(encode_subscription(s)) == s


@given(partitions, blobs)
def test_assignment_round_trips(assigned, user_data):
    a = Assignment(tuple(sorted(assigned)), user_data)
    assert decode_assignment(encode_assignment(a)) == a


def test_assignment_is_kafkas_layout():
    a = Assignment((TopicPartition("T0", 0), TopicPartition("T0", 2)), None)
    assert encode_assignment(a) == (
        struct.pack(">h", 3)                               # version
        + struct.pack(">i", 1) + struct.pack(">h", 2) + b"T0"  # one topic
        + struct.pack(">iii", 2, 0, 2)                     # partitions 0 and 2
        + struct.pack(">i", -1))                           # no user data


def test_garbage_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="truncated consumer subscription"):
        decode_subscription(b"\x00\x03\x00\x00\x00\x05")
