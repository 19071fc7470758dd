"""`spark.master: sc://...` works: FileSource parses through a real Spark Connect server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.spark_servers import connect_server

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    with connect_server(str(tmp_path_factory.mktemp("spark-connect"))) as url:
        yield url


# A worker process holds one SparkSession; pyspark refuses a remote session in a process
# that already runs a classic one (as this test process does), so the task runs in its own
# process, as it would in a worker configured with `spark.master: sc://...`.
_SCRIPT = """
import json, sys
from file_support import OffsetStore
from test_file_source import drain, start_task, values
from kctl.runtime.spark import SparkEngine

engine = SparkEngine({"spark.master": sys.argv[1]})
task = start_task(engine, OffsetStore(), path=sys.argv[2], format="json",
                  schema="id BIGINT, name STRING")
print(json.dumps({"kind": engine.kind, "values": values(drain(task))}))
task.stop()
engine.stop()
"""


def test_file_source_parses_json_through_spark_connect(connect_url, tmp_path: Path):
    rows = [{"id": i, "name": f"n{i}"} for i in range(20)]
    (tmp_path / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, connect_url, str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"kind": "connect", "values": rows}
