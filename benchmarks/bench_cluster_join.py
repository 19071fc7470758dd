"""A fourth worker process joins a three-worker cluster: time until the moved tasks run.

Three `kctl worker start` processes (one group on one broker) run 2 connectors x 6 tasks of
a cheap pure-Python source (tests/support/connectors.py's CounterSourceConnector: one
record per 50 ms per task, no Spark, so what is timed is the rebalance, not a SparkSession
start). A fourth worker process is then launched, and REST is polled every 50 ms:

- t0: the moment the fourth process is launched;
- REST up: it first answers `GET /`  (Python and pyspark imports, its three stores read,
  the REST server started);
- joined: its `/health` is 200 (it completed its first generation);
- assigned: the wall-clock time (`at_ms`) of its first generation record in the status
  topic with work assigned (under `sessioned`: the second round; eager: the first);
- t1: every connector and task RUNNING (read through worker 1's REST), placed in balance
  over the four workers (connectors and tasks differ by one at most), the fourth running
  its share.

In the same run the broker's own cost of one rebalance round is measured: a lone member's
raw JoinGroup + SyncGroup (kafka-python requests, no kctl code; `_broker_rtt.py`, shared
with `bench_group_broker.py`) with the same session timeout. The test broker (Tansu)
completes a JoinGroup only after max(1 s, session.timeout/2) from the first member's
request, so that round trip is ~session/2, and a cooperative join (`sessioned`: revoke,
then assign) needs two rounds. Every run is a fresh group of fresh processes.

    python benchmarks/bench_cluster_join.py [--bootstrap HOST:PORT] [--runs 3]
        [--protocols sessioned,default] [--session-ms 6000] [--connectors 2] [--tasks 6]

With no `--bootstrap`, the test broker is started (and stopped) here. All worker processes
are stopped on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _broker_rtt import raw_round_trip
from _cluster import (
    ClusterWorker,
    balanced,
    broker_at,
    cluster_of,
    create_connector,
    failures,
    get,
    interruptible,
    placement,
    spread,
    status,
)
from support.waiting import wait_until  # tests/ is on the path through _cluster

POLL_S = 0.05


@dataclass
class JoinRun:
    protocol: str
    rest_up: float  # seconds from launch
    joined: float | None
    assigned: float | None
    running: float  # t1 - t0
    moved: int  # tasks the fourth worker runs at t1
    restarted: int  # task starts across the cluster between t0 and t1
    raw: float  # the broker's JoinGroup + SyncGroup, measured just before
    timeline: list[str]  # the generation records from t0 on, for --timeline

    @property
    def after_joined(self) -> float | None:
        return None if self.joined is None else self.running - self.joined


def counter_source(name: str, tasks: int) -> dict[str, object]:
    return {"connector.class": "support.connectors.CounterSourceConnector",
            "topic": f"{name}-out", "tasks.max": tasks, "count": 10**9, "per.poll": 1,
            "poll.sleep.ms": 50}


def wait_settled(cluster, tasks: dict[str, int], workers: list[str], timeout: float = 120):
    """Everything RUNNING in balance over `workers`; returns the placement."""
    deadline = time.monotonic() + timeout
    w1 = cluster.workers[0]
    while True:
        statuses = {n: status(w1, n) for n in tasks}
        if bad := failures(statuses):
            raise RuntimeError("\n".join(bad))
        where = placement(statuses, tasks)
        if where is not None and balanced(where, workers) and all(where.get(w) for w in workers):
            return where
        if time.monotonic() > deadline:
            raise TimeoutError(f"not settled over {workers}: {where}\n{cluster.logs()}")
        time.sleep(POLL_S)


def join_run(bootstrap: str, root: Path, protocol: str, session_ms: int,
             tasks: dict[str, int]) -> JoinRun:
    settings = {"connect.protocol": protocol, "session.timeout.ms": session_ms,
                "rebalance.timeout.ms": session_ms}
    with cluster_of(root, bootstrap, 3, **settings) as cluster:
        w1 = cluster.workers[0]
        for name, n in tasks.items():
            create_connector(w1, name, counter_source(name, n))
        three = [w.worker_id for w in cluster.workers]
        wait_settled(cluster, tasks, three)
        time.sleep(1.0)  # no rebalance (a connector's task configs) still under way
        wait_settled(cluster, tasks, three)
        starts_before = sum(w.task_starts() for w in cluster.workers)
        raw = raw_round_trip(bootstrap, session_ms)

        w4 = ClusterWorker(root, "w4", cluster.settings)
        cluster.workers.append(w4)
        rest_up = joined = None
        wall0 = time.time()
        t0 = time.perf_counter()
        w4.launch()
        w4._url = wait_until(w4._reported_url, timeout=180, interval=POLL_S / 5,
                             message="w4's REST listener")  # it binds port 0
        four = [*three, w4.worker_id]
        deadline = t0 + 180
        while True:
            now = time.perf_counter()
            if rest_up is None and get(f"{w4.url}/", timeout=1) is not None:
                rest_up = time.perf_counter() - t0
            if rest_up is not None and joined is None:
                r = get(f"{w4.url}/health", timeout=1)
                if r is not None and r.status_code == 200:
                    joined = time.perf_counter() - t0
            statuses = {n: status(w1, n) for n in tasks}
            where = placement(statuses, tasks)
            if (where is not None and balanced(where, four)
                    and where.get(w4.worker_id, {}).get("task", 0) >= sum(tasks.values()) // 4):
                t1 = time.perf_counter() - t0
                break
            if bad := failures(statuses):
                raise RuntimeError("\n".join(bad))
            if w4.proc.poll() is not None:
                raise RuntimeError(f"w4 exited:\n{w4.log()[-3000:]}")
            if now > deadline:
                raise TimeoutError(f"w4 never got its share: {where}\n{cluster.logs()}")
            time.sleep(max(0.0, POLL_S - (time.perf_counter() - now)))
        restarted = sum(w.task_starts() for w in cluster.workers) - starts_before
        moved = where[w4.worker_id]["task"]
        assigned = None
        timeline = []
        names = {w.worker_id: w.name for w in cluster.workers}
        for g in sorted(cluster.generations(), key=lambda g: g["at_ms"]):
            at = g["at_ms"] / 1000 - wall0
            if at < -1:
                continue
            if (assigned is None and g["worker"] == w4.worker_id
                    and (g["assigned"] or {}).get("tasks")):
                assigned = at
            timeline.append(
                f"{at:6.2f} s  {names.get(g['worker'], g['worker'])} generation "
                f"{g['generation']}: assigned {_count(g['assigned'])}, revoked "
                f"{_count(g['revoked'])}, owns {_count(g['owned'])}"
                f"{', leader' if g['member_id'] == g['leader'] else ''}; {g['trigger']}")
        return JoinRun(protocol, rest_up or t1, joined, assigned, t1, moved, restarted, raw,
                       timeline)


def _count(work: object) -> str:
    """'1c+3t' for a generation record's work (connectors and tasks)."""
    if not isinstance(work, dict):
        return "?"
    return f"{len(work.get('connectors', []))}c+{len(work.get('tasks', []))}t"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a broker (default: start the test broker)")
    parser.add_argument("--runs", type=int, default=3, help="fresh clusters per protocol")
    parser.add_argument("--protocols", default="sessioned,default",
                        help="connect.protocol values, comma-separated")
    parser.add_argument("--session-ms", type=int, default=6000,
                        help="session.timeout.ms (and rebalance.timeout.ms) of the workers "
                             "and of the raw round trip (tests/support/cluster.py's)")
    parser.add_argument("--connectors", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=6, help="tasks per connector")
    parser.add_argument("--timeline", action="store_true",
                        help="print every worker's generation records of each join")
    args = parser.parse_args()
    tasks = {f"ct{i + 1}": args.tasks for i in range(args.connectors)}
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]

    runs: list[JoinRun] = []
    with interruptible(), broker_at(args.bootstrap) as bootstrap, \
            tempfile.TemporaryDirectory(prefix="kctl-bench-join-") as tmp:
        print(f"a 4th worker process joins 3 ({bootstrap}): {len(tasks)} connectors x "
              f"{args.tasks} tasks (CounterSource, no Spark), session.timeout.ms "
              f"{args.session_ms}, REST polled every {POLL_S * 1000:.0f} ms; "
              f"{os.cpu_count()} CPU(s)")
        print("  seconds from launching w4: REST up / joined (/health 200) / assigned "
              "(its generation record) / moved tasks RUNNING; raw = the broker's "
              "JoinGroup + SyncGroup just before")
        for k in range(args.runs):  # each cluster stops its own processes, however left
            for protocol in protocols:
                run = join_run(bootstrap, Path(tmp) / f"{protocol}-{k}", protocol,
                               args.session_ms, tasks)
                runs.append(run)
                print(f"  run {k + 1} {protocol:<9}  REST up {run.rest_up:5.2f}  joined "
                      f"{_s(run.joined)}  assigned {_s(run.assigned)}  running "
                      f"{run.running:5.2f}  raw {run.raw:5.2f}  ratio "
                      f"{run.running / run.raw:4.1f}  ({run.moved} tasks moved, "
                      f"{run.restarted} task starts)", flush=True)
                if args.timeline:
                    print("\n".join(f"      {line}" for line in run.timeline))

    print()
    print(f"  {'connect.protocol':<17} {'join -> running':>20} {'raw RTT':>18} "
          f"{'ratio':>16} {'launch -> REST up':>20} {'joined -> running':>20} "
          f"{'task starts':>12}")
    for protocol in protocols:
        rs = [r for r in runs if r.protocol == protocol]
        if not rs:
            continue
        print(f"  {protocol:<17} {spread([r.running for r in rs]):>20} "
              f"{spread([r.raw for r in rs]):>18} "
              f"{spread([r.running / r.raw for r in rs], '{:.1f}'):>16} "
              f"{spread([r.rest_up for r in rs]):>20} "
              f"{spread([r.after_joined for r in rs if r.after_joined is not None]):>20} "
              f"{spread([float(r.restarted) for r in rs], '{:.0f}'):>12}")
    print(f"  median (min-max) of {args.runs} run(s), seconds; ratio = join -> running / raw "
          "RTT. 'joined -> running' leaves out the process start (Python, pyspark imports, "
          "stores, REST).")
    if runs:
        share = statistics.median(r.rest_up / r.running for r in runs)
        print(f"  process start (launch -> REST up) is {share:.0%} of join -> running "
              "(median over all runs)")


def _s(v: float | None) -> str:
    return "  -  " if v is None else f"{v:5.2f}"


if __name__ == "__main__":
    main()
