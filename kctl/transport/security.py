"""Kafka's TLS and SASL settings, read once and handed to whichever client needs them.

Users write Kafka's (Java client's) names: `security.protocol`, `ssl.truststore.location`,
`ssl.keystore.location` / `.type` / `.password`, `ssl.key.password`,
`ssl.keystore.certificate.chain` + `ssl.keystore.key` (PEM text), `ssl.truststore.certificates`,
`ssl.endpoint.identification.algorithm`, `sasl.mechanism`, `sasl.jaas.config`. Three kinds
of client honour them, each in its own dialect:

- librdkafka (confluent-kafka: producers, consumers, admin) - `librdkafka_config`;
- kafka-python's network client (the group drivers) - `kafka_python_config`;
- Python's `ssl` (the REST server, inter-worker requests) - `TlsMaterial.server_context` /
  `client_context`.

What a client cannot honour (a Java keystore, a login module it does not speak) is a
ConfigError naming the setting, never a silent plaintext connection.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.errors import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Java client names that librdkafka does not know: translated here, never passed on
JAVA_ONLY = ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
             "ssl.truststore.certificates", "ssl.keystore.type", "ssl.keystore.certificate.chain",
             "ssl.keystore.key", "sasl.jaas.config", "ssl.protocol", "ssl.enabled.protocols",
             "ssl.client.auth", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm")
_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$",
                   re.S)
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')
LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256",
                                                                 "SCRAM-SHA-512"),
}


def parse_jaas(value: str, key: str) -> tuple[str, dict[str, str]]:
    """`Module required k="v" ...;` -> (module, options); ConfigError naming `key`."""
    m = _JAAS.match(str(value))
    if not m:
        raise ConfigError(f"Invalid value for {key}: expected a JAAS login module entry such "
                          "as org.apache.kafka.common.security.plain.PlainLoginModule "
                          'required username="..." password="...";', key=key)
    options = {o.group(1): (o.group(2).replace('\\"', '"') if o.group(2) is not None
                            else o.group(3)) for o in _JAAS_OPTION.finditer(m.group(3))}
    return m.group(1), options


def sasl_credentials(conf: Mapping[str, Any], prefix: str = "") -> tuple[str, str, str] | None:
    """(mechanism, username, password) from Kafka's `sasl.mechanism` + `sasl.jaas.config`
    (or librdkafka's `sasl.username`/`sasl.password`); None when the protocol has no SASL."""
    protocol = str(conf.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"Invalid value {conf.get('security.protocol')!r} for "
                          f"{prefix}security.protocol: expected one of {', '.join(PROTOCOLS)}",
                          key=f"{prefix}security.protocol")
    if not protocol.startswith("SASL"):
        return None
    mechanism = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"Invalid value {mechanism!r} for {prefix}sasl.mechanism: kctl's "
                          f"Kafka clients speak {', '.join(MECHANISMS)}",
                          key=f"{prefix}sasl.mechanism")
    user, password = conf.get("sasl.username"), conf.get("sasl.password")
    jaas = conf.get("sasl.jaas.config")
    if jaas:
        key = f"{prefix}sasl.jaas.config"
        module, options = parse_jaas(str(jaas), key)
        if module not in LOGIN_MODULES:
            raise ConfigError(f"{key}: login module {module} is not supported; use "
                              f"{' or '.join(LOGIN_MODULES)}", key=key)
        if mechanism not in LOGIN_MODULES[module]:
            raise ConfigError(f"{key}: {module.rsplit('.', 1)[1]} does not serve "
                              f"sasl.mechanism={mechanism}", key=key)
        user, password = options.get("username"), options.get("password")
    if not user or password is None:
        raise ConfigError(f"security.protocol={protocol} needs credentials: set "
                          f"{prefix}sasl.jaas.config (username and password)",
                          key=f"{prefix}sasl.jaas.config")
    return mechanism, str(user), str(password)


# -- certificates and keys ------------------------------------------------------------------
def _read(path: str, key: str) -> bytes:
    try:
        return Path(os.path.expanduser(path)).read_bytes()
    except OSError as e:
        raise ConfigError(f"Invalid value {path!r} for {key}: cannot read it: "
                          f"{e.strerror or e}", key=key) from e


def _store_type(conf: Mapping[str, Any], which: str, prefix: str) -> str:
    explicit = conf.get(f"ssl.{which}.type")
    location = str(conf.get(f"ssl.{which}.location") or "")
    if explicit:
        kind = str(explicit).upper()
    elif location.lower().endswith((".p12", ".pfx", ".pkcs12")):
        kind = "PKCS12"
    elif location.lower().endswith(".jks"):
        kind = "JKS"
    else:
        kind = "PEM"
    if kind not in ("PEM", "PKCS12"):
        raise ConfigError(
            f"Invalid value {kind!r} for {prefix}ssl.{which}.type: kctl reads PEM and PKCS12 "
            "stores, not Java keystores (convert one with keytool -importkeystore "
            "-deststoretype PKCS12)", key=f"{prefix}ssl.{which}.type")
    return kind


def _pkcs12(data: bytes, password: Any, key: str) -> tuple[bytes, bytes | None, list[bytes]]:
    """(certificate chain PEM, key PEM or None, CA certificates PEM) from a PKCS12 store."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    from cryptography.hazmat.primitives.serialization.pkcs12 import load_key_and_certificates

    try:
        pkey, cert, extra = load_key_and_certificates(
            data, str(password).encode() if password else None)
    except ValueError as e:
        raise ConfigError(f"{key}: cannot open the PKCS12 store (wrong password?): {e}",
                          key=key) from e
    chain = (cert.public_bytes(Encoding.PEM) if cert else b"") + \
        b"".join(c.public_bytes(Encoding.PEM) for c in extra)
    key_pem = pkey.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) \
        if pkey else None
    return chain, key_pem, [c.public_bytes(Encoding.PEM) for c in extra]


@dataclass(frozen=True)
class TlsMaterial:
    """What a TLS endpoint presents and trusts, as PEM text (from files, inline PEM or a
    PKCS12 store): `chain`+`key` (its own certificate, optional for a client), `cafile` /
    `cadata` (whom it trusts; None: the system's roots)."""

    chain: bytes | None = None
    key: bytes | None = None
    key_password: str | None = None
    cafile: str | None = None
    cadata: str | None = None
    check_hostname: bool = True
    client_auth: str = "none"  # none | requested | required (servers)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any], prefix: str = "") -> TlsMaterial:
        """Kafka's `ssl.*` names (without `prefix`, which only goes into messages)."""
        chain = key = None
        key_password = conf.get("ssl.key.password")
        if conf.get("ssl.keystore.certificate.chain") or conf.get("ssl.keystore.key"):
            chain = str(conf.get("ssl.keystore.certificate.chain") or "").encode()
            key = str(conf.get("ssl.keystore.key") or "").encode()
            if not chain or not key:
                raise ConfigError(f"{prefix}ssl.keystore.certificate.chain and "
                                  f"{prefix}ssl.keystore.key go together",
                                  key=f"{prefix}ssl.keystore.key")
        elif conf.get("ssl.keystore.location"):
            where = f"{prefix}ssl.keystore.location"
            kind = _store_type(conf, "keystore", prefix)  # a JKS is refused before it is read
            data = _read(str(conf["ssl.keystore.location"]), where)
            if kind == "PKCS12":
                chain, key, _ = _pkcs12(data, conf.get("ssl.keystore.password"), where)
                key_password = None
            else:
                chain = key = data  # one PEM file with the key and its certificate chain
        cafile = cadata = None
        if conf.get("ssl.truststore.certificates"):
            cadata = str(conf["ssl.truststore.certificates"])
        elif conf.get("ssl.truststore.location"):
            where = f"{prefix}ssl.truststore.location"
            if _store_type(conf, "truststore", prefix) == "PKCS12":
                _, _, cas = _pkcs12(_read(str(conf["ssl.truststore.location"]), where),
                                    conf.get("ssl.truststore.password"), where)
                cadata = b"".join(cas).decode()
            else:
                _read(str(conf["ssl.truststore.location"]), where)  # readable now, not later
                cafile = os.path.expanduser(str(conf["ssl.truststore.location"]))
        algorithm = conf.get("ssl.endpoint.identification.algorithm")
        client_auth = str(conf.get("ssl.client.auth") or "none").lower()
        if client_auth not in ("none", "requested", "required"):
            raise ConfigError(f"Invalid value {client_auth!r} for {prefix}ssl.client.auth: "
                              "expected none, requested or required",
                              key=f"{prefix}ssl.client.auth")
        return cls(chain, key, str(key_password) if key_password else None, cafile, cadata,
                   check_hostname=algorithm is None or str(algorithm).lower() == "https",
                   client_auth=client_auth)

    def _load_chain(self, ctx: ssl.SSLContext, what: str) -> None:
        """`load_cert_chain` reads files only: PEM goes through a private temporary file
        that is removed at once."""
        assert self.chain is not None and self.key is not None
        with tempfile.TemporaryDirectory(prefix="kctl-tls-") as d:
            os.chmod(d, 0o700)
            cert, key = Path(d) / "chain.pem", Path(d) / "key.pem"
            cert.write_bytes(self.chain)
            key.write_bytes(self.key)
            try:
                ctx.load_cert_chain(cert, key, self.key_password)
            except (ssl.SSLError, OSError) as e:
                raise ConfigError(f"{what}: cannot use its certificate and key: {e}") from e

    def _trust(self, ctx: ssl.SSLContext, what: str) -> None:
        try:
            if self.cafile or self.cadata:
                ctx.load_verify_locations(cafile=self.cafile, cadata=self.cadata)
            else:
                ctx.load_default_certs()
        except (ssl.SSLError, OSError) as e:
            raise ConfigError(f"{what}: cannot load the trusted certificates: {e}") from e

    def server_context(self, what: str = "listeners") -> ssl.SSLContext:
        if self.chain is None:
            raise ConfigError(f"{what}: an https listener needs a certificate and key: set "
                              "listeners.https.ssl.keystore.location (a PEM file with the key "
                              "and certificate chain, or a PKCS12 store), or "
                              "ssl.keystore.certificate.chain and ssl.keystore.key",
                              key="listeners.https.ssl.keystore.location")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_chain(ctx, what)
        if self.client_auth != "none":
            ctx.verify_mode = ssl.CERT_REQUIRED if self.client_auth == "required" \
                else ssl.CERT_OPTIONAL
            self._trust(ctx, what)
        return ctx

    def client_context(self, what: str = "client") -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        self._trust(ctx, what)
        if self.chain is not None:
            self._load_chain(ctx, what)
        return ctx


# -- Kafka clients ----------------------------------------------------------------------------
def librdkafka_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A client config with Kafka's Java names made librdkafka's (same names pass as they
    are). ConfigError names the setting librdkafka cannot honour."""
    out = {k: v for k, v in conf.items() if k not in JAVA_ONLY}
    protocol = str(conf.get("security.protocol") or "PLAINTEXT").upper()
    if "security.protocol" in conf:
        out["security.protocol"] = protocol
    creds = sasl_credentials(conf)
    if creds is not None:
        out["sasl.mechanisms"] = creds[0]
        out["sasl.username"], out["sasl.password"] = creds[1], creds[2]
        out.pop("sasl.mechanism", None)
    if not protocol.endswith("SSL"):
        return out
    if conf.get("ssl.truststore.certificates"):
        out["ssl.ca.pem"] = str(conf["ssl.truststore.certificates"])
    elif conf.get("ssl.truststore.location"):
        if _store_type(conf, "truststore", "") == "PKCS12":
            _, _, cas = _pkcs12(_read(str(conf["ssl.truststore.location"]),
                                      "ssl.truststore.location"),
                                conf.get("ssl.truststore.password"), "ssl.truststore.location")
            out["ssl.ca.pem"] = b"".join(cas).decode()
        else:
            out["ssl.ca.location"] = os.path.expanduser(str(conf["ssl.truststore.location"]))
    if conf.get("ssl.keystore.certificate.chain") or conf.get("ssl.keystore.key"):
        out["ssl.certificate.pem"] = str(conf.get("ssl.keystore.certificate.chain") or "")
        out["ssl.key.pem"] = str(conf.get("ssl.keystore.key") or "")
    elif conf.get("ssl.keystore.location") and _store_type(conf, "keystore", "") == "PEM":
        path = os.path.expanduser(str(out.pop("ssl.keystore.location")))
        out.pop("ssl.keystore.password", None)
        out["ssl.certificate.location"] = out["ssl.key.location"] = path
    if "ssl.endpoint.identification.algorithm" in conf:
        algorithm = str(conf["ssl.endpoint.identification.algorithm"] or "").lower()
        out["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" \
            else "none"
    return out


def kafka_python_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python's client keyword arguments for the security settings in `conf`."""
    protocol = str(conf.get("security.protocol") or "PLAINTEXT").upper()
    out: dict[str, Any] = {"security_protocol": protocol}
    creds = sasl_credentials(conf)
    if creds is not None:
        out.update(sasl_mechanism=creds[0], sasl_plain_username=creds[1],
                   sasl_plain_password=creds[2])
    if protocol.endswith("SSL"):
        java = dict(conf)
        # librdkafka's own names, when a user wrote those
        if conf.get("ssl.ca.location") and not conf.get("ssl.truststore.location"):
            java["ssl.truststore.location"], java["ssl.truststore.type"] = \
                conf["ssl.ca.location"], "PEM"
        if conf.get("ssl.certificate.location") and not conf.get("ssl.keystore.location"):
            java["ssl.keystore.certificate.chain"] = _read(
                str(conf["ssl.certificate.location"]), "ssl.certificate.location").decode()
            java["ssl.keystore.key"] = _read(str(conf.get("ssl.key.location") or ""),
                                             "ssl.key.location").decode()
        if conf.get("ssl.endpoint.identification.algorithm") == "none":
            java["ssl.endpoint.identification.algorithm"] = ""
        tls = TlsMaterial.from_config(java)
        out["ssl_context"] = tls.client_context("Kafka client")
        out["ssl_check_hostname"] = tls.check_hostname
    return out


def security_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a worker config that secure its Kafka connections (worker-level)."""
    return {k: v for k, v in values.items()
            if k == "security.protocol" or k.startswith(("ssl.", "sasl."))}
