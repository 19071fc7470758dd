"""Seed 000's rebalance storm: 90 connectors x 10 tasks started one after another, then stopped.

Runs the same scenario under eager and under sessioned through the simulator and reports,
for each phase, the rounds, the task stops (each one a task restart a real cluster pays
for) and the simulated time to stable.

Simulated rounds take no time. The simulated time to stable ("stable at ms") is therefore
the same under both protocols: the time of the last change. It says nothing about which
protocol is faster. The contrast appears only in the task stops and in a cost model on top
of them: each task a worker stops or starts takes --restart-ms (30 ms by default), workers
work in parallel, and a round lasts as long as its busiest worker. "restart busy" adds
those round durations up; "modelled phase" also lets a round wait for the previous one to
finish, so it is how long the phase would take if restarts were the only cost. The
published figures (Confluent's blog, quoted in seed 000), ~14 min (start) and ~12 min
(stop) under eager against under a minute under cooperative, compare with those two
modelled columns, not with "stable at ms".

    python benchmarks/bench_rebalance_storm.py [--connectors 90] [--tasks 10] [--workers 3]
                                               [--step-ms 1000] [--json]

Not a timed test: it prints figures and how long the simulation itself took.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import _results

from kctl.rebalance.explain import simulate_document


def storm_scenario(
    protocol: str, *, connectors: int, tasks: int, workers: int, step_ms: int,
    two_step_create: bool = False,
) -> dict[str, Any]:
    """Connectors added one at a time, every step_ms, then removed one at a time.

    two_step_create: a create is two changes, as Kafka Connect's herder makes it: the
    connector's config (a round hands out the connector), then the task configs the
    connector returns once it runs (a second round hands out its tasks). Without it the
    connector and its tasks appear together, one round (the seed's published comparison).
    """
    names = [f"ct{i:03d}" for i in range(1, connectors + 1)]
    events: list[dict[str, Any]] = []
    at = step_ms
    for name in names:
        if two_step_create:
            events.append({"at_ms": at, "connector_add": {name: 0}})
            events.append({"at_ms": at, "tasks_change": {name: tasks}})
        else:
            events.append({"at_ms": at, "connector_add": {name: tasks}})
        at += step_ms
    for name in names:
        events.append({"at_ms": at, "connector_remove": name})
        at += step_ms
    return {
        "kind": "connect",
        "protocol": protocol,
        "workers": [f"w{i}" for i in range(1, workers + 1)],
        "connectors": {},
        "events": events,
    }


def phase_figures(
    doc: dict[str, Any], *, start_ms: int, end_ms: int, restart_ms: int
) -> dict[str, int]:
    """Rounds, task stops and starts, and the last stable time of rounds in [start_ms, end_ms).

    Simulated rounds take no time, so ``stable_at_ms`` is the same for every protocol.
    The cost model behind ``restart_busy_ms`` and ``modelled_phase_ms``: every task a
    worker stops or starts takes ``restart_ms``, workers work in parallel, and a round is
    over when its busiest worker is done; a round starts once the previous one is over.
    """
    rounds = [r for r in doc["rounds"] if start_ms <= r["at_ms"] < end_ms]
    stopped = sum(len(v["tasks"]) for r in rounds for v in r["revoked"].values())
    started = sum(len(v["tasks"]) for r in rounds for v in r["assigned"].values())
    busy = 0
    done = start_ms
    for r in rounds:
        longest = max(
            (len(r["revoked"][m]["tasks"]) + len(r["assigned"][m]["tasks"]) for m in r["members"]),
            default=0,
        ) * restart_ms
        busy += longest
        done = max(done, r["at_ms"]) + longest
    return {
        "rounds": len(rounds),
        "tasks_stopped": stopped,
        "tasks_started": started,
        "stable_at_ms": max((r["at_ms"] for r in rounds), default=start_ms),
        "restart_busy_ms": busy,
        "modelled_phase_ms": done - start_ms,
    }


def run(
    protocol: str, *, connectors: int, tasks: int, workers: int, step_ms: int, restart_ms: int,
    two_step_create: bool = False,
) -> dict[str, Any]:
    scenario = storm_scenario(
        protocol, connectors=connectors, tasks=tasks, workers=workers, step_ms=step_ms,
        two_step_create=two_step_create,
    )
    began = time.perf_counter()
    doc = simulate_document(scenario)
    elapsed = time.perf_counter() - began
    stop_phase = step_ms * (connectors + 1)
    return {
        "protocol": protocol,
        "start": phase_figures(doc, start_ms=step_ms, end_ms=stop_phase, restart_ms=restart_ms),
        "stop": phase_figures(doc, start_ms=stop_phase, end_ms=1 << 62, restart_ms=restart_ms),
        "summary": doc["summary"],
        "simulation_seconds": round(elapsed, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=90)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument(
        "--step-ms", type=int, default=1000, help="simulated time between two changes"
    )
    parser.add_argument(
        "--restart-ms",
        type=int,
        default=30,
        help="cost model: ms a worker spends stopping or starting one task",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    _results.add_arguments(parser)
    args = parser.parse_args()

    results = [
        run(
            p,
            connectors=args.connectors,
            tasks=args.tasks,
            workers=args.workers,
            step_ms=args.step_ms,
            restart_ms=args.restart_ms,
        )
        for p in ("eager", "sessioned")
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"rebalance storm: {args.connectors} connectors x {args.tasks} tasks on {args.workers} workers, "
        f"one change every {args.step_ms} ms"
    )
    header = (
        f"{'protocol':<10} {'phase':<6} {'rounds':>7} {'task stops':>11} {'task starts':>12} "
        f"{'stable at ms':>13} {'restart busy':>13} {'modelled phase':>15}"
    )
    print(header)
    print("-" * len(header))
    for result in results:
        for phase in ("start", "stop"):
            f = result[phase]
            print(
                f"{result['protocol']:<10} {phase:<6} {f['rounds']:>7} {f['tasks_stopped']:>11} "
                f"{f['tasks_started']:>12} {f['stable_at_ms']:>13} {_minutes(f['restart_busy_ms']):>13} "
                f"{_minutes(f['modelled_phase_ms']):>15}"
            )
    eager, cooperative = results
    for phase in ("start", "stop"):
        e, c = eager[phase]["tasks_stopped"], cooperative[phase]["tasks_stopped"]
        if c:
            print(
                f"{phase}: eager stops {e} tasks, sessioned {c} ({e / c:.1f}x as many under eager)"
            )
        else:
            print(f"{phase}: eager stops {e} tasks, sessioned none")
    print(
        "stable at ms: the same under both protocols, because simulated rounds take no time "
        "(it is when the last change happened); the contrast is in task stops and in the "
        "cost model below"
    )
    print(
        f"restart busy: the time workers spend stopping and starting tasks if each takes "
        f"{args.restart_ms} ms (workers in parallel, a round lasts as long as its busiest worker)"
    )
    print(
        "modelled phase: how long the phase takes under that cost model when a round also "
        "waits for the previous one to finish (each phase on its own)"
    )
    for result in results:
        print(f"simulating {result['protocol']} took {result['simulation_seconds']} s")
    _record(args, results)


def _record(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    figures = []
    for result in results:
        for phase in ("start", "stop"):
            f = result[phase]
            name = f"{result['protocol']}, {phase} phase"
            figures += [
                _results.Figure(f"{name}: rounds", f["rounds"], "rounds"),
                _results.Figure(f"{name}: task stops", f["tasks_stopped"], "tasks"),
                _results.Figure(f"{name}: task starts", f["tasks_started"], "tasks"),
                _results.Figure(f"{name}: modelled time, {args.restart_ms} ms a restart",
                                round(f["modelled_phase_ms"] / 1000, 1), "s"),
            ]
    _results.record(args, "bench_rebalance_storm",
                    f"Simulated rebalance storm: {args.connectors} connectors x {args.tasks} "
                    f"tasks on {args.workers} workers, one change every {args.step_ms} ms",
                    figures)


def _minutes(ms: int) -> str:
    return f"{ms // 60000}m{ms % 60000 / 1000:04.1f}s"


if __name__ == "__main__":
    main()
