"""Shared parts of the cluster benchmarks: a broker, worker processes, REST polling.

Not a benchmark itself. `bench_cluster_join.py` and `bench_cluster_throughput.py` run real
`kctl worker start` processes (tests/support/cluster.py's ClusterWorker) on one broker and
drive them over REST, as a user would. httpx is used directly rather than the `kctl` CLI:
a CLI call is a new Python process (about a second here), too coarse a clock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.cluster import Cluster, ClusterWorker  # noqa: E402
from support.worker import Worker  # noqa: E402


@contextlib.contextmanager
def broker_at(bootstrap: str | None) -> Iterator[str]:
    """The given bootstrap, or the test broker (Tansu), started here and stopped after."""
    if bootstrap is not None:
        yield bootstrap
        return
    from support.broker import start_broker

    broker = start_broker()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM as Ctrl-C, so `finally` blocks stop the worker processes either way."""
    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_all(workers: list[ClusterWorker], timeout: float = 20.0) -> None:
    """SIGINT to every worker at once (a clean leave), then SIGKILL to what still runs.

    A worker's Spark JVM exits with it (pyspark's gateway watches its parent's pipe)."""
    procs = [w.proc for w in workers if w.proc is not None and w.proc.poll() is None]
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


@contextlib.contextmanager
def cluster_of(root: Path, bootstrap: str, size: int, **settings: Any) -> Iterator[Cluster]:
    """`size` worker processes in a group of their own, started one after another (each
    waits until it has joined); all stopped on the way out, however it is left."""
    cluster = Cluster(root, bootstrap, **settings)
    try:
        for _ in range(size):
            cluster.add()
        yield cluster
    finally:
        stop_all(cluster.workers)


# -- REST ------------------------------------------------------------------------------------


def get(url: str, timeout: float = 5.0) -> httpx.Response | None:
    """GET, or None when nothing answers (the process is not listening yet)."""
    try:
        return httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return None


def create_connector(worker: ClusterWorker, name: str, config: Mapping[str, Any],
                     timeout: float = 60.0) -> None:
    """POST /connectors; again while the group rebalances (409) or the leader is unknown."""
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.post(f"{worker.url}/connectors", timeout=30,
                       json={"name": name, "config": {k: str(v) for k, v in config.items()}})
        if r.status_code in (200, 201):
            return
        if r.status_code not in (409, 500, 503) or time.monotonic() > deadline:
            raise RuntimeError(f"creating {name} failed: {r.status_code} {r.text}")
        time.sleep(0.2)


def delete_connector(worker: ClusterWorker, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.delete(f"{worker.url}/connectors/{name}", timeout=30)
        if r.status_code in (200, 204, 404):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"deleting {name} failed: {r.status_code} {r.text}")
        time.sleep(0.2)


def status(worker: ClusterWorker, name: str) -> dict[str, Any] | None:
    r = get(f"{worker.url}/connectors/{name}/status")
    return r.json() if r is not None and r.status_code == 200 else None


def failures(statuses: Mapping[str, dict[str, Any] | None]) -> list[str]:
    """The traces of whatever FAILED."""
    out = []
    for name, s in statuses.items():
        if s is None:
            continue
        if s["connector"]["state"] == "FAILED":
            out.append(f"connector {name}: {s['connector'].get('trace', '')}")
        out += [f"task {name}-{t['id']}: {t.get('trace', '')}" for t in s["tasks"]
                if t["state"] == "FAILED"]
    return out


def placement(statuses: Mapping[str, dict[str, Any] | None],
              tasks: Mapping[str, int]) -> dict[str, Counter] | None:
    """worker id -> Counter of what it runs ('connector' and 'task' entries), or None while
    anything of `tasks` (connector -> task count) is not RUNNING."""
    out: dict[str, Counter] = {}
    for name, n in tasks.items():
        s = statuses.get(name)
        if s is None or s["connector"]["state"] != "RUNNING" or len(s["tasks"]) != n:
            return None
        out.setdefault(s["connector"]["worker_id"], Counter())["connector"] += 1
        for t in s["tasks"]:
            if t["state"] != "RUNNING":
                return None
            out.setdefault(t["worker_id"], Counter())["task"] += 1
    return out


def balanced(where: Mapping[str, Counter], workers: list[str]) -> bool:
    """Connectors and tasks differ by one at most between the given workers (as the
    incremental cooperative assignor promises), and nothing runs elsewhere."""
    if set(where) - set(workers):
        return False
    for kind in ("connector", "task"):
        counts = [where.get(w, Counter())[kind] for w in workers]
        if max(counts) - min(counts) > 1:
            return False
    return True


# -- reporting -------------------------------------------------------------------------------


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """'median (min-max)' of a run's values."""
    if not values:
        return "-"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}-{fmt.format(max(values))})"


# -- processes -------------------------------------------------------------------------------


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU a process has used so far (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def jvm_pid(parent: int) -> int | None:
    """A worker's Spark JVM: the java child of its process (None before Spark starts)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == parent and comm == "java":
            return int(entry)
    return None


class SpiedWorker(Worker):
    """A `kctl worker start` process run under `py-spy record` (raw collapsed stacks in
    `profile`), when `profile` is set: here py-spy cannot attach to a running process, so
    it starts the worker itself. `pid` is the worker's own process either way."""

    def __init__(self, work: Path, profile: str | None = None):
        super().__init__(work)
        self.profile = profile

    def launch(self, *connector_files: Path) -> None:
        if not self.profile:
            super().launch(*connector_files)
            return
        with open(self.work / "worker.log", "a") as log:
            self.proc = subprocess.Popen(
                ["py-spy", "record", "--threads", "--nonblocking", "--format", "raw",
                 "-r", "50", "-o", self.profile, "--", sys.executable, "-m", "kctl.cli.main",
                 "worker", "start", str(self.work / "worker.yaml"), *map(str, connector_files)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        if not self.profile:
            return self.proc.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                    children = f.read().split()
                if children:
                    return int(children[0])
            time.sleep(0.05)
        raise RuntimeError("py-spy started no worker process")

    def stop(self) -> None:
        """SIGINT to the worker; py-spy writes its profile once the worker has exited."""
        if self.profile and self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, RuntimeError):
                os.kill(self.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            return
        super().stop()
