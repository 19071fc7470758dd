"""The configuration reference, generated from the ConfigDefs so it never drifts from code.

The output is deterministic: no timestamps, no absolute paths, and defaults that depend on
the machine (the home directory, environment variables) are rendered as a stable
description instead of this machine's value.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kctl.api.config import ConfigDef, Validator

CONFIGURATION_MD = Path("docs") / "configuration.md"
REGENERATE = "python -m kctl.docs"

# Keys whose default is computed on the machine: (stable default, sentence for the doc).
_WORKER_STABLE_DEFAULTS: Mapping[str, tuple[Any, str]] = {
    "state.dir": ("~/.kctl/state",
                  "Default: `$KCTL_STATE_DIR` when that is set, else `~/.kctl/state`."),
}


# --- pieces -------------------------------------------------------------------------------


def _stable(definition: ConfigDef, overrides: Mapping[str, tuple[Any, str]]) -> ConfigDef:
    """A copy of `definition` with machine-dependent defaults replaced by stable ones."""
    missing = set(overrides) - set(definition.names())
    if missing:  # the override table went stale: better a loud failure than a wrong doc
        raise KeyError(f"no such keys to override: {', '.join(sorted(missing))}")
    keys = []
    for key in definition.keys.values():
        if key.name in overrides:
            default, note = overrides[key.name]
            key = dataclasses.replace(key, default=default, doc=f"{key.doc} {note}".strip())
        keys.append(key)
    return ConfigDef(keys)


# Validators that are plain functions print as `<function f at 0x...>`, which changes from
# run to run: the table shows these descriptions instead (or the function's docstring).
_VALIDATOR_DESCRIPTIONS: Mapping[str, str] = {
    "_non_empty_list": "non-empty list",
    "_parse_cast_spec": "field:type,... or one type",
    "_parse_renames": "old:new,...",
    "_pattern_validator": "SimpleDateFormat pattern",
    "java_regex_validator": "Java regular expression",
}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclasses.dataclass(frozen=True)
class _Described:
    """A validator shown by a stable description in the valid values column."""

    validator: Validator
    description: str

    def __call__(self, name: str, value: Any) -> None:
        self.validator(name, value)

    def __str__(self) -> str:
        return self.description


def _describe(validator: Validator) -> str:
    name = getattr(validator, "__name__", type(validator).__name__)
    if name in _VALIDATOR_DESCRIPTIONS:
        return _VALIDATOR_DESCRIPTIONS[name]
    return _first_line(validator) if inspect.isfunction(validator) else ""


def _escape_html(text: str) -> str:
    """`<` outside code spans as `&lt;`, so `<path>/<topic>` is not taken for HTML tags."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def _for_markdown(definition: ConfigDef) -> ConfigDef:
    """`definition` as the tables show it: stable validator descriptions, escaped docs."""
    keys = []
    for key in definition.keys.values():
        if key.validator is not None and _ADDRESS.search(str(key.validator)):
            key = dataclasses.replace(
                key, validator=_Described(key.validator, _describe(key.validator)))
        keys.append(dataclasses.replace(key, doc=_escape_html(key.doc)))
    return ConfigDef(keys)


def _table(definition: ConfigDef) -> str:
    if not any(not k.internal for k in definition.keys.values()):
        return "No configuration keys.\n"
    table = _for_markdown(definition).to_markdown()
    if _ADDRESS.search(table):  # pragma: no cover - a new kind of unstable value
        raise ValueError(f"the generated table holds a memory address:\n{table}")
    return table


def _first_line(obj: Any, drop_prefix: str = "") -> str:
    """The first line of `obj`'s docstring, without a leading `drop_prefix`."""
    doc = (inspect.getdoc(obj) or "").strip()
    line = doc.splitlines()[0].strip() if doc else ""
    return line[len(drop_prefix):].lstrip() if drop_prefix and line.startswith(drop_prefix) else line


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _plugin_config(cls: type) -> ConfigDef:
    """A transform's or predicate's ConfigDef: its CONFIG_DEF, else what config() returns."""
    definition = getattr(cls, "CONFIG_DEF", None)
    if isinstance(definition, ConfigDef):
        return definition
    return cls().config()


def _worker_config() -> ConfigDef:
    from kctl.runtime.worker_config import WORKER_CONFIG

    return _stable(WORKER_CONFIG, _WORKER_STABLE_DEFAULTS)


def _pass_through_prefixes() -> str:
    from kctl.runtime.worker_config import PASS_THROUGH_PREFIXES

    return ", ".join(f"`{p}*`" for p in PASS_THROUGH_PREFIXES)


def _worker_section(heading: str) -> list[str]:
    return [
        f"{heading} Worker\n",
        "Keys of the worker config file (`kctl worker start worker.yaml`; YAML, JSON or "
        "`.properties`), from `WORKER_CONFIG` in `kctl/runtime/worker_config.py`. Keys "
        f"starting with {_pass_through_prefixes()} pass through to the component that owns "
        "them; any other unknown key stops the worker. Any worker or connector value may "
        "hold placeholders `${provider:path:key}` resolved by the providers "
        "`config.providers` names ([Security](security.md#secrets-config-providers-and-passwords)): a connector's when the worker starts "
        "it and its tasks, the worker's own at startup.\n",
        _table(_worker_config()),
    ]


def _common_section(heading: str) -> list[str]:
    from kctl.runtime.connector_config import COMMON

    return [
        f"{heading} Connectors (common)\n",
        "Keys every connector takes, including error handling and dead letter queues "
        "(`COMMON` in `kctl/runtime/connector_config.py`). Sources also take "
        "`producer.override.*` and sinks `consumer.override.*`, passed to their producer or "
        "consumer over the worker's `producer.*` / `consumer.*` settings.\n",
        _table(COMMON),
    ]


def _transform_sections() -> Iterator[str]:
    from kctl.transforms import chain

    for alias in sorted(chain._TRANSFORM_CLASSES):
        cls = chain._TRANSFORM_CLASSES[alias]
        yield f"### `{alias}`\n"
        summary = _first_line(cls)
        yield f"`{_qualified(cls)}`" + (f": {summary}" if summary else "") + "\n"
        yield _table(_plugin_config(cls))


def _predicate_sections() -> Iterator[str]:
    from kctl.transforms import chain

    for alias in sorted(chain._PREDICATE_CLASSES):
        cls = chain._PREDICATE_CLASSES[alias]
        yield f"### `{alias}`\n"
        summary = _first_line(cls)
        yield f"`{_qualified(cls)}`" + (f": {summary}" if summary else "") + "\n"
        yield _table(_plugin_config(cls))


def _converter_sections() -> Iterator[str]:
    from kctl.runtime.converters import CONVERTER_ALIASES

    names: dict[type, list[str]] = {}
    for alias, cls in CONVERTER_ALIASES.items():
        names.setdefault(cls, []).append(alias)
    for cls, aliases in names.items():
        yield f"### {cls.__name__}\n"
        summary = _first_line(cls)
        yield ((f"{summary} " if summary else "")
               + "Names: " + ", ".join(f"`{a}`" for a in aliases) + ".\n")
        yield _table(cls().config())


# --- documents ----------------------------------------------------------------------------


def render_configuration() -> str:
    """The whole of docs/configuration.md."""
    from kctl.connectors.file import sink, source
    from kctl.connectors.jdbc import sink as jdbc_sink
    from kctl.connectors.jdbc import source as jdbc_source
    from kctl.runtime.connector_config import COMMON, SINK, connector_def

    parts: list[str] = [
        "# Configuration reference\n",
        f"Generated from the code's ConfigDefs by `{REGENERATE}`: do not edit this file by "
        "hand; change the definitions and run the command again (`" + REGENERATE
        + " --check`, which the tests run, fails when this file is stale). Each table lists "
        "a key's type, default (empty: the key is required; null: unset), valid values, "
        "importance and description; `kctl connector validate FILE` and "
        "`GET /connector-plugins/{plugin}/config` check and list the same keys.\n",
    ]
    parts += _worker_section("##")
    parts += _common_section("##")
    parts += [
        "## Sink connectors\n",
        "Keys sink connectors take on top of the common ones (`SINK` in "
        "`kctl/runtime/connector_config.py`). Exactly one of `topics` and `topics.regex` must "
        "be set, and the dead letter queue topic cannot be one of them.\n",
        _table(SINK),
    ]
    source_only = [k for k in connector_def(False).keys.values() if k.name not in COMMON.keys]
    if source_only:
        parts += ["## Source connectors\n", "Keys source connectors take on top of the "
                  "common ones.\n", _table(ConfigDef(source_only))]
    else:
        parts += ["## Source connectors\n", "Source connectors take the common keys only; "
                  "exactly-once delivery and topic creation are worker settings "
                  "(`exactly.once.source.support`, `topic.creation.default.*`).\n"]
    parts += [
        "## Converters\n",
        "Set with `key.converter` / `value.converter` (worker or connector); a converter's "
        "own keys take the same prefix, e.g. `value.converter.schemas.enable`.\n",
        *_converter_sections(),
    ]
    parts += [
        "## FileSource\n",
        f"`connector.class: FileSource` (`{_qualified(source.FileSourceConnector)}`): "
        f"{_first_line(source, 'FileSource:')}\n",
        _table(source.FileSourceConnector().config()),
        "## FileSink\n",
        f"`connector.class: FileSink` (`{_qualified(sink.FileSinkConnector)}`): "
        f"{_first_line(sink, 'FileSink:')}\n",
        _table(sink.FileSinkConnector().config()),
        "## JdbcSource\n",
        f"`connector.class: JdbcSource` (`{_qualified(jdbc_source.JdbcSourceConnector)}`): "
        f"{_first_line(jdbc_source, 'JdbcSource:')}\n",
        _table(jdbc_source.JdbcSourceConnector().config()),
        jdbc_source.TYPES_DOC,
        "## JdbcSink\n",
        f"`connector.class: JdbcSink` (`{_qualified(jdbc_sink.JdbcSinkConnector)}`): "
        f"{_first_line(jdbc_sink, 'JdbcSink:')} "
        "`delete.enabled` needs `pk.mode=record_key`; `upsert` and `update` need a "
        "`pk.mode` other than none.\n",
        _table(jdbc_sink.JdbcSinkConnector().config()),
        jdbc_sink.TYPES_DOC,
    ]
    parts += [
        "## Transforms\n",
        "Each alias listed in a connector's `transforms` is configured under "
        "`transforms.<alias>.`: `type` (one of the names below, Kafka's class name such as "
        "`org.apache.kafka.connect.transforms.InsertField$Value`, a name from the "
        "`kctl.transforms` entry-point group or a dotted Python path), optionally "
        "`predicate` (an alias from `predicates`) and `negate`, and the keys of its type.\n",
        *_transform_sections(),
    ]
    parts += [
        "## Predicates\n",
        "Each alias listed in a connector's `predicates` is configured under "
        "`predicates.<alias>.`: `type` and the keys of its type.\n",
        *_predicate_sections(),
    ]
    return "\n".join(parts)
