"""Seed 000's rebalance storm on a live cluster, next to the simulator's prediction.

Three `kctl worker start` processes on one broker (the test broker unless --bootstrap);
N DataGen connectors x T tasks are created one after another, then deleted one after
another, under `default` (eager) and under `sessioned`. Each change waits for the one
before to settle, as a deployment script that waits for RUNNING does: a create until the
connector and its tasks run, a delete until its tasks are gone from every worker. For each
protocol and phase it reports the rebalance rounds, the task stops and task starts (from
the workers' generation records, `kctl rebalance history`; starts also from each worker's
task-startup counter) and the time from the first request to a stable cluster, with the
simulator's figures for the same events (bench_rebalance_storm.py with a create as two
changes, as Kafka Connect's herder makes it: the connector's config, then its task
configs; its task stops and starts, and its modelled phase time with 30 ms per task
restart).

    python benchmarks/bench_storm_live.py [--connectors 90] [--tasks 10] [--workers 3]
                                          [--protocols default,sessioned] [--json]

Each task keeps one producer, so a worker holds as many Kafka clients as tasks: on a small
machine scale down with --connectors / --tasks and say so. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cluster import broker_at, cluster_of, interruptible
from bench_rebalance_storm import run as simulate_storm

from kctl.rebalance.history import cluster_history

POLL_S = 0.5
REQUEST_TIMEOUT_S = 120.0


def datagen(name: str, tasks: int, throughput: int) -> dict[str, Any]:
    return {"connector.class": "DataGen", "topic": f"storm-{name}", "tasks.max": tasks,
            "throughput": throughput}


def create_connector(worker: Any, name: str, config: dict[str, Any], timeout: float) -> None:
    """POST, again on 409 (a rebalance) or a request that outlived its read timeout (under
    eager a create can wait for hundreds of tasks to stop); "already exists" means an
    earlier attempt got through."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.post(f"{worker.url}/connectors", timeout=REQUEST_TIMEOUT_S,
                           json={"name": name, "config": {k: str(v) for k, v in config.items()}})
        except httpx.TimeoutException:
            r = None
        if r is not None and (r.status_code in (200, 201) or
                              (r.status_code == 409 and "already exists" in r.text)):
            return
        if (r is not None and r.status_code not in (409, 500, 503)) or \
                time.monotonic() > deadline:
            raise RuntimeError(f"creating {name} failed: {r and r.status_code} {r and r.text}")
        time.sleep(0.2)


def delete_connector(worker: Any, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.delete(f"{worker.url}/connectors/{name}", timeout=REQUEST_TIMEOUT_S)
        except httpx.TimeoutException:
            r = None
        if r is not None and r.status_code in (200, 204, 404):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"deleting {name} failed: {r and r.status_code} {r and r.text}")
        time.sleep(0.2)


class TasksFailed(RuntimeError):
    """The machine could not hold this size: tasks failed while the storm raged."""


def running(worker: Any, names: list[str], tasks: int) -> bool:
    r = httpx.get(f"{worker.url}/connectors", params={"expand": "status"}, timeout=30)
    if r.status_code != 200:
        return False
    got = r.json()
    failed = [f"{n}-{t['id']}: {(t.get('trace') or '').splitlines()[-1:]}"
              for n, v in got.items() for t in v["status"]["tasks"] if t["state"] == "FAILED"]
    if failed:
        raise TasksFailed(f"{len(failed)} task(s) FAILED, e.g. {failed[0]}")
    for name in names:
        s = got.get(name, {}).get("status")
        if not s or s["connector"]["state"] != "RUNNING" or len(s["tasks"]) != tasks or \
                any(t["state"] != "RUNNING" for t in s["tasks"]):
            return False
    return True


def holding(cluster: Any, names: list[str], tasks: int) -> bool:
    """The cluster lists exactly `names`, and its workers run their connectors and tasks
    and nothing else."""
    live = cluster.live()
    if set(httpx.get(f"{live[0].url}/connectors", timeout=30).json()) != set(names):
        return False
    return (sum(w.metric("task_count") for w in live) == tasks * len(names) and
            sum(w.metric("connector_count") for w in live) == len(names))


def wait(condition: Any, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout

    def holds() -> bool:
        try:
            return bool(condition())
        except httpx.HTTPError:  # a worker busy with a big rebalance answers late
            return False

    while not holds():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(POLL_S)
    return time.monotonic()


def phase(doc: dict[str, Any], start_ms: int, end_ms: int) -> dict[str, int]:
    rounds = [r for r in doc["rounds"] if start_ms <= r["at_ms"] <= end_ms]
    count = lambda field: sum(len(w.get("tasks", ())) for r in rounds  # noqa: E731
                              for w in r[field].values())
    return {"rounds": len(rounds), "tasks_stopped": count("revoked"),
            "tasks_started": count("assigned")}


def live_run(bootstrap: str, root: Path, protocol: str, *, connectors: int, tasks: int,
             workers: int, throughput: int, timeout: float,
             session_ms: int, history: Path | None = None) -> dict[str, Any]:
    names = [f"ct{i:03d}" for i in range(1, connectors + 1)]
    settings = {"connect.protocol": protocol, "scheduled.rebalance.max.delay.ms": 0,
                "session.timeout.ms": session_ms, "rebalance.timeout.ms": max(6000, session_ms),
                # the worker's defaults, not the test fixtures' (offsets every 200 ms, 2 s to
                # stop): at 90 x 10 the fixtures' would have 900 tasks commit offsets 4,500
                # times a second, and a storm measures rebalances, not offset commits
                "offset.flush.interval.ms": 10_000, "task.shutdown.graceful.timeout.ms": 5_000}
    with cluster_of(root, bootstrap, workers, **settings) as cluster:
        w1 = cluster.workers[0]
        starts0 = sum(w.task_starts() for w in cluster.workers)
        t0, wall0 = time.monotonic(), int(time.time() * 1000)
        for i, name in enumerate(names, 1):
            create_connector(w1, name, datagen(name, tasks, throughput), timeout=timeout)
            wait(lambda i=i: running(w1, names[:i], tasks), timeout, f"{name}'s tasks running")
        t1 = time.monotonic()
        starts1 = sum(w.task_starts() for w in cluster.workers)
        time.sleep(2)  # the records of the last round reach the status topic
        wall_mid = int(time.time() * 1000)  # rounds from here on belong to the stop phase
        for i, name in enumerate(names, 1):
            delete_connector(w1, name, timeout=timeout)
            wait(lambda i=i: holding(cluster, names[i:], tasks), timeout, f"{name} gone")
        t2 = time.monotonic()
        # a deleted task stops before its round completes: the history is read once the
        # round of the last deletion is in it with every member's own record
        # (under eager a round's cause is only what a worker gave as its reason, so the
        # round may not name it: then the history is read after the wait, and it says so)
        last = f"connector deleted: {names[-1]} "
        try:
            wait(lambda: any(last in r["trigger"] and set(r["sources"].values())
                             == {"worker record"}
                             for r in cluster_history(cluster.generations())["rounds"]),
                 30, "the last deletion's round recorded")
        except TimeoutError:
            print(f"({protocol}: no round names the deletion of {names[-1]} after 30 s; the "
                  "history is read as it is)", file=sys.stderr)
        starts2 = sum(w.task_starts() for w in cluster.workers)
        doc = cluster_history(cluster.generations())
    if history is not None:
        history.write_text(json.dumps(doc, indent=1))
    return {
        "protocol": protocol,
        "start": {**phase(doc, wall0, wall_mid - 1),
                  "stable_s": round(t1 - t0, 1), "task_starts_metric": starts1 - starts0},
        "stop": {**phase(doc, wall_mid, 1 << 62),
                 "stable_s": round(t2 - t1, 1), "task_starts_metric": starts2 - starts1},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=90,
                        help="DataGen connectors created, then deleted, one after another (default: %(default)s)")
    parser.add_argument("--tasks", type=int, default=10,
                        help="tasks.max of each connector (every task keeps a producer) (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=3,
                        help="`kctl worker start` processes in the cluster (default: %(default)s)")
    parser.add_argument("--protocols", default="default,sessioned",
                        help="connect.protocol values to run, comma-separated, one storm each (default: %(default)s)")
    parser.add_argument("--throughput", type=int, default=1,
                        help="records/s each DataGen task produces (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds each phase (start, stop) may take to become stable (default: %(default)s)")
    parser.add_argument("--bootstrap", default=None,
                        help="an existing Kafka cluster's bootstrap.servers (without it, a "
                             "test broker is started for the run)")
    parser.add_argument("--session-timeout-ms", type=int, default=10000,
                        help="the workers' session.timeout.ms. The test broker completes a "
                             "JoinGroup half a session timeout after the first member's, not "
                             "when every member has rejoined as Kafka does, so a worker still "
                             "stopping tasks when that time is up misses the round and rejoins "
                             "after it, a round of its own (default: %(default)s)")
    parser.add_argument("--history", metavar="PREFIX", default=None,
                        help="write each storm's rebalance history (what `kctl rebalance history "
                             "-o json` answers) to PREFIX.PROTOCOL.json")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as JSON instead of a table")
    args = parser.parse_args()

    results = []
    with interruptible(), broker_at(args.bootstrap) as bootstrap, \
            tempfile.TemporaryDirectory(prefix="kctl-storm-") as tmp:
        for protocol in args.protocols.split(","):
            live = live_run(bootstrap, Path(tmp) / protocol, protocol,
                            connectors=args.connectors, tasks=args.tasks,
                            workers=args.workers, throughput=args.throughput,
                            timeout=args.timeout, session_ms=args.session_timeout_ms,
                            history=Path(f"{args.history}.{protocol}.json") if args.history
                            else None)
            predicted = simulate_storm("eager" if protocol == "default" else protocol,
                                       connectors=args.connectors, tasks=args.tasks,
                                       workers=args.workers, step_ms=1000, restart_ms=30,
                                       two_step_create=True)
            results.append({**live, "simulated": {p: predicted[p] for p in ("start", "stop")}})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"live storm: {args.connectors} connectors x {args.tasks} tasks on {args.workers} "
          "worker processes, created then deleted one after another")
    header = (f"{'protocol':<10} {'phase':<6} {'rounds':>7} {'stops':>7} {'starts':>7} "
              f"{'stable s':>9} | {'sim rounds':>10} {'sim stops':>9} {'sim starts':>10} "
              f"{'sim modelled':>12}")
    print(header)
    print("-" * len(header))
    for r in results:
        for name in ("start", "stop"):
            f, s = r[name], r["simulated"][name]
            print(f"{r['protocol']:<10} {name:<6} {f['rounds']:>7} {f['tasks_stopped']:>7} "
                  f"{f['tasks_started']:>7} {f['stable_s']:>9} | {s['rounds']:>10} "
                  f"{s['tasks_stopped']:>9} {s['tasks_started']:>10} "
                  f"{s['modelled_phase_ms'] / 1000:>11.1f}s")
    for r in results:
        print(f"{r['protocol']}: task starts by the workers' counters: "
              f"{r['start']['task_starts_metric']} in the start phase, "
              f"{r['stop']['task_starts_metric']} in the stop phase")


if __name__ == "__main__":
    main()
