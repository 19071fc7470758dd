"""The main job, end to end on the embedded defaults.

Generates 100k lines in three files (text, csv, json lines), starts a standalone worker with
three FileSource connectors and one exactly-once FileSink, drives it through the `kctl`
CLI like a user would, waits until every line has arrived, and prints statuses and counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINES = 100_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(indir: Path, lines: int) -> dict[str, int]:
    """Three files with about a third of the lines each; returns lines per format."""
    per = {"text": lines // 3, "csv": lines // 3, "json": lines - 2 * (lines // 3)}
    (indir / "text").mkdir(parents=True)
    (indir / "csv").mkdir()
    (indir / "json").mkdir()
    with open(indir / "text" / "events.txt", "w") as f:
        for i in range(per["text"]):
            f.write(f"event {i} happened\n")
    with open(indir / "csv" / "orders.csv", "w") as f:
        f.write("id,customer,amount\n")
        for i in range(per["csv"]):
            f.write(f"{i},customer-{i % 97},{i * 0.25:.2f}\n")
    with open(indir / "json" / "clicks.jsonl", "w") as f:
        for i in range(per["json"]):
            f.write(json.dumps({"id": i, "page": f"/p/{i % 13}", "ms": i % 1000}) + "\n")
    return per


def kctl(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", url, *args],
                          text=True, capture_output=True, check=check)


def committed_output_files(outdir: Path) -> list[Path]:
    """The sink's committed files only: `<topic>/partition=<p>/<topic>+<p>+<start>+<end>.json`.

    Spark writes each file in a hidden `.tmp-*` directory first (with `part-*.json` and
    `_temporary` inside) and renames it into place, so anything else is work in progress.
    """
    from kctl.api import TopicPartition
    from kctl.connectors.file.sink import committed_files

    files = []
    for topic_dir in sorted(outdir.iterdir()) if outdir.is_dir() else []:
        if not topic_dir.is_dir() or topic_dir.name.startswith((".", "_")):
            continue
        for partition_dir in sorted(topic_dir.glob("partition=*")):
            partition = partition_dir.name.removeprefix("partition=")
            if partition.isdigit():
                tp = TopicPartition(topic_dir.name, int(partition))
                files.extend(Path(path) for *_, path in committed_files(str(outdir), tp))
    return files


def count_output_lines(outdir: Path) -> int:
    n = 0
    for p in committed_output_files(outdir):
        with open(p, "rb") as f:
            n += sum(1 for _ in f)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", help="working directory (default: a new temporary one)")
    ap.add_argument("--lines", type=int, default=LINES)
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="kctl-quickstart-"))
    if work.exists() and any(work.iterdir()):
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    indir, outdir = work / "in", work / "out"
    per = generate(indir, args.lines)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (work / "worker.yaml").write_text(
        f"state.dir: {work / 'state'}\nlisteners: {url}\noffset.flush.interval.ms: 2000\n"
        "spark:\n  master: local[2]\n  driver.memory: 1g\n")
    files = []
    for fmt, topic in (("text", "events"), ("csv", "orders"), ("json", "clicks")):
        f = work / f"source-{fmt}.yaml"
        f.write_text(f"name: {fmt}-source\nconnector.class: FileSource\npath: {indir / fmt}\n"
                     f"format: {fmt}\ntopic: {topic}\nbatch.max.rows: 50000\n")
        files.append(str(f))
    sink = work / "sink.yaml"
    sink.write_text(f"name: file-sink\nconnector.class: FileSink\ntopics: events,orders,clicks\n"
                    f"path: {outdir}\nformat: json\ndelivery.guarantee: exactly_once\n"
                    "flush.size: 50000\nrotate.interval.ms: 1000\n")
    print(f"working directory: {work}")
    print(f"$ kctl worker start {work / 'worker.yaml'} source-*.yaml sink.yaml")
    log = open(work / "worker.log", "w")  # noqa: SIM115 - lives as long as the worker
    worker = subprocess.Popen([sys.executable, "-m", "kctl.cli.main", "worker", "start",
                               str(work / "worker.yaml"), *files],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while kctl(url, "connector", "list", check=False).returncode != 0:
            if worker.poll() is not None or time.monotonic() > deadline:
                print((work / "worker.log").read_text()[-3000:])
                return 1
            time.sleep(0.5)
        r = kctl(url, "connector", "create", str(sink), "--wait")
        print(f"$ kctl connector create {sink.name} --wait\n{r.stdout}{r.stderr}")
        total = sum(per.values())
        t0 = time.monotonic()
        while (n := count_output_lines(outdir)) < total:
            if time.monotonic() - t0 > 300 or worker.poll() is not None:
                print(f"only {n} of {total} lines arrived; worker log:")
                print((work / "worker.log").read_text()[-3000:])
                return 1
            time.sleep(1)
        elapsed = time.monotonic() - t0
        print("$ kctl connector list\n" + kctl(url, "connector", "list").stdout)
        for name in ("text-source", "csv-source", "json-source", "file-sink"):
            print(f"$ kctl connector status {name}\n" + kctl(url, "connector", "status", name).stdout)
        out = count_output_lines(outdir)
        print(f"{total} lines in ({per}), {out} lines out in "
              f"{outdir}, {elapsed:.1f}s after the sink was created")
        if out != total:  # exactly-once: a duplicate is as wrong as a loss
            print(f"error: {out - total} line(s) more out than in", file=sys.stderr)
            return 1
        return 0
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
