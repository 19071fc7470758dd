"""`kctl dlq show` on a large dead letter queue: client time and memory against the REST call.

Fills a connector's DLQ topic with N dead-lettered records (the headers a sink writes with
`errors.deadletterqueue.context.headers.enable`, a stack trace, a 1 KiB payload), then
times `kctl dlq show NAME --limit N` in a fresh process for each output format, and the
raw baseline in the same run: the REST endpoint's answer read whole with httpx. Peak RSS is
the CLI process's. The output is checked: every record once, parseable.

    python benchmarks/bench_dlq_show.py [--records 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig
from kctl.transport.base import ProducerRecord, TopicSpec

TRACE = "".join(f'  File "/app/module{i}.py", line {i}, in step{i}\n    do_step({i})\n'
                for i in range(12))


def fill(worker: StandaloneWorker, topic: str, dlq: str, n: int) -> None:
    worker.transport.admin().create_topics([TopicSpec(dlq, 1)])
    producer = worker.transport.producer()
    payload = json.dumps({"id": 0, "text": "x" * 1000}).encode()
    for i in range(n):
        headers = (
            ("__connect.errors.topic", topic.encode()),
            ("__connect.errors.partition", b"0"),
            ("__connect.errors.offset", str(i).encode()),
            ("__connect.errors.connector.name", b"dlq-bench"),
            ("__connect.errors.task.id", b"0"),
            ("__connect.errors.stage", b"VALUE_CONVERTER"),
            ("__connect.errors.class.name", b"kctl.runtime.converters.JsonConverter"),
            ("__connect.errors.exception.class.name", b"kctl.errors.DataError"),
            ("__connect.errors.exception.message", f"bad record {i}\x1b[31m".encode()),
            ("__connect.errors.exception.stacktrace",
             f"Traceback (most recent call last):\n{TRACE}DataError: bad record {i}".encode()),
        )
        producer.send(ProducerRecord(dlq, payload, None, 0, headers))
    producer.flush(60)
    producer.close()


# The CLI as its console script runs it, reporting its own peak RSS (VmHWM, which exec
# resets; ru_maxrss would keep this process's from before the fork) on stderr at exit.
PROBE = (
    "import atexit, sys\n"
    "def hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('RSS', line.split()[1], file=sys.stderr)\n"
    "atexit.register(hwm)\n"
    "sys.argv = ['kctl', *sys.argv[1:]]\n"
    "from kctl.cli.main import main\n"
    "main()\n")


def run_cli(url: str, args: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) of the CLI process, its stdout."""
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", PROBE, "--url", url, *args],
                       capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if r.returncode != 0:
        sys.exit(f"kctl {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    rss = int(r.stderr.rsplit("RSS", 1)[1].split()[0])
    return wall, rss, r.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="a small run (500 records)")
    args = parser.parse_args()
    n = 500 if args.quick and args.records == 10_000 else args.records
    with tempfile.TemporaryDirectory() as tmp:
        worker = StandaloneWorker(WorkerConfig({"state.dir": str(Path(tmp) / "state"),
                                                "listeners": "http://127.0.0.1:0"}))
        worker.start()
        try:
            worker.herder.create_connector("dlq-bench", {
                "connector.class": "FileSink", "topics": "in", "path": str(Path(tmp) / "out"),
                "format": "json", "errors.tolerance": "all",
                "errors.deadletterqueue.topic.name": "dlq-bench-dlq"}, )
            fill(worker, "in", "dlq-bench-dlq", n)
            url = worker.rest.url
            started = time.perf_counter()
            raw = httpx.get(f"{url}/connectors/dlq-bench/dlq", params={"limit": n},
                            timeout=300)
            rest_s = time.perf_counter() - started
            assert len(raw.json()["records"]) == n
            print(f"kctl dlq show, {n:,} records ({len(raw.content) / 1e6:.1f} MB from REST)")
            print(f"  raw: GET /connectors/NAME/dlq read whole with httpx   {rest_s:6.2f} s")
            # a CLI process that only starts (python + imports): the floor of any command
            floor, floor_rss, _ = run_cli(url, ["--help"])
            print(f"  floor: `kctl --help` (interpreter start, imports)      {floor:6.2f} s"
                  f"   peak RSS {floor_rss / 1024:6.0f} MiB")
            for fmt in ("json", "yaml", "table"):
                wall, rss, out = run_cli(url, ["dlq", "show", "dlq-bench", "--limit", str(n),
                                               "-o", fmt])
                if fmt == "json":
                    assert len(json.loads(out)) == n
                elif fmt == "yaml":
                    assert len(yaml.safe_load(out)) == n
                else:
                    assert f"{n} rejected record(s)" in out and "\x1b" not in out
                client = wall - rest_s - floor
                print(f"  kctl dlq show -o {fmt:5}                               "
                      f"{wall:6.2f} s   peak RSS {rss / 1024:6.0f} MiB   client time beyond "
                      f"REST and start-up {max(client, 0):5.2f} s")
        finally:
            worker.stop()


if __name__ == "__main__":
    main()
