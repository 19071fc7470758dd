"""Real Spark services for the tests that check `spark.master: spark://...` and `sc://...`:
a standalone master with one worker, and a Spark Connect server, each in its own process
group on free loopback ports, killed when the test module is done."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from support.broker import free_port, listens


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _start(cmd: Callable[[int], list[str]], what: str, log_path: str | None = None,
           attempts: int = 3) -> tuple[subprocess.Popen, int]:
    """Start `cmd(port)` on a free port, on a fresh one again when another process took it
    first (a connect alone would reach that process)."""
    for _ in range(attempts):
        port = free_port()
        proc = _launch(cmd(port), port, what, log_path)
        if proc is not None:
            return proc, port
    pytest.fail(f"{what}: {attempts} ports were taken by other processes")


def _launch(cmd: list[str], port: int, what: str, log_path: str | None) -> subprocess.Popen | None:
    env = {**os.environ, "SPARK_HOME": spark_home(), "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOCAL_IP": "127.0.0.1"}
    out = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _kill(proc)
                pytest.fail(f"{what} did not start (see {log_path})")
            time.sleep(0.3)
            continue
        if _group_listens(proc.pid, port) is False:
            _kill(proc)
            return None
        return proc


def _group_listens(pgid: int, port: int) -> bool | None:
    """Whether a process of group `pgid` (the server and the JVM it started) listens on
    `port`; None when /proc cannot tell."""
    answers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
        except OSError:
            continue
        answers.append(listens(int(pid), port))
        if answers[-1]:
            return True
    return None if None in answers or not answers else False


def _kill(proc: subprocess.Popen) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@contextmanager
def standalone_cluster(log_dir: str) -> Iterator[str]:
    """A master and one worker (2 cores, 2 GB): `spark://127.0.0.1:PORT`."""
    home = spark_home()
    ui = free_port()  # (Spark moves a web UI to the next port when its own is taken)
    master, port = _start(lambda port: [
        f"{home}/bin/spark-class", "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
        "Spark master", f"{log_dir}/master.log")
    url = f"spark://127.0.0.1:{port}"
    worker, _ = _start(lambda worker_ui: [
        f"{home}/bin/spark-class", "org.apache.spark.deploy.worker.Worker", url,
        "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
        "--webui-port", str(worker_ui)], "Spark worker", f"{log_dir}/worker.log")
    try:
        yield url
    finally:
        _kill(worker)
        _kill(master)


@contextmanager
def connect_server(log_dir: str) -> Iterator[str]:
    """A Spark Connect server on local[1]: `sc://127.0.0.1:PORT`."""
    home = spark_home()
    proc, port = _start(lambda port: [
        f"{home}/sbin/start-connect-server.sh", "--master", "local[1]",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.driver.memory=1g", "--conf", "spark.ui.enabled=false"],
        "Spark Connect server", f"{log_dir}/connect.log")
    try:
        yield f"sc://127.0.0.1:{port}"
    finally:
        _kill(proc)
