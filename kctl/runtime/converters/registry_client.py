"""How a converter reaches a Schema Registry: its own worker's, in process, or any
Confluent-compatible one over HTTP through confluent-kafka's SchemaRegistryClient."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from kctl.errors import ConnectError, DataError, RequestTargetError, RetriableError


class RegistryClient(Protocol):
    def register(self, subject: str, schema: str, schema_type: str) -> int: ...

    def schema(self, schema_id: int) -> tuple[str, str]:
        """(schema text, schema type) of an id."""
        ...

    def latest(self, subject: str) -> tuple[int, str]:
        """(id, schema text) of a subject's latest version."""
        ...

    def lookup(self, subject: str, schema: str, schema_type: str) -> int: ...

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        """(name, schema text) of each schema an id references, each one's own references
        before it (a Protobuf file's imports, an Avro schema's named types)."""
        ...


def _transitive(top: list[tuple[str, str, int]],
                version: Any) -> list[tuple[str, str]]:
    """References resolved depth first: `version(subject, number)` gives (text, its own
    references as (name, subject, number))."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, int]] = set()

    def visit(name: str, subject: str, number: int) -> None:
        if (subject, number) in seen:
            return
        seen.add((subject, number))
        text, inner = version(subject, number)
        for ref in inner:
            visit(*ref)
        out.append((name, text))

    for ref in top:
        visit(*ref)
    return out


class HttpRegistryClient:
    """confluent-kafka's client, with Confluent's `schema.registry.*` settings."""

    def __init__(self, urls: list[str], settings: Mapping[str, Any]):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf: dict[str, Any] = {"url": ",".join(urls)}
        source = str(settings.get("basic.auth.credentials.source", "") or "").upper()
        user_info = settings.get("basic.auth.user.info") or \
            settings.get("schema.registry.basic.auth.user.info")
        if user_info and source in ("", "USER_INFO"):
            conf["basic.auth.user.info"] = str(user_info)
        ca = settings.get("schema.registry.ssl.truststore.location") or \
            settings.get("schema.registry.ssl.ca.location")
        if ca:
            conf["ssl.ca.location"] = str(ca)
        cert = settings.get("schema.registry.ssl.keystore.location") or \
            settings.get("schema.registry.ssl.certificate.location")
        if cert:
            conf["ssl.certificate.location"] = str(cert)
            key = settings.get("schema.registry.ssl.key.location") or cert
            conf["ssl.key.location"] = str(key)
        self.urls = urls
        self._client = SchemaRegistryClient(conf)

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return fn(*args)
        except SchemaRegistryError as e:
            if e.http_status_code in (404, 409, 422) or 40000 <= e.error_code < 50000:
                raise DataError(f"schema registry at {', '.join(self.urls)}: {what}: "
                                f"{e.error_message} (error code {e.error_code})") from e
            raise RetriableError(f"schema registry at {', '.join(self.urls)}: {what}: "
                                 f"{e.error_message}") from e
        except Exception as e:  # connection refused, TLS, timeouts
            raise RetriableError(f"cannot reach the schema registry at {', '.join(self.urls)} "
                                 f"(schema.registry.url): {what}: {e}") from e

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        from confluent_kafka.schema_registry import Schema as SrSchema

        return int(self._call(f"register {subject}", self._client.register_schema, subject,
                              SrSchema(schema, schema_type)))

    def schema(self, schema_id: int) -> tuple[str, str]:
        found = self._call(f"schema id {schema_id}", self._client.get_schema, schema_id)
        return found.schema_str, found.schema_type or "AVRO"

    def latest(self, subject: str) -> tuple[int, str]:
        found = self._call(f"latest version of {subject}", self._client.get_latest_version,
                           subject)
        return int(found.schema_id), found.schema.schema_str

    def lookup(self, subject: str, schema: str, schema_type: str) -> int:
        from confluent_kafka.schema_registry import Schema as SrSchema

        found = self._call(f"look up in {subject}", self._client.lookup_schema, subject,
                           SrSchema(schema, schema_type))
        return int(found.schema_id)

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        def refs(schema: Any) -> list[tuple[str, str, int]]:
            return [(r.name, r.subject, int(r.version)) for r in schema.references or ()]

        def version(subject: str, number: int) -> tuple[str, list[tuple[str, str, int]]]:
            found = self._call(f"version {number} of {subject}", self._client.get_version,
                               subject, number)
            return found.schema.schema_str, refs(found.schema)

        top = self._call(f"schema id {schema_id}", self._client.get_schema, schema_id)
        return _transitive(refs(top), version)


class LocalRegistryClient:
    """The worker's own registry, called in process; a write a follower cannot make is
    sent to the leader's registry over HTTP, as a REST client's would be forwarded."""

    def __init__(self, registry: Any, settings: Mapping[str, Any] | None = None):
        self._registry = registry
        self._settings = dict(settings or {})
        self._leaders: dict[str, HttpRegistryClient] = {}
        self._lock = threading.Lock()

    def _translate(self, what: str, e: Exception) -> Exception:
        from kctl.runtime.registry import RegistryError

        if isinstance(e, RegistryError):
            if e.status >= 500:
                return RetriableError(f"the worker's schema registry: {what}: {e}")
            return DataError(f"the worker's schema registry: {what}: {e} "
                             f"(error code {e.error_code})")
        return ConnectError(f"the worker's schema registry: {what}: {e}")

    def _leader(self, url: str) -> HttpRegistryClient:
        with self._lock:
            client = self._leaders.get(url)
            if client is None:
                client = HttpRegistryClient([url.rstrip("/") + "/schema-registry"], self._settings)
                self._leaders[url] = client
            return client

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        try:
            return int(self._registry.register(subject, schema, schema_type).id)
        except RequestTargetError as e:
            return self._leader(e.forward_url).register(subject, schema, schema_type)
        except Exception as e:
            raise self._translate(f"register {subject}", e) from e

    def schema(self, schema_id: int) -> tuple[str, str]:
        try:
            found = self._registry.by_id(schema_id)
        except Exception as e:
            raise self._translate(f"schema id {schema_id}", e) from e
        return found.schema, found.schema_type

    def latest(self, subject: str) -> tuple[int, str]:
        try:
            found = self._registry.version(subject, "latest")
        except Exception as e:
            raise self._translate(f"latest version of {subject}", e) from e
        return found.id, found.schema

    def lookup(self, subject: str, schema: str, schema_type: str) -> int:
        try:
            return int(self._registry.lookup(subject, schema, schema_type).id)
        except Exception as e:
            raise self._translate(f"look up in {subject}", e) from e

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        def refs(sv: Any) -> list[tuple[str, str, int]]:
            return [(r.name, r.subject, r.version) for r in sv.references]

        def version(subject: str, number: int) -> tuple[str, list[tuple[str, str, int]]]:
            found = self._registry.version(subject, number)
            return found.schema, refs(found)

        try:
            return _transitive(refs(self._registry.by_id(schema_id)), version)
        except Exception as e:
            raise self._translate(f"references of schema id {schema_id}", e) from e
