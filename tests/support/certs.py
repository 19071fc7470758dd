"""Certificates made on the spot for TLS tests (the `cryptography` package): a CA, server
and client certificates it signs, and the bad ones (expired, signed by another CA)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8, enc)


class CA:
    def __init__(self, name: str = "kctl test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - dt.timedelta(days=1))
                     .not_valid_after(now + dt.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(True, False, False, False, False, True, True,
                                                  False, False), True)
                     .sign(self.key, hashes.SHA256()))

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, cn: str = "localhost", *, client: bool = False,
              expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        start, end = ((now - dt.timedelta(days=10), now - dt.timedelta(days=1)) if expired
                      else (now - dt.timedelta(days=1), now + dt.timedelta(days=30)))
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.IPAddress(ip_address("127.0.0.1"))]), False)
                .add_extension(x509.ExtendedKeyUsage([usage]), False)
                .sign(self.key, hashes.SHA256()))
        return Issued(cert, key)


@dataclass
class TlsFiles:
    """PEM files in a directory: `ca` (trust), `server` (key + chain in one file, Kafka's
    PEM keystore), `server_cert`/`server_key` (apart, as Tansu takes them), `client`, and the
    bad ones: `expired` (server), `other_ca` and `stranger` (a server cert of another CA)."""

    dir: Path
    ca: Path
    server: Path
    server_cert: Path
    server_key: Path
    client: Path
    expired: Path
    other_ca: Path
    stranger: Path
    server_p12: Path


def write_tls_files(directory: Path, p12_password: str = "store-pass") -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = CA(), CA("another CA")
    server, client = ca.issue(), ca.issue("kctl-client", client=True)
    expired, stranger = ca.issue(expired=True), other.issue()

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    p12 = pkcs12.serialize_key_and_certificates(
        b"server", server.key, server.cert, [ca.cert],
        serialization.BestAvailableEncryption(p12_password.encode()))
    return TlsFiles(
        directory, write("ca.pem", ca.pem),
        write("server.pem", server.key_pem() + server.cert_pem + ca.pem),
        write("server.crt", server.cert_pem + ca.pem), write("server.key", server.key_pem()),
        write("client.pem", client.key_pem() + client.cert_pem),
        write("expired.pem", expired.key_pem() + expired.cert_pem),
        write("other-ca.pem", other.pem),
        write("stranger.pem", stranger.key_pem() + stranger.cert_pem),
        write("server.p12", p12))
