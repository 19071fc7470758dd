"""How long cooperative-sticky takes at 100,000 partitions over 1,000 consumers.

Not a test: run it by hand (`python benchmarks/bench_consumer_assignor.py`) and read the
ratio against the 2 s target (Kafka's Java assignor does 1M partitions in about 1.4 s).
Only the leader's `assign` call is timed, best of several repetitions; building the
subscriptions is not. Four rounds:

* equal subscriptions (the constrained path): a fresh group, then the rebalance after one
  consumer leaves (everyone else reports what it owns);
* unequal subscriptions (the general path, Kafka's
  `testLargeAssignmentAndGroupWithNonEqualSubscription` at this size): every consumer
  reads every topic except the last, which reads only the first topic; a fresh group, then
  the next rebalance in which everyone but the first consumer reports what it owns;
* varied subscriptions (the general path at its hardest): each consumer reads its own
  random 60% of the topics (seeded), a fresh group.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Mapping

import _results

from kctl.group.assignors import Assignment, CooperativeStickyAssignor, Subscription

TARGET_S = 2.0


def best_of(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def owning(
    subscriptions: Mapping[str, Subscription], result: Mapping[str, Assignment], skip: str = ""
) -> dict[str, Subscription]:
    """The next round's subscriptions: each member reports what `result` gave it."""
    return {
        m: Subscription(s.topics, owned_partitions=() if m == skip else result[m].partitions,
                        generation_id=1)
        for m, s in subscriptions.items()
    }


def check_complete(label: str, counts: Mapping[str, int], subs: Mapping[str, Subscription],
                   result: Mapping[str, Assignment]) -> None:
    """Every subscribed partition went to exactly one subscriber (the cooperative first
    round may hold back partitions changing owner, so only check without owned ones)."""
    got = [tp for a in result.values() for tp in a.partitions]
    assert len(got) == len(set(got)), f"{label}: a partition assigned twice"
    for member, assignment in result.items():
        topics = set(subs[member].topics)
        assert all(tp.topic in topics for tp in assignment.partitions), f"{label}: {member}"
    if not any(s.owned_partitions for s in subs.values()):
        wanted = {t for s in subs.values() for t in s.topics}
        assert len(got) == sum(counts[t] for t in wanted), f"{label}: partitions left out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    parser.add_argument("--consumers", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    _results.add_arguments(parser)
    args = parser.parse_args()
    figures: list[_results.Figure] = []

    counts = {f"topic-{i:05d}": args.partitions for i in range(args.topics)}
    topics = tuple(counts)
    members = [f"consumer-{i:05d}" for i in range(args.consumers)]
    total = args.topics * args.partitions

    fresh = {m: Subscription(topics) for m in members}
    first = CooperativeStickyAssignor().assign(counts, fresh)
    leaving = members[len(members) // 2]
    after_leave = owning({m: s for m, s in fresh.items() if m != leaving}, first)
    moved = CooperativeStickyAssignor().assign(counts, after_leave)
    orphans = len(first[leaving].partitions)
    handed_out = sum(len(a.partitions) for a in moved.values())
    assert handed_out == total, f"{handed_out} of {total} partitions assigned after the leave"
    kept = all(set(s.owned_partitions) <= set(moved[m].partitions) for m, s in after_leave.items())

    unequal = {m: Subscription(topics) for m in members}
    unequal[members[-1]] = Subscription(topics[:1])
    unequal_first = CooperativeStickyAssignor().assign(counts, unequal)
    unequal_next = owning(unequal, unequal_first, skip=members[0])
    pick = random.Random(2024)
    varied = {
        m: Subscription(tuple(t for t in topics if pick.random() < 0.6) or topics[:1])
        for m in members
    }

    print(f"cooperative-sticky: {total:,} partitions, {args.consumers:,} consumers")
    rounds = (
        ("equal: fresh group", fresh),
        (f"equal: after {leaving} leaves", after_leave),
        ("unequal: fresh group", unequal),
        ("unequal: next round, owned reported", unequal_next),
        ("varied: fresh group", varied),
    )
    for label, subs in rounds:
        check_complete(label, counts, subs, CooperativeStickyAssignor().assign(counts, subs))
        seconds = best_of(args.repeat, lambda s=subs: CooperativeStickyAssignor().assign(counts, s))
        print(f"  {label:<38} {seconds:7.3f} s   "
              f"{seconds / TARGET_S:5.2f}x of the {TARGET_S:.0f} s target")
        figures.append(_results.Figure(f"{label}: one assignment, best of {args.repeat}",
                                       round(seconds, 3), "s", target=f"< {TARGET_S:.0f} s"))
    survivors = "none revoked from survivors" if kept else "SOME REVOKED FROM SURVIVORS"
    print(f"  ({orphans} orphaned partitions redistributed after the leave, {survivors})")
    _results.record(args, "bench_consumer_assignor",
                    f"cooperative-sticky: {total:,} partitions over {args.consumers:,} consumers",
                    figures, notes=f"{orphans} orphaned partitions redistributed after the leave, "
                                   f"{survivors}.")


if __name__ == "__main__":
    main()
