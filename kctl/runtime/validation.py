"""Connector config validation in Kafka Connect's ConfigInfos shape (REST /validate, create)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kctl.api.config import ConfigDef, ConfigKey, ConfigValue, Password
from kctl.api.connector import Connector, SinkConnector
from kctl.api.paths import path_problem
from kctl.errors import ConfigError, PluginError, ValidationError
from kctl.runtime import connector_config as cc
from kctl.runtime.config_providers import (
    ALLOWED_PATHS_CONFIG,
    PLACEHOLDER,
    ConfigTransformer,
    has_placeholder,
    only_placeholders,
)
from kctl.runtime.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    PREDICATES_CONFIG,
    TRANSFORMS_CONFIG,
)
from kctl.runtime.plugins import Plugins
from kctl.runtime.secrets import MIN_SECRET_LENGTH, mask_url

# Kafka's PrincipalConnectorClientConfigOverridePolicy: what a connector may override
PRINCIPAL_OVERRIDES = ("security.protocol", "sasl.jaas.config", "sasl.mechanism")
OVERRIDE_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")


@dataclass(frozen=True)
class ConnectorPolicy:
    """What a worker lets connector configs ask for: local paths under `allowed_paths`
    (empty: anywhere), client overrides as `override_policy` says (None, Principal, All)."""

    allowed_paths: tuple[str, ...] = ()
    override_policy: str = "All"

    @classmethod
    def of(cls, worker_config: Any) -> ConnectorPolicy:
        if worker_config is None or not hasattr(worker_config, "override_policy"):
            return cls()
        return cls(tuple(worker_config.get_list("file.connector.allowed.paths")),
                   worker_config.override_policy)

    def problems(self, connector: Connector | None, config: Mapping[str, Any]
                 ) -> dict[str, list[str]]:
        """key -> why the worker refuses it."""
        out: dict[str, list[str]] = {}
        if connector is not None and self.allowed_paths:
            try:
                paths = connector.local_paths(config)
            except Exception:  # a bad value is reported by the key's own validation
                paths = {}
            for key, path in paths.items():
                problem = path_problem(path, self.allowed_paths)
                if problem:
                    out.setdefault(key, []).append(problem)
        if self.override_policy != "All":
            for key in config:
                prefix = next((p for p in OVERRIDE_PREFIXES if key.startswith(p)), None)
                if prefix is None:
                    continue
                name = key[len(prefix):]
                if self.override_policy == "None" or name not in PRINCIPAL_OVERRIDES:
                    out.setdefault(key, []).append(
                        f"The '{self.override_policy}' policy does not allow '{name}' to be "
                        "overridden in the connector configuration "
                        "(connector.client.config.override.policy)")
        return out


def refused_placeholders(config: Mapping[str, Any], transformer: ConfigTransformer
                         ) -> dict[str, list[str]]:
    """key -> placeholders this worker refuses: naming a config provider it does not have,
    or a file outside its providers' allowed.paths (KIP-993). Placeholders that fail for
    another reason (a missing key) may resolve on the worker that runs the task."""
    out: dict[str, list[str]] = {}
    known = ", ".join(sorted(transformer.providers)) or "none"
    for key, value in config.items():
        if not isinstance(value, str) or not has_placeholder(value):
            continue
        unknown = [m for m in PLACEHOLDER.finditer(value)
                   if m.group(1) not in transformer.providers]
        for m in unknown:
            out.setdefault(key, []).append(
                f"{m.group(0)} names config provider {m.group(1)!r}, which this worker "
                f"does not have (config.providers: {known})")
        if unknown:
            continue
        try:
            transformer.transform({key: value}, what="connector config")
        except ConfigError as e:
            if ALLOWED_PATHS_CONFIG in str(e):
                out.setdefault(key, []).append(str(e))
    return out


def _definition(key: ConfigKey) -> dict[str, Any]:
    default = key.default if key.has_default else None
    if isinstance(default, list):
        default = ",".join(default)
    elif isinstance(default, bool):
        default = str(default).lower()
    elif default is not None:
        default = str(default)
    return {
        "name": key.name, "type": key.type.value, "required": not key.has_default,
        "default_value": default, "importance": key.importance.value,
        "documentation": key.doc, "group": key.group, "width": key.width.value,
        "display_name": key.display_name or key.name, "dependents": list(key.dependents),
        "order": key.order_in_group,
    }


def _value(cv: ConfigValue) -> dict[str, Any]:
    v = cv.value
    if isinstance(v, Password):
        v = Password.HIDDEN
    elif isinstance(v, list):
        v = ",".join(map(str, v))
    elif isinstance(v, bool):
        v = str(v).lower()
    elif v is not None:
        v = mask_url(str(v))
    return {"name": cv.name, "value": v, "recommended_values": [str(r) for r in cv.recommended_values],
            "errors": list(cv.errors), "visible": cv.visible}


def _unresolved(message: str, resolved: Mapping[str, tuple[str, str]]) -> str:
    """An error message with resolved values put back as their placeholders."""
    for value, placeholder in sorted(resolved.values(), key=lambda p: -len(p[0])):
        if len(value) >= MIN_SECRET_LENGTH:
            message = message.replace(value, placeholder)
    return message


def plugin_config_keys(plugin: Any) -> list[dict[str, Any]]:
    """ConfigKeyInfos of any plugin with a `config()` ConfigDef (connector, transform,
    predicate, converter); a plugin without one has no keys to show."""
    config = getattr(plugin, "config", None)
    definition = config() if callable(config) else ConfigDef()
    return [_definition(k) for k in definition.keys.values() if not k.internal]


def validate_config(plugins: Plugins, config: Mapping[str, Any],
                    plugin_name: str | None = None, *,
                    transformer: ConfigTransformer | None = None,
                    policy: ConnectorPolicy | None = None) -> dict[str, Any]:
    """Validate common keys, the plugin's keys and transforms; never raises for bad values.

    With the worker's `transformer`, placeholders are resolved first (as Kafka validates),
    so a `${file:...}` port is checked as a number and the plugin's validate() can use the
    password; a placeholder that cannot be resolved here stays as it is (it may resolve on
    the worker that runs the task), unless it can never resolve: a provider the worker does
    not have, or a file outside the provider's allowed.paths, are errors of the key.
    `policy`: the worker's file allow-list and client override policy. The answer shows what was sent: placeholders as
    written, literal passwords as `[hidden]`, and no resolved value in an error message.
    """
    cls_name = plugin_name or str(config.get(CONNECTOR_CLASS_CONFIG) or "")
    raw = cc.as_strings(config)
    config = transformer.transform(raw, strict=False).data if transformer is not None else raw
    connector: Connector | None = None
    plugin_error: str | None = None
    try:
        connector = plugins.new_connector(cls_name)
    except PluginError as e:
        plugin_error = str(e)
    is_sink = isinstance(connector, SinkConnector)
    common = cc.connector_def(is_sink)
    values: list[ConfigValue] = common.validate(config)
    definition: ConfigDef = common
    if plugin_error:
        for v in values:
            if v.name == CONNECTOR_CLASS_CONFIG:
                v.errors.append(plugin_error)
    if connector is not None:
        try:
            plugin_values = connector.validate(config)
        except Exception as e:  # a plugin's validate bug is a validation error, not a 500
            plugin_values = [ConfigValue(CONNECTOR_CLASS_CONFIG, cls_name,
                                         errors=[f"validate() failed: {type(e).__name__}: {e}"])]
        definition = common.merge(connector.config())
        names = {v.name for v in values}
        for pv in plugin_values:
            if pv.name in names:
                existing = next(v for v in values if v.name == pv.name)
                existing.errors.extend(e for e in pv.errors if e not in existing.errors)
            else:
                values.append(pv)
    extra: dict[str, list[str]] = {}
    if transformer is not None:
        extra.update(refused_placeholders(raw, transformer))
    if policy is not None:
        for k, errs in policy.problems(connector, config).items():
            extra.setdefault(k, []).extend(errs)
    if is_sink:
        extra.update(cc.check_sink_topics(config))
    if config.get(TRANSFORMS_CONFIG) or config.get(PREDICATES_CONFIG):
        from kctl.transforms.chain import validate_transforms

        for k, errs in validate_transforms(config).items():
            extra.setdefault(k, []).extend(errs)
    by_name = {v.name: v for v in values}
    for k, errs in extra.items():
        if k in by_name:
            by_name[k].errors.extend(errs)
        else:
            cv = ConfigValue(k, config.get(k), errors=list(errs))
            values.append(cv)
            by_name[k] = cv
    keys = definition.keys
    resolved = {k: (config[k], raw[k]) for k in raw
                if has_placeholder(raw[k]) and config.get(k, raw[k]) != raw[k]}
    configs = []
    for v in values:
        key = keys.get(v.name)
        shown = _value(v)
        written = raw.get(v.name)
        if has_placeholder(written) and (only_placeholders(written)
                                         or not isinstance(v.value, Password)):
            shown["value"] = written  # a password with a literal part stays [hidden]
        shown["errors"] = [_unresolved(e, resolved) for e in shown["errors"]]
        configs.append({"definition": _definition(key) if key else {"name": v.name},
                        "value": shown})
    # Keys nothing reads are warnings, not errors (they do not count in error_count, so a
    # config is as valid as Kafka Connect would find it). Kafka's ConfigInfos has no place
    # for them: they are an added top-level list, which Kafka's clients (Jackson with
    # unknown properties ignored, kcctl) skip. Only when the plugin is known: else every
    # key of it would look unknown.
    warnings = [{"name": k, "message": m}
                for k, m in cc.unknown_key_warnings(raw, set(keys))] if connector else []
    return {
        "name": connector.__class__.__module__ + "." + connector.__class__.__qualname__
        if connector else cls_name,
        "error_count": sum(len(v.errors) for v in values),
        "groups": definition.groups(),
        "configs": configs,
        "warnings": warnings,
    }


def raise_if_invalid(result: dict[str, Any]) -> None:
    if not result["error_count"]:
        return
    errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"]
              if c["value"]["errors"]}
    lines = [f"{k}: {m}" for k, ms in errors.items() for m in ms]
    raise ValidationError(
        f"Connector configuration is invalid and contains the following "
        f"{result['error_count']} error(s):\n" + "\n".join(lines)
        + "\nYou can also find the above list of errors at the endpoint "
          "`/connector-plugins/{connectorType}/config/validate`", errors)
