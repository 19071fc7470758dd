"""A worker of a three-worker cluster is frozen (SIGSTOP) while it runs exactly-once FileSink
tasks, long enough for the group to give its partitions to other tasks, then thawed
(SIGCONT): a zombie that still holds buffered records and, the moment it runs again, finds a
rotation due.

Story: lines stream file -> topic -> file; the frozen worker's sink partitions are claimed
by their new owners, which read the committed end back and write on from there; when the
zombie resumes it tries to publish what it held, finds each partition claimed by another
task (the epoch in the partition directory's `.kctl-claim` moved on), publishes nothing and
says so; it stays alive and rejoins the group. The output holds every line exactly once,
in files whose offset ranges do not overlap.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster, ClusterWorker
from support.files import committed_lines, partition_lines
from support.waiting import wait_until

from kctl.api import TopicPartition
from kctl.connectors.file.sink import committed_files, partition_dir, read_claim

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.spark]  # FileSource on Spark

# names of their own: the broker is shared by the test session, and a sink's consumer group
# is connect-<name>
SRC, SINK, TOPIC = "zombie-src", "zombie-sink", "zombie-lines"
PARTITIONS = 6
FENCED = re.compile(r"FileSink: partition (\S+) was claimed by another task")


class Feeder(threading.Thread):
    """Writes a new input file of `lines` lines every `every` seconds until stopped."""

    def __init__(self, indir: Path, lines: int = 100, every: float = 0.1):
        super().__init__(daemon=True)
        self.indir, self.lines, self.every = indir, lines, every
        self.total = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            tmp = self.indir / f".part-{n}.tmp"  # hidden: the source reads visible files
            tmp.write_text("".join(f"line {i}\n" for i in range(self.total,
                                                                 self.total + self.lines)))
            tmp.rename(self.indir / f"part-{n}.txt")
            self.total += self.lines
            n += 1
            self.stopping.wait(self.every)

    def stop(self) -> int:
        self.stopping.set()
        self.join(30)
        return self.total


def connector(tmp_path: Path, name: str, config: dict) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({"name": name, "config": config}))
    return f


def tasks_on(cluster: Cluster, name: str, worker: ClusterWorker) -> list[str]:
    return [t for t, w in cluster.placement(name).items() if w == worker.worker_id and t != name]


PARTS = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


def claimed_by(outdir: Path, worker: ClusterWorker) -> dict[TopicPartition, int]:
    """The partitions whose claim names the worker's process -> their committed end."""
    out = {}
    for tp in PARTS:
        d = partition_dir(str(outdir), tp)
        if os.path.isdir(d) and read_claim(d).owner.startswith(f"pid {worker.proc.pid} on "):
            files = committed_files(str(outdir), tp)
            out[tp] = files[-1][1] if files else -1
    return out


def written_on(outdir: Path, held: dict[TopicPartition, int], zombie: ClusterWorker) -> bool:
    """Every partition the zombie held is claimed by another process, which committed a
    file past where the zombie stood."""
    for tp, end in held.items():
        d = partition_dir(str(outdir), tp)
        files = committed_files(str(outdir), tp)
        if read_claim(d).owner.startswith(f"pid {zombie.proc.pid} on ") or \
                not files or files[-1][1] <= end:
            return False
    return True


def ranges_ok(outdir: Path) -> dict[str, list[tuple[int, int]]]:
    """Per partition, the committed ranges: contiguous from 0, none overlapping."""
    out = {}
    for tp in PARTS:
        spans = [(s, e) for s, e, _ in committed_files(str(outdir), tp)]
        out[str(tp)] = spans
        expected = 0
        for s, e in spans:
            assert s == expected and e >= s, f"{tp}: ranges overlap or leave a gap: {spans}"
            expected = e + 1
    return out


def test_a_frozen_worker_thawed_after_its_partitions_moved_writes_nothing_more(kafka_broker,
                                                                               tmp_path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{
        "topic.creation.default.partitions": PARTITIONS})
    feeder: Feeder | None = None
    zombie: ClusterWorker | None = None
    stopped = False
    try:
        w1, w2, w3 = cluster.add(), cluster.add(), cluster.add()
        indir, outdir = tmp_path / "in", tmp_path / "out"
        indir.mkdir()
        w1.kctl("connector", "create", str(connector(tmp_path, SRC, {
            "connector.class": "FileSource", "path": str(indir), "format": "text",
            "topic": TOPIC, "batch.max.rows": 5000, "poll.interval.ms": 100,
            # every line to a random partition (not a burst to one, then to the next), so
            # each sink partition keeps receiving records
            "producer.override.sticky.partitioning.linger.ms": 0})))
        # big files, rotated by time: a sink task nearly always holds records of the last
        # 1.5 s, and a rotation is due the moment a frozen one runs again
        w2.kctl("connector", "create", str(connector(tmp_path, SINK, {
            "connector.class": "FileSink", "topics": TOPIC, "path": str(outdir),
            "format": "json", "delivery.guarantee": "exactly_once", "tasks.max": 3,
            "flush.size": 1_000_000, "rotate.interval.ms": 1500,
            "consumer.override.session.timeout.ms": 6000})))
        wait_until(lambda: cluster.running(SRC, 1) and cluster.running(SINK, 3),
                   timeout=120, message="pipeline running", on_timeout=cluster.logs)
        feeder = Feeder(indir)
        feeder.start()
        wait_until(lambda: len(committed_lines(outdir)) >= 3_000, timeout=120, interval=0.2,
                   message="some output before the freeze", on_timeout=cluster.logs)

        # the zombie: runs sink tasks and not the source task (a frozen source task's
        # lines could come twice, which an exactly-once sink then keeps, as it should);
        # not the leader, if another will do
        leader = cluster.generations()[-1]["leader"]
        candidates = [w for w in (w1, w2, w3)
                      if tasks_on(cluster, SINK, w) and not tasks_on(cluster, SRC, w)]
        assert candidates, cluster.placement(SINK)
        zombie = next((w for w in candidates if not leader.startswith(w.worker_id + "-")),
                      candidates[0])
        sink_tasks = tasks_on(cluster, SINK, zombie)
        wait_until(lambda: claimed_by(outdir, zombie), timeout=30,
                   message="the zombie's claims")
        os.kill(zombie.proc.pid, signal.SIGSTOP)
        stopped = True
        held = claimed_by(outdir, zombie)  # (no claim can change hands while it is frozen)
        frozen_at = time.monotonic()

        # the group gives its tasks to others; the new owners claim its partitions and
        # write past where it stood
        others = [w for w in (w1, w2, w3) if w is not zombie]
        wait_until(lambda: all(cluster.placement(SINK).get(t) in {w.worker_id for w in others}
                               for t in sink_tasks), timeout=120, interval=0.5,
                   message="the zombie's tasks run elsewhere", on_timeout=cluster.logs)
        wait_until(lambda: written_on(outdir, held, zombie), timeout=120, interval=0.5,
                   message="the new owners wrote on", on_timeout=cluster.logs)
        frozen_for = time.monotonic() - frozen_at

        thawed_ms = int(time.time() * 1000)
        os.kill(zombie.proc.pid, signal.SIGCONT)
        stopped = False

        # it tries to publish what it held, is fenced off, and says so (for each partition
        # it held records of)
        wait_until(lambda: FENCED.findall(zombie.log()), timeout=60, interval=0.5,
                   message="the zombie's fencing warning", on_timeout=cluster.logs)
        # it did not crash: it answers, and completes a generation of the group again
        assert zombie.proc.poll() is None
        wait_until(zombie.joined, timeout=60, message="the zombie answers /health")
        wait_until(lambda: any(g["member_id"].startswith(zombie.worker_id + "-")
                               and g["at_ms"] > thawed_ms
                               for g in cluster.generations()), timeout=120, interval=1,
                   message="the zombie rejoined the group", on_timeout=cluster.logs)

        # every line exactly once, in contiguous, non-overlapping ranges
        total = feeder.stop()
        want = collections.Counter(json.dumps(f"line {i}") for i in range(total))
        wait_until(lambda: collections.Counter(committed_lines(outdir)) >= want, timeout=240,
                   interval=1, message="every line in the output", on_timeout=cluster.logs)
        # Sentinel lines through the same path, written only now that every line is out:
        # in each partition they come after every line of the feed. Each partition's files
        # are published in offset order (a new owner that rereads writes from the committed
        # end on), so a duplicate of a line of the feed would be published before the file
        # that holds its partition's sentinel. Lines go to random partitions: 200 of them
        # reach each of the six.
        sentinels = {json.dumps(f"sentinel {i}") for i in range(200)}
        (indir / ".sentinels.tmp").write_text("".join(f"sentinel {i}\n" for i in range(200)))
        (indir / ".sentinels.tmp").rename(indir / "sentinels.txt")
        wait_until(lambda: all(sentinels & set(partition_lines(outdir, tp)) for tp in PARTS),
                   timeout=120, interval=0.5, message="a sentinel in every partition",
                   on_timeout=cluster.logs)
        got = collections.Counter(line for line in committed_lines(outdir)
                                  if line not in sentinels)
        assert got == want, {k: n for k, n in got.items() if n != 1 or k not in want}
        spans = ranges_ok(outdir)
        assert sum(e - s + 1 for v in spans.values() for s, e in v) == \
            total + sum(1 for line in committed_lines(outdir) if line in sentinels)
        assert zombie.proc.poll() is None
        fenced = FENCED.findall(zombie.log())
        assert set(fenced) <= {str(tp) for tp in held}
        assert len(fenced) == len(set(fenced)), "one warning per partition"
        print(f"\nzombie {zombie.name} held {sorted(map(str, held))} (tasks {sink_tasks}), "
              f"frozen {frozen_for:.1f} s; fenced: {fenced}; {total} lines")
    finally:
        if feeder is not None:
            feeder.stop()
        if stopped and zombie is not None and zombie.proc.poll() is None:
            os.kill(zombie.proc.pid, signal.SIGCONT)
        cluster.stop()
