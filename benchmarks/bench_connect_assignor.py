"""How long one incremental cooperative round takes at 10,000 tasks over 100 workers.

Not a test: run it by hand (`python benchmarks/bench_connect_assignor.py`) and read
the ratio against the 50 ms target. Each scenario builds its cluster first and then
times only the leader's `assign` call, best of several repetitions.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import _results

from kctl.group.assignors import (
    AssignorMemory,
    ConnectAssignResult,
    ConnectorsAndTasks,
    IncrementalCooperativeAssignor,
    WorkerMetadata,
)

TARGET_MS = 50.0


@dataclass
class Cluster:
    configured: dict[str, int]
    owned: dict[str, ConnectorsAndTasks]
    memory: AssignorMemory | None = None
    generation: int = 0
    now_ms: int = 0


def run_round(assignor: IncrementalCooperativeAssignor, cluster: Cluster) -> ConnectAssignResult:
    cluster.generation += 1
    return assignor.assign(
        leader=min(cluster.owned),
        leader_url="",
        generation=cluster.generation,
        members={w: WorkerMetadata(owned=o) for w, o in cluster.owned.items()},
        configured=cluster.configured,
        config_offset=0,
        now_ms=cluster.now_ms,
        memory=cluster.memory,
    )


def apply(cluster: Cluster, result: ConnectAssignResult) -> None:
    cluster.memory = result.memory
    cluster.owned = dict(result.complete)


def settled(workers: int, connectors: int, tasks_per_connector: int) -> Cluster:
    """A cluster that has already converged, ready for the event under test."""
    assignor = IncrementalCooperativeAssignor()
    cluster = Cluster(
        configured={f"connector{c:04d}": tasks_per_connector for c in range(connectors)},
        owned={f"worker{w:03d}": ConnectorsAndTasks() for w in range(workers)},
    )
    for _ in range(3):
        apply(cluster, run_round(assignor, cluster))
    return cluster


def scenarios(workers: int, connectors: int, tasks: int) -> dict[str, Callable[[], Cluster]]:
    def fresh() -> Cluster:
        return Cluster(
            configured={f"connector{c:04d}": tasks for c in range(connectors)},
            owned={f"worker{w:03d}": ConnectorsAndTasks() for w in range(workers)},
        )

    def join() -> Cluster:
        cluster = settled(workers, connectors, tasks)
        cluster.owned["worker-new"] = ConnectorsAndTasks()
        return cluster

    def leave() -> Cluster:
        cluster = settled(workers, connectors, tasks)
        del cluster.owned[max(cluster.owned)]
        return cluster

    def steady() -> Cluster:
        return settled(workers, connectors, tasks)

    def connector_added() -> Cluster:
        cluster = settled(workers, connectors, tasks)
        cluster.configured["connector-new"] = tasks
        return cluster

    return {
        "fresh start": fresh,
        "one worker joins": join,
        "one worker leaves": leave,
        "nothing changed": steady,
        "one connector added": connector_added,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--tasks-per-connector", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    _results.add_arguments(parser)
    args = parser.parse_args()
    figures: list[_results.Figure] = []

    total = args.connectors * args.tasks_per_connector
    print(
        f"incremental cooperative assignor: {total} tasks, {args.connectors} connectors, "
        f"{args.workers} workers (target {TARGET_MS:.0f} ms a round)"
    )
    assignor = IncrementalCooperativeAssignor()
    for name, build in scenarios(args.workers, args.connectors, args.tasks_per_connector).items():
        best = float("inf")
        for _ in range(args.repeat):
            cluster = build()
            start = time.perf_counter()
            result = run_round(assignor, cluster)
            best = min(best, (time.perf_counter() - start) * 1000)
        moved = result.sets.revoked.size + result.sets.assigned.size
        print(
            f"  {name:<22} {best:8.1f} ms  {best / TARGET_MS:5.2f}x target  "
            f"(moved {moved}, delay {result.delay_ms} ms)"
        )
        figures.append(_results.Figure(f"{name}: one round, best of {args.repeat}", round(best, 2),
                                       "ms", target=f"< {TARGET_MS:.0f} ms"))
    _results.record(args, "bench_connect_assignor",
                    f"Incremental cooperative assignor: {total:,} tasks over {args.workers} workers",
                    figures)


if __name__ == "__main__":
    main()
