"""`spark.master: sc://...` works: FileSource parses through a real Spark Connect server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url():
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_NO_DAEMONIZE": "1"}
    proc = subprocess.Popen(
        [f"{home}/sbin/start-connect-server.sh", "--master", "local[1]",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.driver.memory=1g", "--conf", "spark.ui.enabled=false"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("Spark Connect server did not start")
            time.sleep(0.3)
    yield f"sc://127.0.0.1:{port}"
    os.killpg(proc.pid, 9)
    proc.wait(10)


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
