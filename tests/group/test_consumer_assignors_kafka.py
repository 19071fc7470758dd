"""Scenarios from Kafka's RangeAssignorTest, RoundRobinAssignorTest,
AbstractStickyAssignorTest, StickyAssignorTest and CooperativeStickyAssignorTest.

Sticky scenarios run against both sticky assignors: the eager one reads the previous
assignment from user data, the cooperative one from owned partitions and generation,
and like Kafka's cooperative tests it must then settle through follow-up rebalances
without ever revoking and reassigning a partition in the same round. Where Kafka's
expectation depends on HashMap order, kctl visits members sorted; those tests pin the
sorted answer and say so.
"""

from __future__ import annotations

import pytest
from consumer_assignor_support import (
    fully_balanced,
    names,
    next_generation,
    settle,
    tp,
    tps,
    verify_validity_and_balance,
)

from kctl.group.assignors.consumer import (
    DEFAULT_GENERATION,
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    decode_sticky_user_data,
    encode_sticky_user_data,
)

# ------------------------------------------------------------------ range and roundrobin

SIMPLE = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]


@pytest.mark.parametrize("cls", SIMPLE)
def test_one_consumer_no_topic_gets_nothing(cls):
    assert names(cls().assign({}, {"consumer": Subscription(())})) == {"consumer": []}


@pytest.mark.parametrize("cls", SIMPLE)
def test_one_consumer_nonexistent_topic_gets_nothing(cls):
    result = cls().assign({"other": 3}, {"consumer": Subscription(("topic",))})
    assert names(result) == {"consumer": []}


@pytest.mark.parametrize("cls", SIMPLE)
def test_only_partitions_of_subscribed_topics_are_assigned(cls):
    result = cls().assign({"topic": 3, "other": 3}, {"consumer": Subscription(("topic",))})
    assert names(result) == {"consumer": ["topic-0", "topic-1", "topic-2"]}


@pytest.mark.parametrize("cls", SIMPLE)
def test_two_consumers_one_partition_one_stays_idle(cls):
    subs = {"consumer1": Subscription(("topic",)), "consumer2": Subscription(("topic",))}
    result = cls().assign({"topic": 1}, subs)
    assert sorted(len(a.partitions) for a in result.values()) == [0, 1]


def test_range_multiple_consumers_mixed_topics():
    subs = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(("topic1", "topic2")),
        "consumer3": Subscription(("topic1",)),
    }
    result = RangeAssignor().assign({"topic1": 3, "topic2": 2}, subs)
    assert names(result) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-1"],
        "consumer3": ["topic1-2"],
    }


def test_range_two_consumers_two_topics_six_partitions_stays_co_partitioned():
    subs = {c: Subscription(("topic1", "topic2")) for c in ("consumer1", "consumer2")}
    result = RangeAssignor().assign({"topic1": 3, "topic2": 3}, subs)
    assert names(result) == {
        "consumer1": ["topic1-0", "topic1-1", "topic2-0", "topic2-1"],
        "consumer2": ["topic1-2", "topic2-2"],
    }


def test_roundrobin_multiple_consumers_mixed_topics():
    subs = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(("topic1", "topic2")),
        "consumer3": Subscription(("topic1",)),
    }
    result = RoundRobinAssignor().assign({"topic1": 3, "topic2": 2}, subs)
    assert names(result) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-1"],
        "consumer3": ["topic1-2"],
    }


def test_roundrobin_two_dynamic_consumers_two_topics_six_partitions():
    subs = {c: Subscription(("topic1", "topic2")) for c in ("consumer1", "consumer2")}
    result = RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subs)
    assert names(result) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }


@pytest.mark.parametrize("cls", [RangeAssignor, RoundRobinAssignor])
def test_static_members_order_by_instance_id_not_member_id(cls):
    # consumer-a sorts first by member id, but consumer-b holds the lower instance id.
    subs = {
        "consumer-b": Subscription(("topic1", "topic2"), group_instance_id="instance1"),
        "consumer-a": Subscription(("topic1", "topic2"), group_instance_id="instance2"),
    }
    result = cls().assign({"topic1": 3, "topic2": 3}, subs)
    both_dynamic = cls().assign(
        {"topic1": 3, "topic2": 3},
        {"consumer-b": Subscription(("topic1", "topic2")), "consumer-a": Subscription(("topic1", "topic2"))},
    )
    assert result["consumer-b"] == both_dynamic["consumer-a"]
    assert result["consumer-a"] == both_dynamic["consumer-b"]


@pytest.mark.parametrize("cls", [RangeAssignor, RoundRobinAssignor])
def test_a_static_member_sorts_before_a_dynamic_one(cls):
    subs = {
        "consumer-b": Subscription(("topic1", "topic2"), group_instance_id="instance1"),
        "consumer-a": Subscription(("topic1", "topic2")),
    }
    result = cls().assign({"topic1": 3, "topic2": 3}, subs)
    assert len(result["consumer-b"].partitions) >= len(result["consumer-a"].partitions)
    assert tp("topic1-0") in result["consumer-b"].partitions


@pytest.mark.parametrize("cls", [RangeAssignor, RoundRobinAssignor])
def test_static_assignment_survives_member_id_changes(cls):
    def by_instance(subs):
        result = cls().assign({"topic1": 5, "topic2": 5}, subs)
        return {subs[m].group_instance_id: a for m, a in result.items()}

    subs = {
        f"consumer{i}": Subscription(("topic1", "topic2"), group_instance_id=f"instance{i}")
        for i in (1, 2, 3)
    }
    before = by_instance(subs)
    # The members restart: same instance ids, new (and differently sorted) member ids.
    renamed = {"consumer1": subs["consumer1"], "consumer5": subs["consumer2"], "consumer4": subs["consumer3"]}
    assert by_instance(renamed) == before


def test_range_static_members_keep_their_ranges_when_a_dynamic_member_is_replaced():
    static = {
        f"consumer{i}": Subscription(("topic1", "topic2"), group_instance_id=f"instance{i}")
        for i in (1, 2, 3)
    }
    expected_static = {
        "consumer1": ["topic1-0", "topic1-1", "topic2-0"],
        "consumer2": ["topic1-2", "topic2-1"],
        "consumer3": ["topic1-3", "topic2-2"],
    }
    for dynamic in ("consumer4", "consumer5"):
        subs = {**static, dynamic: Subscription(("topic1", "topic2"))}
        result = names(RangeAssignor().assign({"topic1": 5, "topic2": 4}, subs))
        assert result == {**expected_static, dynamic: ["topic1-4", "topic2-3"]}


# ------------------------------------------------------------------------ sticky family

STICKY = [StickyAssignor, CooperativeStickyAssignor]


def sub(cls, topics, owned=(), generation=1) -> Subscription:
    """What a member of generation `generation` owning `owned` sends with this assignor."""
    owned = tps(*owned) if owned and isinstance(owned[0], str) else tuple(owned)
    if cls is StickyAssignor:
        data = encode_sticky_user_data(owned, generation) if generation != DEFAULT_GENERATION else None
        return Subscription(tuple(topics), user_data=data)
    return Subscription(tuple(topics), owned_partitions=owned, generation_id=generation)


def final(assignor, cls, counts, subs, first):
    """The settled assignment: eager is final at once, cooperative needs follow-ups."""
    if cls is StickyAssignor:
        return first
    result, _, _ = settle(assignor, counts, subs, generation=100)
    return result


def part_set(result, member) -> set[TopicPartition]:
    return set(result[member].partitions)


@pytest.mark.parametrize("cls", STICKY)
def test_consumer_owning_min_quota_keeps_it_and_the_spare_goes_to_one_of_them(cls):
    counts = {"topic1": 2, "topic2": 3}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(cls, both, ["topic1-0", "topic2-1"]),
        "consumer2": sub(cls, both, ["topic1-1", "topic2-2"]),
    }
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert names(result) == {
        "consumer1": ["topic1-0", "topic2-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
    }
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subs, result, counts)


@pytest.mark.parametrize("cls", STICKY)
def test_more_members_at_max_quota_than_allowed_gives_one_partition_up(cls):
    counts = {"topic1": 2, "topic2": 2}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(cls, both, ["topic1-0", "topic2-0"]),
        "consumer2": sub(cls, both, ["topic1-1", "topic2-1"]),
        "consumer3": sub(cls, both, []),
    }
    assignor = cls()
    first = assignor.assign(counts, subs)
    # Kafka's HashMap happens to visit consumer2 first, so consumer1 gives up topic2-0;
    # kctl visits consumer1 first, so it keeps two and consumer2 gives up topic2-1.
    assert assignor.partitions_transferring_ownership == {tp("topic2-1"): "consumer3"}
    settled = final(assignor, cls, counts, subs, first)
    assert names(settled) == {
        "consumer1": ["topic1-0", "topic2-0"],
        "consumer2": ["topic1-1"],
        "consumer3": ["topic2-1"],
    }
    assert fully_balanced(settled)


@pytest.mark.parametrize("cls", STICKY)
def test_all_consumers_under_min_quota_keep_theirs_and_fill_round_robin(cls):
    counts = {"topic1": 2, "topic2": 3}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(cls, both, ["topic1-0"]),
        "consumer2": sub(cls, both, ["topic1-1"]),
        "consumer3": sub(cls, both, []),
    }
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    assert names(result) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
        "consumer3": ["topic2-0"],
    }


@pytest.mark.parametrize("cls", STICKY)
def test_add_and_remove_a_consumer_on_one_topic(cls):
    counts = {"topic": 3}
    assignor = cls()
    subs = {"consumer1": sub(cls, ["topic"], generation=DEFAULT_GENERATION)}
    result = assignor.assign(counts, subs)
    assert names(result) == {"consumer1": ["topic-0", "topic-1", "topic-2"]}

    subs = {
        "consumer1": sub(cls, ["topic"], result["consumer1"].partitions),
        "consumer2": sub(cls, ["topic"], []),
    }
    first = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {tp("topic-2"): "consumer2"}
    result = final(assignor, cls, counts, subs, first)
    assert names(result) == {"consumer1": ["topic-0", "topic-1"], "consumer2": ["topic-2"]}

    subs = {"consumer2": sub(cls, ["topic"], result["consumer2"].partitions)}
    result = assignor.assign(counts, subs)
    assert names(result) == {"consumer2": ["topic-0", "topic-1", "topic-2"]}
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("cls", STICKY)
def test_topic_balance_survives_growing_and_shrinking_the_group(cls):
    counts = {"topic1": 12, "topic2": 12}
    both = ("topic1", "topic2")
    assignor = cls()
    generation = 1
    members = ["consumer1"]
    result = assignor.assign(counts, {"consumer1": sub(cls, both, generation=DEFAULT_GENERATION)})
    for group, per_topic in (
        (["consumer1", "consumer2"], 6),
        (["consumer1", "consumer2", "consumer3", "consumer4"], 3),
        (["consumer3", "consumer4"], 6),
    ):
        subs = {
            m: sub(cls, both, result[m].partitions if m in members else (), generation) for m in group
        }
        first = assignor.assign(counts, subs)
        result = final(assignor, cls, counts, subs, first)
        verify_validity_and_balance(subs, result, counts)
        for m in group:
            for topic in both:
                assert sum(p.topic == topic for p in result[m].partitions) == per_topic
        members, generation = group, generation + 1


@pytest.mark.parametrize("cls", STICKY)
def test_add_and_remove_two_consumers_on_two_topics(cls):
    counts = {"topic1": 3, "topic2": 4}
    both = ("topic1", "topic2")
    assignor = cls()
    subs = {c: sub(cls, both, generation=DEFAULT_GENERATION) for c in ("consumer1", "consumer2")}
    result = assignor.assign(counts, subs)
    assert names(result) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }

    subs = {
        "consumer1": sub(cls, both, result["consumer1"].partitions),
        "consumer2": sub(cls, both, result["consumer2"].partitions),
        "consumer3": sub(cls, both, []),
        "consumer4": sub(cls, both, []),
    }
    first = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {
        tp("topic1-2"): "consumer3",
        tp("topic2-3"): "consumer3",
        tp("topic2-2"): "consumer4",
    }
    result = final(assignor, cls, counts, subs, first)
    assert names(result) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0"],
        "consumer3": ["topic1-2", "topic2-3"],
        "consumer4": ["topic2-2"],
    }

    subs = {m: sub(cls, both, result[m].partitions, 2) for m in ("consumer3", "consumer4")}
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    assert names(result) == {
        "consumer3": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer4": ["topic1-1", "topic2-0", "topic2-2"],
    }


@pytest.mark.parametrize("cls", STICKY)
def test_poor_round_robin_scenario_is_balanced_by_sticky(cls):
    counts = {f"topic{i}": i % 2 + 1 for i in range(1, 6)}
    everything = tuple(counts)
    odd = ("topic1", "topic3", "topic5")
    subs = {
        "consumer1": sub(cls, everything, generation=DEFAULT_GENERATION),
        "consumer2": sub(cls, odd, generation=DEFAULT_GENERATION),
        "consumer3": sub(cls, odd, generation=DEFAULT_GENERATION),
        "consumer4": sub(cls, everything, generation=DEFAULT_GENERATION),
    }
    result = cls().assign(counts, subs)
    verify_validity_and_balance(subs, result, counts)
    assert sorted(len(a.partitions) for a in result.values()) == [2, 2, 2, 2]
    # Round robin leaves consumer3 idle here.
    assert RoundRobinAssignor().assign(counts, subs)["consumer3"].partitions == ()


@pytest.mark.parametrize("cls", STICKY)
def test_adding_then_removing_a_topic_keeps_each_consumers_partitions(cls):
    assignor = cls()
    counts = {"topic": 3}
    subs = {c: sub(cls, ["topic"], generation=DEFAULT_GENERATION) for c in ("consumer1", "consumer2")}
    first = assignor.assign(counts, subs)
    assert sorted(len(a.partitions) for a in first.values()) == [1, 2]

    counts = {"topic": 3, "topic2": 3}
    subs = {m: sub(cls, ["topic", "topic2"], first[m].partitions) for m in first}
    second = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    for m in first:
        assert len(second[m].partitions) == 3
        assert set(first[m].partitions) <= set(second[m].partitions)

    counts = {"topic2": 3}
    subs = {m: sub(cls, ["topic2"], second[m].partitions, 2) for m in second}
    third = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    assert sorted(len(a.partitions) for a in third.values()) == [1, 2]
    for m in second:
        assert set(third[m].partitions) <= set(second[m].partitions)


def staircase(n: int) -> tuple[dict[str, int], dict[str, tuple[str, ...]]]:
    """Kafka's testReassignmentAfterOneConsumerLeaves: topic i has i partitions and
    consumer i subscribes topics 1..i (names zero-padded so they sort numerically)."""
    counts = {f"topic{i:02d}": i for i in range(1, n)}
    topics = {f"consumer{i:02d}": tuple(f"topic{j:02d}" for j in range(1, i + 1)) for i in range(1, n)}
    return counts, topics


@pytest.mark.parametrize("cls", STICKY)
def test_reassignment_after_one_consumer_leaves_is_valid_and_sticky(cls):
    counts, topics = staircase(20)
    assignor = cls()
    subs = {m: sub(cls, ts, generation=DEFAULT_GENERATION) for m, ts in topics.items()}
    result = assignor.assign(counts, subs)
    verify_validity_and_balance(subs, result, counts)

    subs = {m: sub(cls, ts, result[m].partitions) for m, ts in topics.items() if m != "consumer10"}
    first = assignor.assign(counts, subs)
    assert assignor.is_sticky()
    verify_validity_and_balance(subs, final(assignor, cls, counts, subs, first), counts)


@pytest.mark.parametrize("cls", STICKY)
def test_reassignment_after_one_consumer_is_added_moves_nothing_owned(cls):
    counts = {"topic": 20}
    assignor = cls()
    subs = {f"consumer{i}": sub(cls, ["topic"], generation=DEFAULT_GENERATION) for i in range(1, 10)}
    assignor.assign(counts, subs)
    # Kafka's test rejoins everyone without owned partitions (a fresh group of ten).
    subs["consumer10"] = sub(cls, ["topic"], generation=DEFAULT_GENERATION)
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subs, result, counts)


@pytest.mark.parametrize("cls", STICKY)
def test_same_subscriptions_after_a_consumer_leaves(cls):
    counts = {f"topic{i:02d}": i for i in range(1, 15)}
    everything = tuple(counts)
    assignor = cls()
    subs = {f"consumer{i}": sub(cls, everything, generation=DEFAULT_GENERATION) for i in range(1, 9)}
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    subs = {m: sub(cls, everything, result[m].partitions) for m in subs if m != "consumer5"}
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subs, result, counts)
    for m, s in subs.items():
        owned = set(s.owned_partitions) if cls is CooperativeStickyAssignor else set(
            decode_sticky_user_data(s.user_data).partitions
        )
        assert owned <= set(result[m].partitions)


@pytest.mark.parametrize("cls", STICKY)
def test_new_subscription_is_valid_and_sticky(cls):
    counts = {f"topic{i}": 1 for i in range(1, 5)}
    wants = {"consumer0": [], "consumer1": ["topic1"], "consumer2": ["topic2", "topic3", "topic4"]}
    assignor = cls()
    subs = {m: sub(cls, ts, generation=DEFAULT_GENERATION) for m, ts in wants.items()}
    result = assignor.assign(counts, subs)
    verify_validity_and_balance(subs, result, counts)
    subs["consumer0"] = sub(cls, ["topic1"], generation=DEFAULT_GENERATION)
    result = assignor.assign(counts, subs)
    verify_validity_and_balance(subs, result, counts)
    assert assignor.is_sticky()


@pytest.mark.parametrize("cls", STICKY)
def test_move_existing_assignments_takes_the_general_path(cls):
    counts = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {
        "consumer1": sub(cls, ["topic1", "topic2"], ["topic1-0"]),
        "consumer2": sub(cls, ["topic1", "topic2", "topic3", "topic4"], ["topic2-0", "topic3-0"]),
        "consumer3": sub(
            cls, ["topic2", "topic3", "topic4", "topic5", "topic6"], ["topic4-0", "topic5-0", "topic6-0"]
        ),
    }
    assignor = cls()
    first = assignor.assign(counts, subs)
    if cls is StickyAssignor:
        assert assignor.partitions_transferring_ownership is None
    verify_validity_and_balance(subs, final(assignor, cls, counts, subs, first), counts)


@pytest.mark.parametrize("cls", STICKY)
def test_stickiness_when_the_potential_leader_leaves(cls):
    counts = {"topic1": 3}
    assignor = cls()
    members = ("consumer1", "consumer2", "consumer3", "consumer4")
    subs = {m: sub(cls, ["topic1"], generation=DEFAULT_GENERATION) for m in members}
    result = assignor.assign(counts, subs)
    held = {m: a.partitions[0] for m, a in result.items() if a.partitions}
    assert all(len(a.partitions) <= 1 for a in result.values())

    subs = {m: sub(cls, ["topic1"], result[m].partitions) for m in members[1:]}
    result = assignor.assign(counts, subs)
    assert assignor.partitions_transferring_ownership == {}
    for m, a in result.items():
        assert len(a.partitions) == 1
        assert m not in held or held[m] in a.partitions


@pytest.mark.parametrize("cls", STICKY)
def test_deleted_topic_disappears_from_the_assignment(cls):
    subs = {"consumer": sub(cls, ["topic1", "topic2", "topic3"], generation=DEFAULT_GENERATION)}
    result = cls().assign({"topic1": 1, "topic3": 100}, subs)
    assert len(result["consumer"].partitions) == 101

    subs = {"consumer": sub(cls, ["topic"], ["topic-0", "topic-1"])}
    assert cls().assign({}, subs)["consumer"].partitions == ()


@pytest.mark.parametrize("cls", STICKY)
def test_all_consumers_reach_expected_quota_and_are_considered_filled(cls):
    subs = {
        "consumer1": sub(cls, ["topic"], ["topic-0", "topic-1"]),
        "consumer2": sub(cls, ["topic"], ["topic-2"]),
        "consumer3": sub(cls, ["topic"], []),
    }
    assignor = cls()
    result = assignor.assign({"topic": 4}, subs)
    assert names(result) == {
        "consumer1": ["topic-0", "topic-1"],
        "consumer2": ["topic-2"],
        "consumer3": ["topic-3"],
    }
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("cls", STICKY)
@pytest.mark.parametrize("stale", [9, DEFAULT_GENERATION])
def test_claims_from_a_stale_or_missing_generation_lose(cls, stale):
    counts = {"topic": 3, "topic2": 3}
    both = ("topic", "topic2")
    claim = ["topic-0", "topic-2", "topic2-1"]
    subs = {"consumer1": sub(cls, both, claim, 10), "consumer2": sub(cls, both, claim, stale)}
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert part_set(result, "consumer1") == set(tps(*claim))
    assert part_set(result, "consumer2") == set(tps("topic-1", "topic2-0", "topic2-2"))
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("cls", STICKY)
def test_a_partition_claimed_twice_in_one_generation_moves_to_a_third_member(cls):
    subs = {
        "consumer1": sub(cls, ["topic"], ["topic-0", "topic-1"]),
        "consumer2": sub(cls, ["topic"], ["topic-0", "topic-2"]),
        "consumer3": sub(cls, ["topic"], []),
    }
    assignor = cls()
    first = assignor.assign({"topic": 3}, subs)
    assert assignor.partitions_transferring_ownership == {tp("topic-0"): "consumer3"}
    if cls is CooperativeStickyAssignor:
        # Both claimants must revoke topic-0 before anyone may have it.
        assert names(first) == {"consumer1": ["topic-1"], "consumer2": ["topic-2"], "consumer3": []}
    result = final(assignor, cls, {"topic": 3}, subs, first)
    assert names(result) == {"consumer1": ["topic-1"], "consumer2": ["topic-2"], "consumer3": ["topic-0"]}


@pytest.mark.parametrize("cls", STICKY)
def test_twice_claimed_partition_with_unequal_partitions_per_consumer(cls):
    subs = {
        "consumer1": sub(cls, ["topic"], ["topic-0", "topic-1"]),
        "consumer2": sub(cls, ["topic"], ["topic-0", "topic-2"]),
        "consumer3": sub(cls, ["topic"], []),
    }
    assignor = cls()
    first = assignor.assign({"topic": 4}, subs)
    if cls is CooperativeStickyAssignor:
        assert names(first) == {
            "consumer1": ["topic-1", "topic-3"],
            "consumer2": ["topic-2"],
            "consumer3": [],
        }
    result = final(assignor, cls, {"topic": 4}, subs, first)
    verify_validity_and_balance(subs, result, {"topic": 4})
    assert fully_balanced(result)


@pytest.mark.parametrize("cls", STICKY)
def test_partitions_go_to_the_member_with_the_highest_generation(cls):
    counts = {"topic": 3, "topic2": 3, "topic3": 3}
    every = tuple(counts)
    subs = {
        "consumer1": sub(cls, every, ["topic-0", "topic2-0", "topic3-0"], 10),
        "consumer2": sub(cls, every, ["topic-1", "topic2-1", "topic3-1"], 9),
        "consumer3": sub(cls, every, ["topic2-1", "topic3-0", "topic3-2"], 8),
    }
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert part_set(result, "consumer1") == set(tps("topic-0", "topic2-0", "topic3-0"))
    assert part_set(result, "consumer2") == set(tps("topic-1", "topic2-1", "topic3-1"))
    assert part_set(result, "consumer3") == set(tps("topic-2", "topic2-2", "topic3-2"))
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("cls", STICKY)
def test_no_reassignment_of_what_current_members_own(cls):
    counts = {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3}
    every = ("topic", "topic2", "topic3", "topic1")
    subs = {
        "consumer1": sub(cls, every, [], DEFAULT_GENERATION),
        "consumer2": sub(cls, every, ["topic-0", "topic2-0", "topic1-0"], 9),
        "consumer3": sub(cls, every, ["topic3-2", "topic2-2", "topic1-1"], 8),
        "consumer4": sub(cls, every, ["topic3-1", "topic-1", "topic-2"], 7),
    }
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert part_set(result, "consumer1") == set(tps("topic1-2", "topic2-1", "topic3-0"))
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subs, result, counts)


@pytest.mark.parametrize("cls", STICKY)
def test_owned_partitions_invalidated_across_multiple_generations(cls):
    counts = {"topic": 3, "topic2": 3}
    both = ("topic", "topic2")
    subs = {
        "consumer1": sub(cls, both, ["topic-0", "topic2-1", "topic-1"], 10),
        "consumer2": sub(cls, both, ["topic-0", "topic2-1", "topic2-2"], 8),
    }
    assignor = cls()
    result = assignor.assign(counts, subs)
    assert part_set(result, "consumer1") == set(tps("topic-0", "topic2-1", "topic-1"))
    assert part_set(result, "consumer2") == set(tps("topic-2", "topic2-2", "topic2-0"))
    assert assignor.partitions_transferring_ownership == {}


# ------------------------------------------------------------ member data (user data)


def test_sticky_user_data_round_trips_in_kafkas_layout():
    data = encode_sticky_user_data(tps("topic-1", "topic-0", "t2-5"), 7)
    # [2 topics]["t2" [5]]["topic" [0, 1]][generation 7], big-endian int32/int16.
    assert data[:4] == (2).to_bytes(4, "big")
    assert data[-4:] == (7).to_bytes(4, "big")
    decoded = decode_sticky_user_data(data)
    assert decoded.partitions == tps("t2-5", "topic-0", "topic-1")
    assert decoded.generation == 7


def test_sticky_v0_user_data_has_no_generation():
    decoded = decode_sticky_user_data(encode_sticky_user_data(tps("topic-0"), None))
    assert decoded.partitions == tps("topic-0")
    assert decoded.generation is None


def test_unreadable_sticky_user_data_means_no_previous_assignment():
    decoded = decode_sticky_user_data(b"\x00\x00\x00\x05\x00")
    assert decoded.partitions == ()
    assert decoded.generation == DEFAULT_GENERATION


def test_sticky_always_honours_user_data_over_owned_partitions():
    data = encode_sticky_user_data(tps("topic1-0", "topic2-1"), 0)
    s = Subscription(("topic",), user_data=data, owned_partitions=tps("topic-0"), generation_id=1)
    member = StickyAssignor().member_data(s)
    assert member.partitions == tps("topic1-0", "topic2-1")
    assert member.generation == 0


def test_sticky_user_data_comes_from_the_last_assignment():
    assignor = StickyAssignor()
    assignor.on_assignment(Assignment(tps("topic-1")), 1)
    s = Subscription(("topic",), user_data=assignor.subscription_user_data({"topic"}), owned_partitions=tps("topic-0"))
    member = assignor.member_data(s)
    assert member.partitions == tps("topic-1")
    assert member.generation == 1


def test_cooperative_takes_owned_partitions_and_falls_back_to_the_generation_in_user_data():
    assignor = CooperativeStickyAssignor()
    assignor.on_assignment(Assignment(tps("topic-1")), 1)
    data = assignor.subscription_user_data({"topic"})
    # No generation in the subscription (an older client): user data supplies it.
    member = assignor.member_data(Subscription(("topic",), user_data=data, owned_partitions=tps("topic-0")))
    assert member.partitions == tps("topic-0")
    assert member.generation == 1
    # Nothing at all: no generation.
    assert assignor.member_data(Subscription(("topic",))).generation is None


@pytest.mark.parametrize("user_generation", [1, 0])
def test_cooperative_prefers_the_subscription_generation(user_generation):
    data = encode_sticky_user_data(tps("topic1-0", "topic2-1"), user_generation)
    s = Subscription(("topic",), user_data=data, owned_partitions=(), generation_id=1)
    member = CooperativeStickyAssignor().member_data(s)
    assert member.partitions == ()
    assert member.generation == 1


def test_cooperative_with_old_version_subscriptions():
    assignor = CooperativeStickyAssignor()
    assignor.on_assignment(Assignment(()), 1)
    data = assignor.subscription_user_data({"topic1"})
    subs = {
        "consumer1": Subscription(("topic1",), user_data=data, owned_partitions=tps("topic1-0")),
        "consumer2": Subscription(("topic1",), user_data=data, owned_partitions=tps("topic1-1")),
        "consumer3": Subscription(("topic1",), owned_partitions=(), generation_id=1),
    }
    result = assignor.assign({"topic1": 3}, subs)
    assert names(result) == {"consumer1": ["topic1-0"], "consumer2": ["topic1-1"], "consumer3": ["topic1-2"]}


def test_uniform_subscription_transfer_list_names_every_moving_partition():
    subs = {
        "c0": Subscription(("topic1",), owned_partitions=tps("topic1-0", "topic1-1"), generation_id=1),
        "c1": Subscription(("topic1",), owned_partitions=tps("topic1-2", "topic1-3"), generation_id=1),
        "c2": Subscription(("topic1",), generation_id=1),
        "c3": Subscription(("topic1",), generation_id=1),
    }
    assignor = CooperativeStickyAssignor()
    result = assignor.assign({"topic1": 4}, subs)
    assert len(assignor.partitions_transferring_ownership) == 2
    assert all(result[m].partitions == () for m in ("c2", "c3"))
    settled, _, rounds = settle(assignor, {"topic1": 4}, subs, generation=1)
    assert rounds == 1
    assert sorted(len(a.partitions) for a in settled.values()) == [1, 1, 1, 1]


def test_next_generation_helper_carries_owned_partitions():
    # The helper the stories use must itself hand owned partitions forward.
    subs = {"a": Subscription(("t",))}
    result = {"a": Assignment(tps("t-0"))}
    assert next_generation(subs, result, 3)["a"].owned_partitions == tps("t-0")
