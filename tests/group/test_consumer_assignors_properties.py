"""Properties every consumer assignor keeps, over random groups and random changes."""

from __future__ import annotations

from consumer_assignor_support import (
    fully_balanced,
    next_generation,
    settle,
    verify_validity_and_balance,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.group.assignors.consumer import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)

TOPICS = [f"T{i}" for i in range(4)]
MEMBERS = [f"C{i}" for i in range(6)]
ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]
BALANCING = [RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]

counts_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 7), min_size=1)
members_st = st.lists(st.sampled_from(MEMBERS), min_size=1, unique=True)
topic_set_st = st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)


@st.composite
def groups(draw, equal: bool):
    counts = draw(counts_st)
    members = draw(members_st)
    if equal:
        topics = tuple(draw(topic_set_st))
        subs = {m: Subscription(topics) for m in members}
    else:
        subs = {m: Subscription(tuple(draw(topic_set_st))) for m in members}
    return counts, subs


def owners(result):
    return {p: m for m, a in result.items() for p in a.partitions}


@settings(max_examples=60, deadline=None)
@given(group=groups(equal=False), cls=st.sampled_from(ALL))
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(group, cls):
    counts, subs = group
    result = cls().assign(counts, subs)
    assert set(result) == set(subs)
    seen = [p for a in result.values() for p in a.partitions]
    assert len(seen) == len(set(seen))
    for member, assignment in result.items():
        assert all(p.topic in subs[member].topics for p in assignment.partitions)
    wanted = {t for s in subs.values() for t in s.topics}
    assert {(p.topic, p.partition) for p in seen} == {
        (t, p) for t, n in counts.items() if t in wanted for p in range(n)
    }


@settings(max_examples=60, deadline=None)
@given(group=groups(equal=True), cls=st.sampled_from(BALANCING))
def test_equal_subscriptions_balance_within_one(group, cls):
    counts, subs = group
    assert fully_balanced(cls().assign(counts, subs))


@settings(max_examples=60, deadline=None)
@given(group=groups(equal=True))
def test_range_balances_each_topic_within_one(group):
    counts, subs = group
    result = RangeAssignor().assign(counts, subs)
    for topic in counts:
        per_member = [sum(p.topic == topic for p in a.partitions) for a in result.values()]
        assert max(per_member) - min(per_member) <= 1


@settings(max_examples=60, deadline=None)
@given(group=groups(equal=False), cls=st.sampled_from(ALL), data=st.data())
def test_the_answer_does_not_depend_on_the_order_of_the_mappings(group, cls, data):
    counts, subs = group
    shuffled_members = data.draw(st.permutations(list(subs)))
    shuffled_topics = data.draw(st.permutations(list(counts)))
    again = cls().assign(
        {t: counts[t] for t in shuffled_topics}, {m: subs[m] for m in shuffled_members}
    )
    assert again == cls().assign(counts, subs)


@st.composite
def changes(draw, equal: bool):
    """A group, then a new membership: some leave, some join, topics may gain partitions."""
    counts, subs = draw(groups(equal))
    stay = draw(st.lists(st.sampled_from(sorted(subs)), unique=True))
    outside = [m for m in MEMBERS if m not in subs]
    newcomers = draw(st.lists(st.sampled_from(outside), unique=True)) if outside else []
    if not stay and not newcomers:
        stay = sorted(subs)[:1]
    topics = next(iter(subs.values())).topics
    joined = {m: (topics if equal else tuple(draw(topic_set_st))) for m in newcomers}
    grown = {t: n + draw(st.integers(0, 2)) for t, n in counts.items()}
    return counts, subs, stay, joined, grown


def rejoin(cls, subs, result, stay, joined, generation):
    """The next JoinGroup: survivors report what they own the way `cls` expects."""
    nxt = {}
    for m in stay:
        owned = result[m].partitions
        if cls is StickyAssignor:
            nxt[m] = Subscription(
                subs[m].topics, user_data=encode_sticky_user_data(owned, generation)
            )
        else:
            nxt[m] = Subscription(subs[m].topics, owned_partitions=owned, generation_id=generation)
    nxt.update({m: Subscription(ts) for m, ts in joined.items()})
    return nxt


@settings(max_examples=80, deadline=None)
@given(change=changes(equal=True), cls=st.sampled_from([StickyAssignor, CooperativeStickyAssignor]))
def test_sticky_keeps_what_survivors_own_up_to_their_fair_share(change, cls):
    counts, subs, stay, joined, grown = change
    assignor = cls()
    before = assignor.assign(counts, subs)
    nxt = rejoin(cls, subs, before, stay, joined, generation=1)
    result = assignor.assign(grown, nxt)
    if cls is CooperativeStickyAssignor:
        result, nxt, _ = settle(assignor, grown, nxt, generation=1)
    verify_validity_and_balance(nxt, result, grown)
    assert fully_balanced(result)
    # A survivor never gives up a partition it owned unless it now holds no more than
    # its share: kept == min(owned, now) for everyone who stayed.
    for m in stay:
        owned = set(before[m].partitions)
        now = set(result[m].partitions)
        assert len(owned & now) == min(len(owned), len(now))


@settings(max_examples=60, deadline=None)
@given(change=changes(equal=False), cls=st.sampled_from([StickyAssignor, CooperativeStickyAssignor]))
def test_sticky_stays_valid_and_balanced_with_unequal_subscriptions(change, cls):
    counts, subs, stay, joined, grown = change
    assignor = cls()
    before = assignor.assign(counts, subs)
    verify_validity_and_balance(subs, before, counts)
    nxt = rejoin(cls, subs, before, stay, joined, generation=1)
    result = assignor.assign(grown, nxt)
    if cls is CooperativeStickyAssignor:
        result, nxt, _ = settle(assignor, grown, nxt, generation=1)
    else:
        assert assignor.is_sticky()
    verify_validity_and_balance(nxt, result, grown)


@settings(max_examples=60, deadline=None)
@given(change=changes(equal=False))
def test_cooperative_never_revokes_and_assigns_a_partition_in_one_round(change):
    counts, subs, stay, joined, grown = change
    assignor = CooperativeStickyAssignor()
    before = assignor.assign(counts, subs)
    nxt = next_generation(subs, before, 1, keep=stay)
    nxt.update({m: Subscription(ts) for m, ts in joined.items()})
    result = assignor.assign(grown, nxt)
    previous = {p: m for m, s in nxt.items() for p in s.owned_partitions}
    for member, assignment in result.items():
        for p in assignment.partitions:
            # Handed to someone new only if its old owner is gone (or it is brand new).
            assert previous.get(p, member) == member


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 2**31 - 1)), unique=True
    ),
    generation=st.one_of(st.none(), st.integers(-1, 2**31 - 1)),
)
def test_sticky_user_data_round_trips(parts, generation):
    from kctl.group.assignors.consumer import TopicPartition

    partitions = [TopicPartition(t, p) for t, p in parts]
    decoded = decode_sticky_user_data(encode_sticky_user_data(partitions, generation))
    assert decoded.partitions == tuple(sorted(partitions))
    assert decoded.generation == generation
