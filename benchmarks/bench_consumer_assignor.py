"""How long cooperative-sticky takes at 100,000 partitions over 1,000 consumers.

Not a test: run it by hand (`python benchmarks/bench_consumer_assignor.py`) and read the
ratio against the 2 s target (Kafka's Java assignor does 1M partitions in about 1.4 s).
Two rounds are timed, best of several repetitions: a fresh group (nobody owns anything)
and the rebalance after one consumer leaves (everyone else reports what it owns). Only
the leader's `assign` call is timed; building the subscriptions is not.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from kctl.group.assignors import CooperativeStickyAssignor, Subscription

TARGET_S = 2.0


def best_of(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    parser.add_argument("--consumers", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    counts = {f"topic-{i:05d}": args.partitions for i in range(args.topics)}
    topics = tuple(counts)
    members = [f"consumer-{i:05d}" for i in range(args.consumers)]
    fresh = {m: Subscription(topics) for m in members}
    total = args.topics * args.partitions

    assignor = CooperativeStickyAssignor()
    first = assignor.assign(counts, fresh)
    leaving = members[len(members) // 2]
    after_leave = {
        m: Subscription(topics, owned_partitions=first[m].partitions, generation_id=1)
        for m in members
        if m != leaving
    }
    moved = assignor.assign(counts, after_leave)
    orphans = len(first[leaving].partitions)
    handed_out = sum(len(a.partitions) for a in moved.values())
    assert handed_out == total, f"{handed_out} of {total} partitions assigned after the leave"
    kept = all(set(s.owned_partitions) <= set(moved[m].partitions) for m, s in after_leave.items())

    print(f"cooperative-sticky: {total:,} partitions, {args.consumers:,} consumers")
    for label, subs in (("fresh group", fresh), (f"after {leaving} leaves", after_leave)):
        seconds = best_of(args.repeat, lambda s=subs: CooperativeStickyAssignor().assign(counts, s))
        print(f"  {label:<32} {seconds:7.3f} s   {seconds / TARGET_S:5.2f}x of the {TARGET_S:.0f} s target")
    survivors = "none revoked from survivors" if kept else "SOME REVOKED FROM SURVIVORS"
    print(f"  ({orphans} orphaned partitions redistributed, {survivors})")


if __name__ == "__main__":
    main()
