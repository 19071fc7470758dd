"""The worker's configuration: Kafka Connect's key names, from YAML or .properties.

Unknown or invalid keys stop the worker before it starts, with the key, the file and the
expected form in the message: a half-configured worker is worse than none.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import javaproperties
import yaml

from kctl.api.config import AbstractConfig, ConfigDef, ConfigType, Importance, Range, ValidString
from kctl.errors import ConfigError, ValidationError
from kctl.runtime.class_data import MODES as CLASS_DATA_MODES

# Worker keys read by name outside this module.
BOOTSTRAP_SERVERS_CONFIG = "bootstrap.servers"
EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG = "exactly.once.source.support"
REVOCATION_REJOIN_DELAY_CONFIG = "revocation.rejoin.delay.ms"
FETCH_MAX_WAIT_CONFIG = "fetch.max.wait.ms"

DEFAULT_STATE_DIR = os.environ.get("KCTL_STATE_DIR", str(Path.home() / ".kctl" / "state"))

# Keys under these prefixes pass through to the component that owns them.
PASS_THROUGH_PREFIXES = (
    "spark.", "producer.", "consumer.", "admin.",
    "key.converter.", "value.converter.", "header.converter.", "config.providers.",
    # Kafka's security settings: ssl.*/sasl.* secure the worker's Kafka clients (and the
    # REST listener, unless listeners.https.ssl.* are given), checked when read
    "ssl.", "sasl.", "listeners.https.",
)
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension." \
    "BasicAuthSecurityRestExtension"
REST_EXTENSIONS = {BASIC_AUTH_EXTENSION: "basic", "BasicAuthSecurityRestExtension": "basic",
                   "basic": "basic"}
OVERRIDE_POLICIES = {"None": "None", "Principal": "Principal", "All": "All",
                     "org.apache.kafka.connect.connector.policy."
                     "NoneConnectorClientConfigOverridePolicy": "None",
                     "org.apache.kafka.connect.connector.policy."
                     "PrincipalConnectorClientConfigOverridePolicy": "Principal",
                     "org.apache.kafka.connect.connector.policy."
                     "AllConnectorClientConfigOverridePolicy": "All"}

WORKER_CONFIG = (
    ConfigDef()
    .define(BOOTSTRAP_SERVERS_CONFIG, ConfigType.LIST, [], None, Importance.HIGH,
            "Kafka brokers (host:port,...). Empty: the embedded durable log under state.dir.",
            group="Common")
    .define(FETCH_MAX_WAIT_CONFIG, ConfigType.INT, 500, Range.at_least(0), Importance.LOW,
            "How long a fetch may wait at the broker for records before it is answered "
            "empty, for every consumer the worker opens: its config, status and offset "
            "topics, sink tasks and topic reads (consumer.* and consumer.override.* "
            "replace it for tasks). 500, Kafka's default: Kafka answers a waiting fetch as "
            "soon as records arrive, so a longer wait costs no latency, only fewer requests. "
            "A Kafka-compatible broker that answers only when the wait is over adds about "
            "half of it to every read that waited; lower it there.", group="Common")
    .define("group.id", ConfigType.STRING, None, None, Importance.HIGH,
            "Worker group for distributed mode (not used by a standalone worker).",
            group="Common")
    .define("state.dir", ConfigType.STRING, DEFAULT_STATE_DIR, None, Importance.HIGH,
            "One directory for all embedded state: the log, offsets, configs and statuses. "
            "On a Kafka cluster it keeps the member ids the worker's group members held "
            "(group-members.json), which they join with again after a restart; give each "
            "worker its own.",
            group="Common")
    .define("listeners", ConfigType.LIST, ["http://127.0.0.1:8083"], None, Importance.HIGH,
            "Where the REST API listens: http://HOST:PORT or https://HOST:PORT (the first one "
            "given). Port 0 picks a free port. https takes its certificate and key from "
            "listeners.https.ssl.* (else ssl.*): ssl.keystore.location (a PEM file with the "
            "key and certificate chain, or a PKCS12 store with ssl.keystore.type=PKCS12 and "
            "ssl.keystore.password), or ssl.keystore.certificate.chain + ssl.keystore.key "
            "(PEM text); ssl.key.password for an encrypted key; ssl.client.auth "
            "(none, requested, required) with ssl.truststore.location to ask for client "
            "certificates. Workers of a cluster verify each other with the same truststore.",
            group="REST")
    .define("security.protocol", ConfigType.STRING, "PLAINTEXT",
            ValidString.in_("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), Importance.MEDIUM,
            "How the worker's Kafka clients connect (stores, group membership, admin, and the "
            "defaults of task clients). With SSL: ssl.truststore.location (PEM or PKCS12) or "
            "ssl.truststore.certificates, and for client certificates ssl.keystore.* as for "
            "listeners. With SASL: sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and "
            "sasl.jaas.config (PlainLoginModule or ScramLoginModule with username and "
            "password). Task clients take producer./consumer. settings over these; admin "
            "clients take admin. settings over these.", group="Security")
    .define("rest.extension.classes", ConfigType.LIST, [], None, Importance.MEDIUM,
            "REST extensions: Kafka's org.apache.kafka.connect.rest.basic.auth.extension."
            "BasicAuthSecurityRestExtension (or basic) asks every request for HTTP Basic "
            "credentials found in rest.basic.auth.credentials.file, except the internal, "
            "signed requests between workers.", group="Security")
    .define("rest.basic.auth.credentials.file", ConfigType.STRING, None, None,
            Importance.MEDIUM,
            "The users and passwords of the Basic auth extension: a properties file of "
            "user=password lines (the file Kafka's PropertyFileLoginModule reads), or a JAAS "
            "file whose KafkaConnect entry names it (PropertyFileLoginModule required "
            "file=\"...\";). Read at start.", group="Security")
    .define("rest.basic.auth.user.info", ConfigType.PASSWORD, None, None, Importance.LOW,
            "USER:PASSWORD this worker sends when it forwards a request to another worker of "
            "its cluster on its own behalf (a user's forwarded request keeps the user's "
            "credentials). Default: the first user of the credentials file.",
            group="Security")
    .define("connector.client.config.override.policy", ConfigType.STRING, "All",
            ValidString.in_(*OVERRIDE_POLICIES), Importance.MEDIUM,
            "Which producer.override.*, consumer.override.* and admin.override.* settings "
            "a connector may give: All, None, or Principal (security.protocol, "
            "sasl.mechanism and sasl.jaas.config only); Kafka's class names are accepted.",
            group="Security")
    .define("file.connector.allowed.paths", ConfigType.LIST, [], None, Importance.MEDIUM,
            "Absolute directories FileSource may read and FileSink may write under. Empty: "
            "anywhere the worker's user may. A path outside them (after resolving `..` and "
            "symlinks) makes the connector config invalid; files a source finds through a "
            "symlink that leads outside are skipped, and a FileSink task whose topic or "
            "partition directory is a symlink leading outside fails, naming it.",
            group="Security")
    .define("worker.id", ConfigType.STRING, None, None, Importance.LOW,
            "Worker id shown in statuses; default host:port of the REST listener.",
            group="Common")
    .define("offset.flush.interval.ms", ConfigType.LONG, 10000, Range.at_least(0),
            Importance.LOW, "How often source offsets and sink consumer offsets are committed.",
            group="Offsets")
    .define("offset.flush.timeout.ms", ConfigType.LONG, 5000, Range.at_least(0),
            Importance.LOW, "How long a commit may wait for outstanding records.",
            group="Offsets")
    .define("task.shutdown.graceful.timeout.ms", ConfigType.LONG, 5000, Range.at_least(0),
            Importance.LOW, "How long stopping waits for a task, or a connector, before "
            "abandoning its thread.", group="Tasks")
    .define("plugin.path", ConfigType.LIST, [], None, Importance.LOW,
            "Directories with Python modules that define connectors or transforms.",
            group="Plugins")
    .define("key.converter", ConfigType.STRING, "JsonConverter", None, Importance.LOW,
            "Converter for record keys (JsonConverter, StringConverter, ByteArrayConverter or a "
            "dotted path). Its own keys use the key.converter. prefix.", group="Converters")
    .define("value.converter", ConfigType.STRING, "JsonConverter", None, Importance.LOW,
            "Converter for record values.", group="Converters")
    .define("spark.master", ConfigType.STRING, "local[*]", None, Importance.MEDIUM,
            "Spark master: local[N], spark://host:port or sc://host:port (Spark Connect). "
            "Every other spark.* key is passed to Spark.", group="Spark")
    .define("spark.start", ConfigType.STRING, "eager", ValidString.in_("eager", "lazy"),
            Importance.LOW,
            "eager: kctl worker start builds the SparkSession in the background as soon as the "
            "worker is up and warms it with a few small jobs, so the first connector's records "
            "do not wait for the JVM; lazy: when the first task asks for it. Unset, the "
            "environment's KCTL_SPARK_START decides (else eager).", group="Spark")
    .define("spark.class.data.sharing", ConfigType.STRING, "enabled",
            ValidString.in_(*CLASS_DATA_MODES), Importance.LOW,
            "enabled: the first local Spark JVM of a machine records the classes it loads into "
            "an archive in kctl's cache directory (KCTL_CACHE_DIR, else ~/.cache/kctl) when "
            "it stops, and later JVMs of the same Java and Spark map it, which about halves "
            "their start; disabled: neither.", group="Spark")
    .define("topic.creation.default.partitions", ConfigType.INT, 1, Range.at_least(1),
            Importance.LOW, "Partitions of topics created when missing.", group="Topics")
    .define("topic.creation.default.replication.factor", ConfigType.SHORT, 1,
            Range.at_least(-1), Importance.LOW,
            "Replication factor of topics created when missing (-1: broker default).",
            group="Topics")
    .define("log.fsync", ConfigType.BOOLEAN, False, None, Importance.LOW,
            "fsync the embedded log before acknowledging (survives power loss, not only kill -9).",
            group="Common")
    .define(EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG, ConfigType.STRING, "enabled",
            ValidString.in_("enabled", "disabled"), Importance.MEDIUM,
            "enabled: source records carry their source position, and a restarted task resumes "
            "after what the log really holds, so a crash never duplicates source records. "
            "Standalone workers only: a distributed worker cannot fence a stalled (zombie) "
            "worker's producers yet, so there sources are at-least-once (Kafka Connect's "
            "default) and setting it to enabled is refused.",
            group="Exactly once")
    .define("connect.protocol", ConfigType.STRING, "sessioned",
            ValidString.in_("eager", "default", "compatible", "sessioned"), Importance.LOW,
            "Rebalance protocol for distributed workers.", group="Distributed")
    .define("scheduled.rebalance.max.delay.ms", ConfigType.INT, 300000, Range.at_least(0),
            Importance.LOW, "How long lost work waits for its worker to return (distributed).",
            group="Distributed")
    .define(REVOCATION_REJOIN_DELAY_CONFIG, ConfigType.INT, 0, Range.at_least(0),
            Importance.LOW,
            "How long a worker that revoked work in a rebalance waits before it rejoins "
            "(distributed). 0, Kafka's behaviour: at once. A group coordinator that answers "
            "waiting SyncGroups only periodically can miss the revoking workers' rejoin "
            "while the others' assignments are still on their way, so the join takes three "
            "or four generations instead of two; a delay a little longer than that period "
            "keeps it to two.", group="Distributed")
    .define("session.timeout.ms", ConfigType.INT, 10000, Range.at_least(1), Importance.HIGH,
            "A worker that sends no heartbeat for this long is dropped from the group and its "
            "work reassigned (distributed).", group="Distributed")
    .define("heartbeat.interval.ms", ConfigType.INT, 3000, Range.at_least(1), Importance.HIGH,
            "How often a worker heartbeats to the group coordinator (distributed).",
            group="Distributed")
    .define("rebalance.timeout.ms", ConfigType.INT, 60000, Range.at_least(1), Importance.HIGH,
            "How long the coordinator waits for every worker to rejoin in a rebalance "
            "(distributed).", group="Distributed")
    .define("worker.sync.timeout.ms", ConfigType.INT, 3000, Range.at_least(1), Importance.MEDIUM,
            "How long a worker waits to catch up with the config topic before it gives up "
            "leadership or rejoins (distributed).", group="Distributed")
    .define("config.storage.topic", ConfigType.STRING, None, None, Importance.HIGH,
            "Compacted topic with connector configs, task configs and target states "
            "(distributed; one partition).", group="Distributed")
    .define("config.storage.replication.factor", ConfigType.SHORT, 3, Range.at_least(-1),
            Importance.LOW, "Replication factor of the config topic when kctl creates it.",
            group="Distributed")
    .define("offset.storage.topic", ConfigType.STRING, None, None, Importance.HIGH,
            "Compacted topic with source offsets (distributed).", group="Distributed")
    .define("offset.storage.partitions", ConfigType.INT, 25, Range.at_least(1), Importance.LOW,
            "Partitions of the offset topic when kctl creates it.", group="Distributed")
    .define("offset.storage.replication.factor", ConfigType.SHORT, 3, Range.at_least(-1),
            Importance.LOW, "Replication factor of the offset topic when kctl creates it.",
            group="Distributed")
    .define("status.storage.topic", ConfigType.STRING, None, None, Importance.HIGH,
            "Compacted topic with connector and task statuses (distributed).",
            group="Distributed")
    .define("status.storage.partitions", ConfigType.INT, 5, Range.at_least(1), Importance.LOW,
            "Partitions of the status topic when kctl creates it.", group="Distributed")
    .define("status.storage.replication.factor", ConfigType.SHORT, 3, Range.at_least(-1),
            Importance.LOW, "Replication factor of the status topic when kctl creates it.",
            group="Distributed")
    .define("rest.advertised.host.name", ConfigType.STRING, None, None, Importance.LOW,
            "Host name other workers use to reach this one (default: the listener's host).",
            group="REST")
    .define("rest.advertised.port", ConfigType.INT, None, None, Importance.LOW,
            "Port other workers use to reach this one (default: the listener's port).",
            group="REST")
    .define("rest.advertised.listener", ConfigType.STRING, None,
            ValidString.in_("http", "https"), Importance.LOW,
            "Scheme other workers use to reach this one (default: the listener's).",
            group="REST")
    .define("config.providers", ConfigType.LIST, [], None, Importance.LOW,
            "Names of the config providers whose placeholders (${name:path:key}) connector "
            "and worker configs may use, e.g. file,env,dir; each needs "
            "config.providers.<name>.class (file, env, dir, Kafka's class names or a dotted "
            "Python path) and takes config.providers.<name>.param.* (allowed.paths for file "
            "and dir, allowlist.pattern for env).", group="Config providers")
    .define("inter.worker.key.ttl.ms", ConfigType.INT, 3600000, Range.at_least(1),
            Importance.LOW, "How long a session key signs internal requests before the "
            "leader rotates it (connect.protocol=sessioned).", group="Distributed")
    .define("schema.registry.enable", ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
            "Serve a Confluent-compatible Schema Registry at <listener>/schema-registry, stored "
            "in schema.registry.topic of the worker's log; converters without "
            "schema.registry.url use it. In a cluster the leader assigns ids.",
            group="Schema registry")
    .define("schema.registry.topic", ConfigType.STRING, "_schemas", None, Importance.LOW,
            "Compacted topic holding the registry's schemas, configs and modes, with "
            "Confluent's keys and values (so Confluent's registry could take it over).",
            group="Schema registry")
    .define("schema.registry.topic.replication.factor", ConfigType.SHORT, -1,
            Range.at_least(-1), Importance.LOW,
            "Replication factor of schema.registry.topic when kctl creates it (-1: the "
            "broker's default).", group="Schema registry")
)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """YAML may nest (`spark: {master: ...}`); Kafka names are dotted."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and not key.endswith(".override"):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties as java.util.Properties reads them (javaproperties): `=`, `:` or
    white space between key and value, # and ! comments, \\ continuations and escapes."""
    props: dict[str, str] = javaproperties.loads(text)
    return props


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given at line {seen[key]})",
                    key_node.start_mark)
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """YAML (so JSON too) where a duplicate key is an error naming the key and its line."""
    return yaml.load(text, Loader=StrictLoader)


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """PyYAML's message on one line (it spans several, with a caret drawing), plus where."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        what = " ".join(filter(None, [error.problem, f"({error.context})" if error.context
                                      else None])) or "syntax error"
        return f"{what} at line {mark.line + 1}, column {mark.column + 1}" if mark else what
    return " ".join(str(error).split())


def read_text_file(path: str | Path, what: str) -> str:
    """A file's text, or a ConfigError naming it: missing, unreadable or not UTF-8."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {what} {p}: {e.strerror or e}", source=str(p)) from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"cannot read {what} {p}: not UTF-8 text (byte {e.start})",
                          source=str(p)) from e


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read YAML, JSON or .properties into a flat dict of dotted keys."""
    p = Path(path)
    text = read_text_file(p, "config file")
    if p.suffix in (".properties", ".conf"):
        return parse_properties(text)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {describe_yaml_error(e)}", source=str(p)) from e
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: expected a mapping of config keys, got {type(data).__name__}",
                          source=str(p))
    return _flatten(data)


class WorkerConfig(AbstractConfig):
    """The worker's settings. Values may use the worker's own config providers (as Kafka
    resolves worker configs in AbstractConfig): they are resolved here, before anything
    reads them, and a placeholder that cannot be resolved is a problem of its key like any
    other invalid value. `config_transformer` resolves connector configs later."""

    def __init__(self, props: Mapping[str, Any], source: str = "<worker config>"):
        self.source = source
        known = set(WORKER_CONFIG.names())
        problems: dict[str, list[str]] = {}
        props, self.config_transformer = _resolve_providers(props, problems)
        for key in props:
            if key not in known and not key.startswith(PASS_THROUGH_PREFIXES):
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems[key] = [
                    f"unknown worker config key {key!r}{hint}; expected one of the keys in "
                    f"docs/configuration.md or a {', '.join(PASS_THROUGH_PREFIXES)} "
                    "pass-through key"]
        unresolved = set(problems)  # already reported: not again as an invalid value
        known_props = {k: v for k, v in props.items() if k in known}
        checked = WORKER_CONFIG.validate({k: v for k, v in known_props.items()
                                          if k not in unresolved})
        problems.update({cv.name: list(cv.errors) for cv in checked if cv.errors})
        values = {cv.name: cv.value for cv in checked if not cv.errors}
        for key, message in _check_values(values, props):
            problems.setdefault(key, []).append(message)
        if problems:
            # every problem at once: fixing a file one error per start is tedious
            lines = [m for msgs in problems.values() for m in msgs]
            message = (f"{source}: {lines[0]}" if len(lines) == 1 else
                       f"{source}: {len(lines)} problems:\n" + "\n".join(f"  - {m}" for m in lines))
            err = ValidationError(message, problems)
            err.key, err.source = next(iter(problems)), source
            raise err
        super().__init__(WORKER_CONFIG, known_props)
        self.originals = dict(props)  # pass-through keys (spark.*, producer.*, ...) included

    @classmethod
    def from_file(cls, path: str | Path | None) -> WorkerConfig:
        if path is None:
            return cls({}, "<embedded defaults>")
        return cls(load_config_file(path), str(path))

    @property
    def embedded(self) -> bool:
        return not self.get_list(BOOTSTRAP_SERVERS_CONFIG)

    @property
    def state_dir(self) -> Path:
        return Path(os.path.expanduser(self.get_str("state.dir")))

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        return {k[len(prefix):]: v for k, v in self.originals.items() if k.startswith(prefix)}

    def spark_conf(self) -> dict[str, str]:
        """spark.* settings; unless they say otherwise, when REST listens on one address
        Spark's driver binds there too and its UI (which Spark binds to every interface)
        is off, so a worker listens nowhere beyond what was asked. REST on every
        interface (0.0.0.0, ::) leaves Spark's defaults."""
        conf = {k: str(v) for k, v in self.originals.items() if k.startswith("spark.")}
        conf["spark.master"] = self.get_str("spark.master")
        host, _ = self.listener()
        if _wildcard(host):
            return conf
        master = conf["spark.master"].strip()
        master_host = master.split("://", 1)[1].split(":")[0].split("/")[0] \
            if "://" in master else "localhost"
        # executors of a cluster elsewhere must reach the driver: a loopback address
        # binds only a local one
        if not _loopback(host) or _loopback(master_host):
            conf.setdefault("spark.driver.bindAddress", host)
            conf.setdefault("spark.driver.host", host)
        if not any(k.startswith("spark.ui.") for k in conf):
            conf["spark.ui.enabled"] = "false"
        return conf

    def listener(self) -> tuple[str, int]:
        return parse_listener(self.get_list("listeners")[0], self.source)

    @property
    def listener_scheme(self) -> str:
        return self.get_list("listeners")[0].split("://", 1)[0].lower()

    def rest_tls(self) -> Any:
        """The REST listener's TLS material (Kafka's listeners.https.ssl.*, else ssl.*);
        also what this worker trusts and presents when it calls another worker."""
        from kctl.transport.security import TlsMaterial

        scoped = self.with_prefix("listeners.https.")
        prefix = "listeners.https." if scoped else ""
        conf = scoped or {k: v for k, v in self.originals.items() if k.startswith("ssl.")}
        return TlsMaterial.from_config(conf, prefix)

    def rest_client_options(self) -> dict[str, Any]:
        """httpx options for this worker's calls to other workers of its cluster: verify
        https against the listener's truststore (presenting this worker's certificate when
        it has one), and its own Basic credentials when the cluster asks for them."""
        out: dict[str, Any] = {}
        if self.listener_scheme == "https" or self.get("rest.advertised.listener") == "https":
            out["verify"] = self.rest_tls().client_context("inter-worker requests")
        if self.rest_auth == "basic":
            info = self.get("rest.basic.auth.user.info")
            if info is not None:
                user, _, password = info.value().partition(":")
            else:
                user, password = next(iter(load_credentials(
                    self.get_str("rest.basic.auth.credentials.file")).items()))
            out["auth"] = (user, password)
        return out

    def kafka_security(self) -> dict[str, Any]:
        """security.protocol, ssl.* and sasl.* of the worker's own Kafka clients."""
        from kctl.transport.security import security_settings

        return security_settings(self.originals)

    @property
    def override_policy(self) -> str:
        return OVERRIDE_POLICIES[self.get_str("connector.client.config.override.policy")]

    @property
    def rest_auth(self) -> str | None:
        """The REST authentication asked for by rest.extension.classes (None: none)."""
        for name in self.get_list("rest.extension.classes"):
            return REST_EXTENSIONS[name]
        return None

    def worker_id(self, port: int) -> str:
        wid = self.get("worker.id")
        if wid:
            return wid
        return self.advertised(port).split("://", 1)[1]

    @property
    def exactly_once_source(self) -> bool:
        """Standalone workers only (see the setting's doc): never on a distributed one."""
        return not self.distributed and \
            self.get_str(EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG) == "enabled"

    @property
    def distributed(self) -> bool:
        """`group.id` with `bootstrap.servers`: a worker of a cluster (Kafka's
        connect-distributed), not a standalone worker."""
        return bool(self.get("group.id")) and not self.embedded

    def advertised(self, port: int) -> str:
        """The URL other workers reach this one at (Kafka's rest.advertised.*)."""
        host, _ = self.listener()
        if host in ("0.0.0.0", "", "::"):
            host = socket.gethostname()
        host = self.get("rest.advertised.host.name") or host
        port = self.get("rest.advertised.port") or port
        scheme = self.get("rest.advertised.listener") or self.listener_scheme
        return f"{scheme}://{host}:{port}"


_JAAS_FILE = re.compile(r'PropertyFileLoginModule\s+required\b[^;]*?\bfile\s*=\s*"([^"]+)"', re.S)


def load_credentials(path: str) -> dict[str, str]:
    """user -> password from a credentials properties file or a JAAS file naming one."""
    text = read_text_file(path, "REST credentials file")
    if "{" in text and "LoginModule" in text:  # a JAAS file: follow its file= option
        m = _JAAS_FILE.search(text)
        if not m:
            raise ConfigError(f"{path}: a JAAS file, but no PropertyFileLoginModule entry with "
                              'file="..." in it', key="rest.basic.auth.credentials.file")
        target = Path(m.group(1))
        if not target.is_absolute():
            target = Path(path).parent / target
        text = read_text_file(target, "REST credentials file")
    users = {k: v for k, v in parse_properties(text).items() if k}
    if not users:
        raise ConfigError(f"{path}: no user=password lines", key="rest.basic.auth.credentials.file")
    return users


_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?")


def _resolve_providers(props: Mapping[str, Any], problems: dict[str, list[str]]
                       ) -> tuple[dict[str, Any], Any]:
    """The worker's providers and its props with their placeholders resolved; what cannot be
    resolved is added to `problems` (the message names the placeholder, not a value)."""
    from kctl.runtime.config_providers import (
        PROVIDER_PREFIX,
        ConfigTransformer,
        has_placeholder,
        providers_from_config,
    )
    from kctl.runtime.secrets import register_secrets

    try:
        providers = providers_from_config(props)
    except ConfigError as e:
        problems.setdefault(e.key or "config.providers", []).append(str(e))
        providers = {}
    transformer = ConfigTransformer(providers)
    out = dict(props)
    for key, value in props.items():
        if key.startswith(PROVIDER_PREFIX) or not has_placeholder(value):
            continue
        try:
            out[key] = transformer.transform({key: value}, what="worker config").data[key]
        except ConfigError as e:
            problems.setdefault(key, []).append(str(e))
    # the worker's secrets (a client's sasl.jaas.config, say), literal or resolved, never
    # reach the logs
    register_secrets(out, None)
    return out, transformer


# Kafka Connect's example names (connect-distributed.properties)
EXAMPLE_STORAGE_TOPICS = {"config.storage.topic": "connect-configs",
                          "offset.storage.topic": "connect-offsets",
                          "status.storage.topic": "connect-status"}


def _check_values(values: Mapping[str, Any], props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for values that parse but cannot work.

    Checked here, before the worker creates anything under state.dir, so a typo in
    spark.master or a converter class never leaves a half-initialised state directory.
    Keys that failed to parse are absent from `values` and already reported.
    """
    problems: list[tuple[str, str]] = []

    def invalid(key: str, value: Any, why: str) -> None:
        problems.append((key, f"Invalid value {value!r} for configuration {key}: {why}"))

    for url in values.get("listeners") or []:
        try:
            parse_listener(url, "")
        except ConfigError:
            invalid("listeners", url, "expected http://HOST:PORT or https://HOST:PORT")
    for name in values.get("rest.extension.classes") or []:
        if name not in REST_EXTENSIONS:
            invalid("rest.extension.classes", name, "kctl has the Basic auth extension: "
                    f"{BASIC_AUTH_EXTENSION} (or basic)")
    if values.get("rest.extension.classes") and not values.get(
            "rest.basic.auth.credentials.file"):
        problems.append(("rest.basic.auth.credentials.file",
                         "rest.extension.classes asks for Basic auth: set "
                         "rest.basic.auth.credentials.file (user=password lines)"))
    for entry in values.get("file.connector.allowed.paths") or []:
        if not os.path.isabs(os.path.expanduser(entry)):
            invalid("file.connector.allowed.paths", entry, "must be an absolute path")
    problems.extend(_check_security(values, props))
    if "spark.master" in values:
        master = str(values["spark.master"]).strip()
        from kctl.runtime.spark import master_kind

        try:
            kind = master_kind(master)
        except ConfigError:
            kind = None
        if kind is None or (kind == "local" and not _LOCAL_MASTER.fullmatch(master)) or \
                (kind != "local" and not master.split("://", 1)[1].strip("/")):
            invalid("spark.master", master, "expected local, local[N], local[*], "
                    "spark://HOST:PORT or sc://HOST:PORT")
    for key in ("key.converter", "value.converter"):
        if key in values:
            problems.extend(_check_converter(key, str(values[key]), props))
    for entry in values.get("plugin.path") or []:
        path = Path(entry)
        if not path.exists():
            invalid("plugin.path", entry, "no such directory")
        elif not path.is_dir():
            invalid("plugin.path", entry, "not a directory")
    if values.get("group.id") and not values.get(BOOTSTRAP_SERVERS_CONFIG):
        problems.append(("group.id", "group.id makes a distributed worker, which keeps its "
                         "state on a Kafka cluster: set bootstrap.servers too (or remove "
                         "group.id for a standalone worker)"))
    if values.get("group.id") and values.get(BOOTSTRAP_SERVERS_CONFIG):
        for key in ("config.storage.topic", "offset.storage.topic", "status.storage.topic"):
            if not values.get(key):
                problems.append((key, f"Missing required configuration {key!r} for a "
                                 f"distributed worker (group.id is set), e.g. "
                                 f"{EXAMPLE_STORAGE_TOPICS[key]}"))
    if values.get("group.id") and values.get(BOOTSTRAP_SERVERS_CONFIG) and \
            str(props.get(EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG, "")).strip() == "enabled":
        problems.append((EXACTLY_ONCE_SOURCE_SUPPORT_CONFIG, (
            "exactly.once.source.support=enabled is not available on a distributed worker: "
            "kctl cannot yet fence the producers of a worker that stalls past its session "
            "(Kafka's KIP-618 transactions), so such a zombie could write records its "
            "successor writes again. Sources in a cluster are at-least-once; remove the "
            "setting or set it to disabled (exactly-once sinks are not affected)")))
    state_dir = values.get("state.dir")
    if state_dir and Path(os.path.expanduser(str(state_dir))).exists() and \
            not Path(os.path.expanduser(str(state_dir))).is_dir():
        invalid("state.dir", state_dir, "exists and is not a directory")
    return problems


def _check_converter(key: str, name: str, props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The converter class resolves and accepts its `<key>.` settings, as tasks will need."""
    from kctl.errors import PluginError
    from kctl.runtime.converters import load_converter

    prefix = key + "."
    settings = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
    try:
        load_converter(name, settings, key == "key.converter")
    except PluginError as e:
        return [(key, f"Invalid value {name!r} for configuration {key}: {e}")]
    except ConfigError as e:  # the converter's message names the prefixed key already
        return [(e.key if e.key and e.key.startswith(prefix) else key, str(e))]
    return []


def parse_listener(url: str, source: str) -> tuple[str, int]:
    from urllib.parse import urlparse

    u = urlparse(url)
    if u.scheme.lower() not in ("http", "https") or not u.hostname or u.port is None:
        raise ConfigError(
            f"{source}: invalid listeners value {url!r}; expected http://HOST:PORT or "
            "https://HOST:PORT", key="listeners", source=source)
    return u.hostname, u.port


def _wildcard(host: str) -> bool:
    """Whether a listener's host means every interface."""
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return not host.strip()


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_security(values: Mapping[str, Any], props: Mapping[str, Any]
                    ) -> list[tuple[str, str]]:
    """TLS material the REST listener needs and the Kafka clients' security settings can be
    read and used: a wrong path or password fails the start, naming the setting."""
    from kctl.transport.security import TlsMaterial, kafka_python_config, security_settings

    problems: list[tuple[str, str]] = []
    listeners = values.get("listeners") or []
    if listeners and str(listeners[0]).lower().startswith("https://"):
        scoped = {k[len("listeners.https."):]: v for k, v in props.items()
                  if k.startswith("listeners.https.")}
        prefix = "listeners.https." if scoped else ""
        conf = scoped or {k: v for k, v in props.items() if k.startswith("ssl.")}
        try:
            TlsMaterial.from_config(conf, prefix).server_context()
        except ConfigError as e:
            problems.append((e.key or "listeners", str(e)))
    security = security_settings(props)
    if values.get(BOOTSTRAP_SERVERS_CONFIG) and security:
        try:
            kafka_python_config(security)
        except ConfigError as e:
            problems.append((e.key or "security.protocol", str(e)))
    for prefix in ("producer.", "consumer.", "admin."):
        scoped = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
        if values.get(BOOTSTRAP_SERVERS_CONFIG) and security_settings(scoped):
            try:
                kafka_python_config({**security, **scoped})
            except ConfigError as e:
                problems.append((prefix + (e.key or "security.protocol"),
                                 f"{e} (in the {prefix}* settings)"))
    return problems
