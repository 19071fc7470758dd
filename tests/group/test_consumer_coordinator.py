"""partition.assignment.strategy as Kafka reads it, and the consumer's protocol half."""

from __future__ import annotations

import pytest

from kctl.errors import ConfigError
from kctl.group.assignors.consumer import (
    Assignment,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RebalanceProtocol,
    StickyAssignor,
    TopicPartition,
    decode_sticky_user_data,
)
from kctl.group.consumer_coordinator import ConsumerHandler, assignment_strategy


class CooperativeOnly(ConsumerPartitionAssignor):
    """A custom assignor that cannot run eagerly."""

    name = "cooperative-only"

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE]

    def assign(self, partitions_per_topic, subscriptions):
        return {m: Assignment(()) for m in subscriptions}


def names(value) -> list[str]:
    return [a.name for a in assignment_strategy(value)]


def test_kafkas_default_lists_range_then_cooperative_sticky_and_stays_eager():
    assert names(None) == ["range", "cooperative-sticky"]
    handler = ConsumerHandler("C0", ["T0"], assignment_strategy(None), cluster=dict)
    assert handler.protocol is RebalanceProtocol.EAGER
    assert handler.is_eager("cooperative-sticky"), "range in the list keeps the consumer eager"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cooperative-sticky", ["cooperative-sticky"]),
        (" sticky , roundrobin ", ["sticky", "roundrobin"]),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", ["cooperative-sticky"]),
        (["org.apache.kafka.clients.consumer.RangeAssignor", "range"], ["range"]),
        (StickyAssignor, ["sticky"]),
        ([CooperativeOnly, "cooperative-sticky"], ["cooperative-only", "cooperative-sticky"]),
    ],
)
def test_names_class_names_lists_and_classes_are_accepted(value, expected):
    assert names(value) == expected


def test_every_call_builds_fresh_instances_because_sticky_assignors_remember():
    first, second = assignment_strategy("sticky")[0], assignment_strategy("sticky")[0]
    assert first is not second


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("range, fastest", "unknown consumer assignor 'fastest'"),
        ("", "names no assignor"),
        (StickyAssignor(), "an instance would be shared"),
        ([CooperativeOnly, "range"], "no rebalance protocol in common"),
    ],
)
def test_a_bad_strategy_is_one_clear_config_error(value, message):
    with pytest.raises(ConfigError) as e:
        assignment_strategy(value)
    assert e.value.key == "partition.assignment.strategy"
    assert message in str(e.value)


def test_each_assignor_in_the_list_sends_its_own_user_data():
    sticky, cooperative = assignment_strategy("sticky, cooperative-sticky")
    handler = ConsumerHandler("C0", ["T0"], [sticky, cooperative], cluster=lambda: {"T0": 2})
    mine = Assignment((TopicPartition("T0", 1),))
    handler.on_assignment(protocol="sticky", assignment=mine, owned=frozenset(), generation=4,
                          now_ms=0)
    offered = dict(handler.metadata(frozenset(), 4))
    assert list(offered) == ["sticky", "cooperative-sticky"]
    remembered = decode_sticky_user_data(offered["sticky"].user_data)
    assert remembered.partitions == mine.partitions and remembered.generation == 4
    # only the assignor the group selected heard of the assignment
    untouched = CooperativeStickyAssignor().subscription_user_data({"T0"})
    assert offered["cooperative-sticky"].user_data == untouched
