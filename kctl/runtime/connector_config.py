"""Keys every connector has (Kafka Connect's ConnectorConfig, SinkConnectorConfig)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kctl.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range, ValidString
from kctl.errors import ConfigError

# Keys the runtime, REST and the CLI read by name (Kafka's ConnectorConfig constants).
CONNECTOR_CLASS_CONFIG = "connector.class"
TASKS_MAX_CONFIG = "tasks.max"
TOPICS_CONFIG = "topics"
TOPICS_REGEX_CONFIG = "topics.regex"
KEY_CONVERTER_CLASS_CONFIG = "key.converter"
VALUE_CONVERTER_CLASS_CONFIG = "value.converter"
ERRORS_TOLERANCE_CONFIG = "errors.tolerance"
DLQ_TOPIC_NAME_CONFIG = "errors.deadletterqueue.topic.name"
TRANSFORMS_CONFIG = "transforms"
PREDICATES_CONFIG = "predicates"

COMMON = (
    ConfigDef()
    .define("name", ConfigType.STRING, None, NonEmptyString(), Importance.HIGH,
            "Globally unique name of the connector.", group="Common")
    .define(CONNECTOR_CLASS_CONFIG, ConfigType.STRING, None, NonEmptyString(), Importance.HIGH,
            "Connector plugin: an alias (FileSource, FileSink), a class name or a dotted Python path.",
            group="Common")
    .define(TASKS_MAX_CONFIG, ConfigType.INT, 1, Range.at_least(1), Importance.HIGH,
            "Maximum number of tasks for this connector.", group="Common")
    .define(KEY_CONVERTER_CLASS_CONFIG, ConfigType.STRING, None, None, Importance.LOW,
            "Overrides the worker's key.converter.", group="Common")
    .define(VALUE_CONVERTER_CLASS_CONFIG, ConfigType.STRING, None, None, Importance.LOW,
            "Overrides the worker's value.converter.", group="Common")
    .define(TRANSFORMS_CONFIG, ConfigType.LIST, [], None, Importance.LOW,
            "Aliases of the transformations applied to records, in order.", group="Transforms")
    .define(PREDICATES_CONFIG, ConfigType.LIST, [], None, Importance.LOW,
            "Aliases of the predicates transformations can be conditioned on.",
            group="Predicates")
    .define("errors.retry.timeout", ConfigType.LONG, 0, Range.at_least(-1), Importance.MEDIUM,
            "How long a failed operation is retried (ms); -1 retries forever, 0 never.",
            group="Error Handling")
    .define("errors.retry.delay.max.ms", ConfigType.LONG, 60000, Range.at_least(1),
            Importance.MEDIUM, "Cap of the exponential backoff between retries (with jitter).",
            group="Error Handling")
    .define(ERRORS_TOLERANCE_CONFIG, ConfigType.STRING, "none", ValidString.in_("none", "all"),
            Importance.MEDIUM,
            "none: an error fails the task. all: problem records are skipped (and reported).",
            group="Error Handling")
    .define("errors.log.enable", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Log each error with its context.", group="Error Handling")
    .define("errors.log.include.messages", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Include the record's key and value in error logs.", group="Error Handling")
    .define(DLQ_TOPIC_NAME_CONFIG, ConfigType.STRING, "", None, Importance.MEDIUM,
            "Topic that receives records that failed (sinks, and sources in kctl).",
            group="Error Handling")
    .define("errors.deadletterqueue.topic.replication.factor", ConfigType.SHORT, 3,
            Range.at_least(-1), Importance.LOW,
            "Replication factor of the DLQ topic when it is created (capped by the cluster).",
            group="Error Handling")
    .define("errors.deadletterqueue.context.headers.enable", ConfigType.BOOLEAN, False, None,
            Importance.MEDIUM, "Add __connect.errors.* headers describing the failure.",
            group="Error Handling")
)

SINK = (
    ConfigDef()
    .define(TOPICS_CONFIG, ConfigType.LIST, [], None, Importance.HIGH,
            "Topics to consume (or use topics.regex).", group="Common")
    .define(TOPICS_REGEX_CONFIG, ConfigType.STRING, "", None, Importance.HIGH,
            "Regular expression of topics to consume.", group="Common")
    .define("consumer.max.poll.records", ConfigType.INT, 10000, Range.at_least(1), Importance.LOW,
            "Most records handed to one put() call.", group="Common")
)


# Keys under these prefixes are free by design: transform and predicate settings (checked
# by the chain), client pass-through settings, converter settings, topic creation groups.
FREE_PREFIXES = ("transforms.", "predicates.", "producer.override.", "consumer.override.",
                 "admin.override.", "key.converter.", "value.converter.", "header.converter.",
                 "topic.creation.")


def unknown_key_warnings(config: Mapping[str, Any], known: set[str]) -> list[tuple[str, str]]:
    """(key, warning) for keys nothing reads, each with a did-you-mean when one is close.
    Not errors: Kafka Connect accepts free keys and plugins may read keys they do not
    define."""
    import difflib

    warnings = []
    for key in sorted(config):
        if key in known or key.startswith(FREE_PREFIXES):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        warnings.append((key, f"unknown key {key!r}{hint}: no setting of this connector "
                              "reads it"))
    return warnings


def unknown_keys(config: Mapping[str, Any], known: set[str]) -> list[str]:
    return [w for _, w in unknown_key_warnings(config, known)]


def known_keys(validation: Mapping[str, Any]) -> set[str]:
    """The keys a validation result defines (Kafka's ConfigInfos `configs`)."""
    return {c["definition"]["name"] for c in validation.get("configs", [])
            if "type" in c.get("definition", {})}


def connector_def(is_sink: bool) -> ConfigDef:
    return COMMON.merge(SINK) if is_sink else COMMON


def check_sink_topics(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Exactly one of topics / topics.regex, and no overlap with the DLQ topic."""
    errors: dict[str, list[str]] = {}
    topics = [t.strip() for t in str(config.get(TOPICS_CONFIG) or "").split(",") if t.strip()]
    regex = str(config.get(TOPICS_REGEX_CONFIG) or "")
    if topics and regex:
        errors.setdefault(TOPICS_CONFIG, []).append("Must configure only one of topics or topics.regex")
    elif not topics and not regex:
        errors.setdefault(TOPICS_CONFIG, []).append(
            "Must configure one of topics or topics.regex")
    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            errors.setdefault(TOPICS_REGEX_CONFIG, []).append(f"Invalid regular expression: {e}")
    dlq = str(config.get(DLQ_TOPIC_NAME_CONFIG) or "")
    if dlq and (dlq in topics or (regex and re.fullmatch(regex, dlq))):
        errors.setdefault(DLQ_TOPIC_NAME_CONFIG, []).append(
            "The DLQ topic cannot be one of the topics the connector consumes")
    return errors


def as_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Connector configs are string maps in Kafka Connect; YAML may give ints and lists."""
    out: dict[str, str] = {}
    for k, v in config.items():
        if v is None:
            continue
        if isinstance(v, bool):
            out[k] = str(v).lower()
        elif isinstance(v, list | tuple):
            if not all(isinstance(x, str | int | float) for x in v):
                raise ConfigError(f"config value for {k!r} must be a string or a list of "
                                  "strings and numbers", key=k)
            out[k] = ",".join(str(x).lower() if isinstance(x, bool) else str(x) for x in v)
        elif isinstance(v, dict):
            raise ConfigError(f"config value for {k!r} must be a string, not a mapping", key=k)
        else:
            out[k] = str(v)
    return out


def parse_connector_document(data: Any, source: str) -> tuple[str, dict[str, str]]:
    """`{"name": n, "config": {...}}` (REST's shape) or a flat config with `name`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with name and config", source=source)
    if "config" in data and isinstance(data["config"], Mapping):
        config = dict(data["config"])
        name = data.get("name") or config.get("name")
    else:
        config = {k: v for k, v in data.items()}
        name = config.get("name")
    if not name:
        raise ConfigError(f"{source}: the connector has no name", key="name", source=source)
    config["name"] = name
    return str(name), as_strings(config)


def load_connector_file(path: str) -> tuple[str, dict[str, str]]:
    """Read a connector definition from YAML, JSON or .properties (connect-standalone style)."""
    from pathlib import Path

    import yaml

    from kctl.runtime.worker_config import (
        describe_yaml_error,
        load_yaml,
        parse_properties,
        read_text_file,
    )

    p = Path(path)
    text = read_text_file(p, "connector file")
    if p.suffix == ".properties":
        return parse_connector_document(parse_properties(text), str(p))
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML or JSON: {describe_yaml_error(e)}",
                          source=str(p)) from e
    return parse_connector_document(data, str(p))
