"""Nothing listens beyond what was asked: with REST on a specific address (loopback or
not), Spark's driver binds to that address too and its UI (which Spark binds to every
interface) stays off, unless the spark.* settings say otherwise."""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.runtime.worker_config import WorkerConfig


def conf(tmp_path, **settings) -> dict[str, str]:
    return WorkerConfig({"state.dir": str(tmp_path), **settings}).spark_conf()


def test_spark_follows_a_loopback_rest_listener_unless_told_otherwise(tmp_path):
    local = conf(tmp_path, listeners="http://127.0.0.1:8083")
    assert (local["spark.driver.bindAddress"], local["spark.driver.host"],
            local["spark.ui.enabled"]) == ("127.0.0.1", "127.0.0.1", "false")
    everywhere = conf(tmp_path, listeners="http://0.0.0.0:8083")
    assert "spark.driver.bindAddress" not in everywhere and "spark.ui.enabled" not in everywhere
    asked = conf(tmp_path, listeners="http://127.0.0.1:8083", **{
        "spark.ui.enabled": "true", "spark.driver.bindAddress": "0.0.0.0"})
    assert (asked["spark.ui.enabled"], asked["spark.driver.bindAddress"]) == ("true", "0.0.0.0")
    # executors elsewhere must reach the driver: a remote cluster's driver is not bound
    remote = conf(tmp_path, listeners="http://127.0.0.1:8083",
                  **{"spark.master": "spark://spark-master.example:7077"})
    assert "spark.driver.bindAddress" not in remote


def test_spark_follows_a_specific_rest_address_that_is_not_loopback(tmp_path):
    one = conf(tmp_path, listeners="http://10.1.2.3:8083")
    assert (one["spark.driver.bindAddress"], one["spark.driver.host"],
            one["spark.ui.enabled"]) == ("10.1.2.3", "10.1.2.3", "false")
    # a routable address serves executors elsewhere too: the driver is bound all the same
    remote = conf(tmp_path, listeners="http://10.1.2.3:8083",
                  **{"spark.master": "spark://spark-master.example:7077"})
    assert (remote["spark.driver.bindAddress"], remote["spark.ui.enabled"]) == \
        ("10.1.2.3", "false")
    # any spark.ui.* setting says the user wants the UI: it is left to them
    wanted = conf(tmp_path, listeners="http://10.1.2.3:8083", **{"spark.ui.port": "4050"})
    assert "spark.ui.enabled" not in wanted
    assert wanted["spark.driver.bindAddress"] == "10.1.2.3"
    for wildcard in ("http://0.0.0.0:8083", "http://[::]:8083"):
        everywhere = conf(tmp_path, listeners=wildcard)
        assert not {"spark.driver.bindAddress", "spark.driver.host",
                    "spark.ui.enabled"} & set(everywhere), wildcard


def _listening(pid: int) -> list[str]:
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


# A fresh process: a SparkSession is one per process, and another test's (an xdist worker
# runs many) would be handed back instead of one built from these settings.
_ENGINE = """
import json, os, sys
from kctl.runtime.spark import SparkEngine
engine = SparkEngine(json.loads(sys.argv[1]))
engine.spark().range(3).count()
print(os.getpid(), flush=True)
sys.stdin.readline()  # the test looks at the sockets, then lets it stop
engine.stop()
"""


def _jvm_of(pid: int) -> int:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    java = [p for p in pids if "java" in Path(f"/proc/{p}/cmdline").read_text()]
    assert java, "no JVM child process"
    return java[-1]


def _routable_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


@pytest.mark.spark
@pytest.mark.parametrize("where", ["loopback", "routable"])
def test_a_workers_spark_listens_only_where_rest_does(tmp_path, where):
    host = "127.0.0.1" if where == "loopback" else _routable_address()
    if host is None:
        pytest.skip("this machine has no address beyond loopback")
    settings = conf(tmp_path, listeners=f"http://{host}:8083",
                    **{"spark.master": "local[1]", "spark.driver.memory": "512m"})
    proc = subprocess.Popen([sys.executable, "-c", _ENGINE, json.dumps(settings)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        pid = int(proc.stdout.readline())
        addresses = _listening(_jvm_of(pid))
        proc.stdin.write("done\n")
        proc.stdin.flush()
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert addresses, "the JVM listens on nothing?"
    for address in addresses:
        bound = re.sub(r"^\[?(.*?)\]?:\d+$", r"\1", address).split("%")[0]
        assert bound != "*", addresses
        bound = bound.removeprefix("::ffff:")
        # loopback: the driver's own (Py4J's gateway binds there whatever the settings)
        assert bound == host or ipaddress.ip_address(bound).is_loopback, addresses
