"""Dirty files through a worker, on the embedded log and on a real broker.

One json-lines file and one csv file, every tenth line malformed, flow file -> topic ->
file through a worker process driven with the CLI. With `errors.tolerance=all` every good
line arrives and every bad line is in the connector's dead letter queue, exactly as it was
read, with the error headers; the source offsets move past all of them. With `none` the
task is FAILED naming the file and line, and its offset stops before the bad line. A sink
whose first puts fail with a retriable error is retried with backoff and loses nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.files import committed_lines
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.connectors.file.tracking import file_id

pytestmark = [pytest.mark.slow, pytest.mark.spark]  # its workers run FileSource on Spark

LINES = 500
BAD_EVERY = 10  # lines i with i % 10 == 7 are malformed: 10%


@dataclass
class Data:
    json_file: Path
    csv_file: Path
    good: list[dict]  # per format, the same good values
    bad_json: dict[int, str]  # file line number -> raw line
    bad_csv: dict[int, str]


def write_dirty_files(indir: Path) -> Data:
    (indir / "json").mkdir(parents=True)
    (indir / "csv").mkdir()
    jf, cf = indir / "json" / "people.jsonl", indir / "csv" / "people.csv"
    good, bad_json, bad_csv = [], {}, {}
    with open(jf, "w") as j, open(cf, "w") as c:
        c.write("id,name\n")
        for i in range(LINES):
            if i % BAD_EVERY == 7:
                bad_json[i + 1] = line = f'{{"id": {i}, "name": '  # cut short
                j.write(line + "\n")
                bad_csv[i + 2] = line = f"id-{i},n{i}"  # not a number; line 1 is the header
                c.write(line + "\n")
            else:
                good.append({"id": i, "name": f"n{i}"})
                j.write(json.dumps(good[-1]) + "\n")
                c.write(f"{i},n{i}\n")
    return Data(jf, cf, good, bad_json, bad_csv)


def yaml(target: Path, **settings: object) -> Path:
    target.write_text("".join(f"{k}: {json.dumps(v) if isinstance(v, str) else v}\n"
                            for k, v in settings.items()))
    return target


def read_json_lines(paths: list[Path]) -> list[dict]:
    out = []
    for p in paths:
        out.extend(json.loads(line) for line in p.read_text().splitlines())
    return out


def sink_output(outdir: Path) -> list[dict]:
    return [json.loads(line) for line in committed_lines(outdir)]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics: (sample name, sorted labels) -> value."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def task_metric(samples: dict, name: str, connector: str) -> float:
    return samples.get((f"kafka_connect_{name}", (("connector", connector), ("task", "0"))), 0)


def test_malformed_lines_are_dead_lettered_or_fail_the_task(
        tmp_path, transport_settings, request):
    data = write_dirty_files(tmp_path / "in")
    p = f"dirty-{request.node.callspec.id}-"  # the broker is shared by the session
    w = Worker(tmp_path)
    yaml(tmp_path / "worker.yaml", **{
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 300, "spark.master": "local[1]",
        "spark.driver.memory": "1g", **transport_settings})
    source = {"connector.class": "FileSource", "batch.max.rows": 120,
              "poll.interval.ms": 200, "schema": "id BIGINT, name STRING"}
    tolerant = {"errors.tolerance": "all", "errors.log.enable": "true",
                "errors.deadletterqueue.context.headers.enable": "true",
                "errors.deadletterqueue.topic.replication.factor": 1}
    files = [
        yaml(tmp_path / "json-all.yaml", name="json-all", **source, path=str(data.json_file),
             format="json", topic=p + "json", **tolerant,
             **{"errors.deadletterqueue.topic.name": p + "json-dlq"}),
        yaml(tmp_path / "csv-all.yaml", name="csv-all", **source, path=str(data.csv_file),
             format="csv", topic=p + "csv", **tolerant,
             **{"errors.deadletterqueue.topic.name": p + "csv-dlq"}),
        yaml(tmp_path / "json-none.yaml", name="json-none", **source,
             path=str(data.json_file), format="json", topic=p + "json-none"),
        yaml(tmp_path / "sink.yaml", name="sink", **{"connector.class": "FileSink"},
             topics=f"{p}json,{p}csv", path=str(tmp_path / "out"), format="json",
             **{"flush.size": 100, "rotate.interval.ms": 300}),
        yaml(tmp_path / "retry-sink.yaml", name="retry-sink",
             **{"connector.class": "support.sinks.JsonLinesSinkConnector",
                "fail.first.puts": 3}, topics=f"{p}json,{p}csv",
             path=str(tmp_path / "retry.jsonl")),
    ]
    w.start()
    try:
        for f in files:
            w.kctl("connector", "create", str(f))
        history = [scrape(w.url)]  # metrics as the pipeline runs

        # tolerance all: every good line of both files arrives, through both sinks
        want = sorted(data.good * 2, key=json.dumps)
        wait_until(lambda: history.append(scrape(w.url)) or
                   len(sink_output(tmp_path / "out")) >= len(want), timeout=180,
                   interval=0.5, message="every good line in the FileSink output")
        assert sorted(sink_output(tmp_path / "out"), key=json.dumps) == want
        retry_file = tmp_path / "retry.jsonl"
        wait_until(lambda: retry_file.exists() and
                   len(retry_file.read_text().splitlines()) >= len(want), timeout=60,
                   message="every good line through the sink that failed its first puts")
        assert sorted(read_json_lines([retry_file]), key=json.dumps) == want
        assert (tmp_path / "worker.log").read_text().count(
            "Retriable put failure in retry-sink-0") == 3

        # ... and every bad line is in the DLQ, as read, with the error headers
        for name, bad, file, fmt in (("json-all", data.bad_json, data.json_file, "json"),
                                     ("csv-all", data.bad_csv, data.csv_file, "csv")):
            rejected = json.loads(w.kctl("dlq", "show", name, "--limit", "1000",
                                         "-o", "json").stdout)
            assert len(rejected) == len(bad) == LINES // BAD_EVERY
            by_line = {}
            for r in rejected:
                h = r["headers"]
                line = json.loads(h["__connect.errors.source.offset"])["line"]
                by_line[line] = r
                assert r["stage"] == "TASK_POLL" and r["value"] == bad[line]
                assert r["exception"] == "kctl.errors.DataError"
                assert f"Malformed {fmt} line {line} in {file}" in r["message"]
                assert h["__connect.errors.connector.name"] == name
                assert h["__connect.errors.task.id"] == "0"
                assert h["__connect.errors.topic"] == p + name.split("-")[0]
                assert h["__connect.errors.class.name"].endswith("FileSourceTask")
                assert "DataError" in h["__connect.errors.exception.stacktrace"]
                assert json.loads(h["__connect.errors.source.partition"]) == \
                    {"file": file_id(os.stat(file))}
                assert json.loads(h["__connect.errors.source.offset"])["path"] == str(file)
            assert sorted(by_line) == sorted(bad)
            table = w.kctl("dlq", "show", name).stdout
            assert f"{len(bad)} rejected record(s)" in table and "TASK_POLL" in table

        # the source offsets moved past every line, bad ones included
        def committed_line(name: str) -> int | None:
            offsets = w.offsets(name)
            lines = [o["offset"]["line"] for o in offsets if "file" in o["partition"]]
            return lines[0] if lines else None

        wait_until(lambda: committed_line("json-all") == LINES, timeout=30,
                   message="json-all offset at the last line")
        wait_until(lambda: committed_line("csv-all") == LINES + 1, timeout=30,
                   message="csv-all offset at the last line")

        # tolerance none: FAILED naming the file and the first bad line; the offset stops
        # just before it, so a restart meets it again
        first_bad = min(data.bad_json)
        st = wait_until(lambda: (s := w.status("json-none"))["tasks"] and
                        s["tasks"][0]["state"] == "FAILED" and s, timeout=60,
                        message="json-none FAILED")
        trace = st["tasks"][0]["trace"]
        assert f"Malformed json line {first_bad} in {data.json_file}" in trace, trace
        assert "Tolerance exceeded" in trace and "TASK_POLL" in trace
        assert committed_line("json-none") == first_bad - 1
        for name in ("json-all", "csv-all", "sink", "retry-sink"):
            assert [t["state"] for t in w.status(name)["tasks"]] == ["RUNNING"], name

        # /metrics: Kafka Connect's names per connector and task; the counters rose as the
        # pipeline ran and end at what went through
        history.append(scrape(w.url))
        good, bad = len(data.good), LINES // BAD_EVERY
        read = [task_metric(h, "sink_task_metrics_sink_record_read_total", "sink")
                for h in history]
        assert read == sorted(read) and read[-1] == 2 * good > read[0], read
        final = history[-1]
        for name in ("json-all", "csv-all"):
            assert task_metric(final, "source_task_metrics_source_record_poll_total", name) \
                == good
            assert task_metric(final, "source_task_metrics_source_record_write_total", name) \
                == good
            assert task_metric(final, "task_error_metrics_total_records_skipped_total",
                               name) == bad
            # a malformed line is not retriable: one error, one failed attempt, no retry
            assert task_metric(final, "task_error_metrics_total_record_errors_total",
                               name) == bad
            assert task_metric(final, "task_error_metrics_total_record_failures_total",
                               name) == bad
            assert task_metric(final, "task_error_metrics_total_retries_total", name) == 0
            assert task_metric(final, "task_error_metrics_deadletterqueue_produce_requests_total",
                               name) == bad
            assert task_metric(final, "connector_task_metrics_batch_total", name) >= 1
        assert task_metric(final, "sink_task_metrics_sink_record_send_total", "sink") == 2 * good
        assert task_metric(final, "connector_task_metrics_offset_commit_completion_total",
                           "sink") >= 1
        assert final[("kafka_connect_connector_task_metrics_status", (
            ("connector", "json-none"), ("status", "failed"), ("task", "0")))] == 1
        assert final[("kafka_connect_connector_metrics_status", (
            ("connector", "sink"), ("status", "running")))] == 1
        assert final[("kafka_connect_connect_worker_metrics_task_count", ())] == 5
    finally:
        w.stop()
