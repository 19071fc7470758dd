"""Rebalance time on a real Kafka-protocol broker: kctl's group protocol against the wire.

Three Connect workers (kctl's GroupMember + ConnectHandler over the broker group driver)
hold 2 connectors and 12 tasks under `sessioned`; a fourth joins. Measured from the new
worker's start to the group being stable again with every moved task started on its new
owner, next to the broker's own cost of one JoinGroup + SyncGroup round trip for a lone
member (raw kafka-python requests, no kctl code), in the same run. The broker completes a
JoinGroup only after max(1 s, session.timeout/2) (a Tansu quirk; Kafka waits
group.initial.rebalance.delay.ms), so a cooperative join, which needs two rounds, costs at
least two of those waits: the ratio says how much kctl adds on top.

    python3 benchmarks/bench_group_broker.py [--bootstrap HOST:PORT] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

from _broker_rtt import raw_round_trip

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from kctl.group.assignors.connect import EMPTY, configured_work, union_all  # noqa: E402
from kctl.group.connect_coordinator import ConnectHandler  # noqa: E402
from kctl.group.protocol import GroupMember, MemberState, StartWork, StopWork  # noqa: E402
from kctl.transport.kafka_group import CONNECT_CODEC, BrokerGroupDriver  # noqa: E402

CONNECTORS = {"ct1": 6, "ct2": 6}
SESSION_MS = 2000


class Snapshot:
    connectors = CONNECTORS
    config_offset = 1


class Worker:
    def __init__(self, bootstrap: str, group: str, name: str):
        handler = ConnectHandler(name, Snapshot(), "sessioned", max_delay_ms=0)
        member = GroupMember(name, handler, session_timeout_ms=SESSION_MS,
                             rebalance_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
        self.driver = BrokerGroupDriver(bootstrap, group, member, CONNECT_CODEC)
        self.owned = EMPTY
        self.started_at: dict[object, float] = {}

    def poll(self) -> None:
        for a in self.driver.poll(0.01):
            if isinstance(a, StartWork):
                self.owned = self.owned | a.work
                now = time.perf_counter()
                for t in a.work.tasks:
                    self.started_at[t] = now
            elif isinstance(a, StopWork):
                self.owned = self.owned - a.work


def stable(workers: list[Worker]) -> bool:
    members = [w.driver.member for w in workers]
    owned = [w.owned for w in workers]
    return (all(m.state is MemberState.STABLE and m.rejoin_at_ms is None for m in members)
            and len({m.generation for m in members}) == 1
            and union_all(owned) == configured_work(CONNECTORS)
            and sum(o.size for o in owned) == configured_work(CONNECTORS).size)


def settle(workers: list[Worker], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not stable(workers):
        if time.monotonic() > deadline:
            raise SystemExit("the group did not settle")
        for w in workers:
            w.poll()


def join_time(bootstrap: str) -> tuple[float, int]:
    group = f"bench-connect-{uuid.uuid4().hex[:8]}"
    workers = [Worker(bootstrap, group, f"w{i}") for i in (1, 2, 3)]
    try:
        for w in workers:
            w.driver.start()
            settle(workers[: workers.index(w) + 1])
        before = {id(w): w.owned for w in workers}
        w4 = Worker(bootstrap, group, "w4")
        t0 = time.perf_counter()
        w4.driver.start()
        workers.append(w4)
        settle(workers)
        moved = w4.owned
        done = max(w4.started_at[t] for t in moved.tasks) if moved.tasks else time.perf_counter()
        kept = all(w.owned == before[id(w)] - moved for w in workers[:3])
        if not kept:
            raise SystemExit("a worker lost work that did not move")
        return done - t0, len(moved.tasks) + len(moved.connectors)
    finally:
        for w in workers:
            w.driver.leave()
            w.driver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a broker (default: start the test broker)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from support.broker import start_broker

        broker = start_broker()
        bootstrap = broker.bootstrap
    try:
        raw = [raw_round_trip(bootstrap, SESSION_MS) for _ in range(args.runs)]
        joins = [join_time(bootstrap) for _ in range(args.runs)]
    finally:
        if broker is not None:
            broker.stop()
    raw_s = statistics.median(raw)
    join_s = statistics.median(t for t, _ in joins)
    moved = joins[0][1]
    print(f"kctl group protocol on a broker ({bootstrap}), session.timeout.ms={SESSION_MS}, "
          f"median of {args.runs}")
    print(f"  raw: one JoinGroup + SyncGroup round trip (kafka-python)   {raw_s:6.2f} s")
    print(f"  kctl: w4 joins 3 workers, sessioned, {moved} moved -> all running  "
          f"{join_s:6.2f} s  ({join_s / raw_s:.1f} x the raw round trip; a cooperative "
          "move needs two rounds)")
    print("  only moved work was stopped: checked on every run")


if __name__ == "__main__":
    main()
