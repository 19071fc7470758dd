"""Stories from the classic write-ups of Kafka's consumer assignors: range, roundrobin, sticky and cooperative-sticky worked
examples, the custom-assignor interface, and finding assignors by name."""

from __future__ import annotations

import importlib.metadata
import types

import pytest
from consumer_assignor_support import fully_balanced, names, next_generation, tp, tps

from kctl.errors import PluginError
from kctl.group.assignors import (
    Assignment,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    consumer_assignor,
)
from kctl.group.assignors.consumer import (
    AbstractPartitionAssignor,
    decode_generation,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kctl.transport import assignor_plugins as plugins


def subscribe(**members: list[str]) -> dict[str, Subscription]:
    return {m: Subscription(tuple(topics)) for m, topics in members.items()}


def kept(before: dict[str, list[str]], after: dict[str, list[str]]) -> int:
    return sum(len(set(before[m]) & set(after[m])) for m in after if m in before)


# ------------------------------------------------------------------ range


def test_range_gives_the_first_consumers_one_extra_partition_of_each_topic():
    # t1 has 4 partitions, 3 consumers: 4 // 3 = 1 each, 4 % 3 = 1 consumer gets one more.
    result = RangeAssignor().assign({"t1": 4}, subscribe(c0=["t1"], c1=["t1"], c2=["t1"]))
    assert names(result) == {"c0": ["t1-0", "t1-1"], "c1": ["t1-2"], "c2": ["t1-3"]}


def test_range_with_many_topics_loads_the_first_consumers_more():
    # The seed's warning: the extra partition of every topic lands on the same consumer.
    topics = {f"t{i}": 4 for i in range(5)}
    result = RangeAssignor().assign(topics, subscribe(c0=[*topics], c1=[*topics], c2=[*topics]))
    assert [len(result[c].partitions) for c in ("c0", "c1", "c2")] == [10, 5, 5]


# ------------------------------------------------------------ roundrobin


def test_roundrobin_deals_sorted_partitions_over_sorted_consumers():
    topics = {"topic-A": 3, "topic-B": 3, "topic-C": 3}
    everyone = [*topics]
    result = RoundRobinAssignor().assign(
        topics, subscribe(**{"consumer-2": everyone, "consumer-0": everyone, "consumer-1": everyone})
    )
    assert names(result) == {
        "consumer-0": ["topic-A-0", "topic-B-0", "topic-C-0"],
        "consumer-1": ["topic-A-1", "topic-B-1", "topic-C-1"],
        "consumer-2": ["topic-A-2", "topic-B-2", "topic-C-2"],
    }


def test_roundrobin_with_unequal_subscriptions_skips_non_subscribers():
    # The seed's walkthrough miscounts (see seeds/README.md): after topic-A the circle
    # stands at consumer-1, which takes B-0; then consumer-0 takes B-1, consumer-1 B-2
    # and all of topic-C. consumer-0 gets B-1 too, 4 partitions against 5.
    result = RoundRobinAssignor().assign(
        {"topic-A": 3, "topic-B": 3, "topic-C": 3},
        subscribe(**{"consumer-0": ["topic-A", "topic-B"], "consumer-1": ["topic-B", "topic-C"]}),
    )
    assert names(result) == {
        "consumer-0": ["topic-A-0", "topic-A-1", "topic-A-2", "topic-B-1"],
        "consumer-1": ["topic-B-0", "topic-B-2", "topic-C-0", "topic-C-1", "topic-C-2"],
    }


# ---------------------------------------------------------------- sticky

FOUR_TOPICS = {"T0": 2, "T1": 2, "T2": 2, "T3": 2}
FIRST_SPLIT = {
    "C0": ["T0-0", "T1-1", "T3-0"],
    "C1": ["T0-1", "T2-0", "T3-1"],
    "C2": ["T1-0", "T2-1"],
}


def test_sticky_and_roundrobin_agree_on_a_fresh_group():
    subs = subscribe(C0=[*FOUR_TOPICS], C1=[*FOUR_TOPICS], C2=[*FOUR_TOPICS])
    assert names(RoundRobinAssignor().assign(FOUR_TOPICS, subs)) == FIRST_SPLIT
    assert names(StickyAssignor().assign(FOUR_TOPICS, subs)) == FIRST_SPLIT


def test_when_c1_leaves_sticky_keeps_all_five_partitions_roundrobin_only_three():
    everyone = [*FOUR_TOPICS]
    roundrobin = names(RoundRobinAssignor().assign(FOUR_TOPICS, subscribe(C0=everyone, C2=everyone)))
    assert roundrobin == {
        "C0": ["T0-0", "T1-0", "T2-0", "T3-0"],
        "C2": ["T0-1", "T1-1", "T2-1", "T3-1"],
    }
    assert kept(FIRST_SPLIT, roundrobin) == 3

    # Eager sticky members revoked everything; the old assignment travels in user data.
    subs = {
        m: Subscription(tuple(everyone), user_data=encode_sticky_user_data(tps(*FIRST_SPLIT[m]), 1))
        for m in ("C0", "C2")
    }
    result = StickyAssignor().assign(FOUR_TOPICS, subs)
    sticky = names(result)
    assert kept(FIRST_SPLIT, sticky) == 5
    assert fully_balanced(result)
    # The seed shows C0 taking T2-0 and C2 taking T0-1, T3-1: one valid sticky answer
    # (see seeds/README.md). kctl's constrained path deals C1's orphans in sorted order.
    assert sticky == {
        "C0": ["T0-0", "T0-1", "T1-1", "T3-0"],
        "C2": ["T1-0", "T2-0", "T2-1", "T3-1"],
    }


UNEQUAL_TOPICS = {"T0": 1, "T1": 2, "T2": 3}
UNEQUAL = {"C0": ["T0"], "C1": ["T0", "T1"], "C2": ["T0", "T1", "T2"]}


def test_sticky_balances_unequal_subscriptions_better_than_roundrobin():
    roundrobin = names(RoundRobinAssignor().assign(UNEQUAL_TOPICS, subscribe(**UNEQUAL)))
    assert roundrobin == {"C0": ["T0-0"], "C1": ["T1-0"], "C2": ["T1-1", "T2-0", "T2-1", "T2-2"]}
    sticky = names(StickyAssignor().assign(UNEQUAL_TOPICS, subscribe(**UNEQUAL)))
    assert sticky == {"C0": ["T0-0"], "C1": ["T1-0", "T1-1"], "C2": ["T2-0", "T2-1", "T2-2"]}


def test_when_c0_leaves_sticky_moves_only_its_partition():
    before = {"C0": ["T0-0"], "C1": ["T1-0"], "C2": ["T1-1", "T2-0", "T2-1", "T2-2"]}
    roundrobin = names(
        RoundRobinAssignor().assign(UNEQUAL_TOPICS, subscribe(C1=UNEQUAL["C1"], C2=UNEQUAL["C2"]))
    )
    assert roundrobin == {"C1": ["T0-0", "T1-1"], "C2": ["T1-0", "T2-0", "T2-1", "T2-2"]}
    # The seed says 4 stay put; only C2's three T2 partitions do (T1-0 and T1-1 swap owners).
    assert kept(before, roundrobin) == 3

    sticky_before = {"C0": ["T0-0"], "C1": ["T1-0", "T1-1"], "C2": ["T2-0", "T2-1", "T2-2"]}
    subs = {
        m: Subscription(tuple(UNEQUAL[m]), user_data=encode_sticky_user_data(tps(*sticky_before[m]), 1))
        for m in ("C1", "C2")
    }
    sticky = names(StickyAssignor().assign(UNEQUAL_TOPICS, subs))
    assert sticky == {"C1": ["T0-0", "T1-0", "T1-1"], "C2": ["T2-0", "T2-1", "T2-2"]}
    assert kept(sticky_before, sticky) == 5


# ---------------------------------------------------- cooperative-sticky


def test_cooperative_sticky_moves_p2_to_consumer3_over_two_rebalances():
    assignor = CooperativeStickyAssignor()
    subs = {
        "consumer1": Subscription(("T0",), owned_partitions=tps("T0-0", "T0-2"), generation_id=1),
        "consumer2": Subscription(("T0",), owned_partitions=tps("T0-1"), generation_id=1),
        "consumer3": Subscription(("T0",)),
    }
    # Round 1: consumer1 keeps running T0-0 and is told to give up T0-2; nobody gets it yet.
    first = assignor.assign({"T0": 3}, subs)
    assert names(first) == {"consumer1": ["T0-0"], "consumer2": ["T0-1"], "consumer3": []}
    assert assignor.partitions_transferring_ownership == {tp("T0-2"): "consumer3"}

    # consumer1 revoked T0-2 and rejoins; round 2 hands it to consumer3.
    second = assignor.assign({"T0": 3}, next_generation(subs, first, 2))
    assert names(second) == {"consumer1": ["T0-0"], "consumer2": ["T0-1"], "consumer3": ["T0-2"]}
    assert assignor.partitions_transferring_ownership == {}


def test_eager_sticky_hands_the_partition_over_in_one_round():
    # The same join under eager sticky: everything was revoked, so T0-2 moves at once.
    subs = {
        "consumer1": Subscription(("T0",), user_data=encode_sticky_user_data(tps("T0-0", "T0-2"), 1)),
        "consumer2": Subscription(("T0",), user_data=encode_sticky_user_data(tps("T0-1"), 1)),
        "consumer3": Subscription(("T0",)),
    }
    result = StickyAssignor().assign({"T0": 3}, subs)
    assert names(result) == {"consumer1": ["T0-0"], "consumer2": ["T0-1"], "consumer3": ["T0-2"]}


# ----------------------------------------------------- the custom interface


class FirstSubscriberAssignor(AbstractPartitionAssignor):
    """A custom assignor in the seed's style (its 'afei' picks at random; this one is
    deterministic): every partition goes to the first subscriber of its topic."""

    name = "first"
    version = 3

    def __init__(self) -> None:
        self.seen: list[tuple[Assignment, int]] = []

    def assign_partitions(self, partitions_per_topic, subscriptions):
        result = {m: [] for m in subscriptions}
        for topic, count in partitions_per_topic.items():
            first = next(m for m, s in subscriptions.items() if topic in s.topics)
            result[first].extend(TopicPartition(topic, p) for p in range(count))
        return result

    def subscription_user_data(self, topics):
        return ",".join(sorted(topics)).encode()

    def on_assignment(self, assignment, generation):
        self.seen.append((assignment, generation))


def test_builtin_assignors_declare_kafka_names_protocols_and_version():
    expected = {
        "range": [RebalanceProtocol.EAGER],
        "roundrobin": [RebalanceProtocol.EAGER],
        "sticky": [RebalanceProtocol.EAGER],
        "cooperative-sticky": [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER],
    }
    for name, protocols in expected.items():
        assignor = consumer_assignor(name)
        assert isinstance(assignor, ConsumerPartitionAssignor)
        assert assignor.name == name
        assert assignor.supported_protocols() == protocols
        assert assignor.version == 0


def test_kafka_class_names_find_the_builtins():
    assert isinstance(
        consumer_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
        CooperativeStickyAssignor,
    )


def test_each_lookup_is_a_fresh_instance_because_sticky_assignors_remember():
    first, second = consumer_assignor("sticky"), consumer_assignor("sticky")
    first.on_assignment(Assignment(tps("T0-0")), 4)
    assert decode_sticky_user_data(first.subscription_user_data({"T0"})).partitions == tps("T0-0")
    assert second.subscription_user_data({"T0"}) is None


def test_cooperative_sticky_sends_its_last_generation_as_user_data():
    assignor = CooperativeStickyAssignor()
    assert decode_generation(assignor.subscription_user_data({"T0"})) == -1
    assignor.on_assignment(Assignment(()), 10)
    assert decode_generation(assignor.subscription_user_data({"T0"})) == 10


def fake_entry_points(monkeypatch, **targets: object) -> None:
    module = types.ModuleType("kctl_test_plugins")
    for attr, target in targets.items():
        setattr(module, attr, target)
    monkeypatch.setitem(__import__("sys").modules, "kctl_test_plugins", module)
    eps = importlib.metadata.EntryPoints(
        importlib.metadata.EntryPoint(name, f"kctl_test_plugins:{name.replace('-', '_')}", "kctl.assignors")
        for name in [attr.replace("_", "-") for attr in targets]
    )
    real = importlib.metadata.entry_points

    def entry_points(**params):
        if params.get("group") == "kctl.assignors":
            return eps
        return real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_a_third_party_assignor_is_found_through_the_entry_point_group(monkeypatch):
    fake_entry_points(monkeypatch, first=FirstSubscriberAssignor)
    assert "first" in plugins.available_consumer_assignors()
    assignor = plugins.consumer_assignor("first")
    assert isinstance(assignor, FirstSubscriberAssignor)
    assert assignor.version == 3
    assert assignor.subscription_user_data({"b", "a"}) == b"a,b"

    result = assignor.assign({"T0": 2, "T1": 1, "unsubscribed": 5}, subscribe(C1=["T0"], C0=["T1", "T0"]))
    # Only subscribed topics reach the plugin, and members come in sorted order.
    assert names(result) == {"C0": ["T0-0", "T0-1", "T1-0"], "C1": []}
    assignor.on_assignment(result["C0"], 7)
    assert assignor.seen == [(result["C0"], 7)]


def test_an_unknown_assignor_names_the_known_ones(monkeypatch):
    fake_entry_points(monkeypatch, first=FirstSubscriberAssignor)
    with pytest.raises(PluginError) as caught:
        plugins.consumer_assignor("afei")
    message = str(caught.value)
    assert "afei" in message
    for known in ("cooperative-sticky", "first", "range", "roundrobin", "sticky"):
        assert known in message


def test_an_entry_point_that_is_not_an_assignor_is_refused(monkeypatch):
    fake_entry_points(monkeypatch, bogus=dict)
    with pytest.raises(PluginError, match="not a ConsumerPartitionAssignor"):
        plugins.consumer_assignor("bogus")


def test_a_broken_entry_point_says_which_plugin_failed(monkeypatch):
    def explode():
        raise RuntimeError("boom")

    fake_entry_points(monkeypatch, broken=explode)
    with pytest.raises(PluginError, match=r"broken.*boom"):
        plugins.consumer_assignor("broken")
