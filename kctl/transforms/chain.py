"""Build the transformation chain from a connector config, in Kafka Connect's syntax.

    transforms=mask,route
    transforms.mask.type=MaskField$Value
    transforms.mask.fields=ssn
    transforms.mask.predicate=isOrders
    transforms.mask.negate=false
    predicates=isOrders
    predicates.isOrders.type=TopicNameMatches
    predicates.isOrders.pattern=orders.*

Types may be the short aliases below, Kafka's class names, names registered in the
`kctl.transforms` entry-point group, or a dotted Python path.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.api.transform import Predicate, Transformation
from kctl.errors import ConfigError, KctlError, PluginError, ValidationError
from kctl.transforms import fields, headers, predicates, routing, timestamps

_KAFKA_PKG = "org.apache.kafka.connect.transforms."

_TRANSFORM_CLASSES: dict[str, type[Transformation[Any]]] = {
    "InsertField$Key": fields.InsertFieldKey,
    "InsertField$Value": fields.InsertFieldValue,
    "ReplaceField$Key": fields.ReplaceFieldKey,
    "ReplaceField$Value": fields.ReplaceFieldValue,
    "MaskField$Key": fields.MaskFieldKey,
    "MaskField$Value": fields.MaskFieldValue,
    "Cast$Key": fields.CastKey,
    "Cast$Value": fields.CastValue,
    "TimestampConverter$Key": timestamps.TimestampConverterKey,
    "TimestampConverter$Value": timestamps.TimestampConverterValue,
    "ValueToKey": fields.ValueToKey,
    "ExtractField$Key": fields.ExtractFieldKey,
    "ExtractField$Value": fields.ExtractFieldValue,
    "HoistField$Key": fields.HoistFieldKey,
    "HoistField$Value": fields.HoistFieldValue,
    "Flatten$Key": fields.FlattenKey,
    "Flatten$Value": fields.FlattenValue,
    "RegexRouter": routing.RegexRouter,
    "TimestampRouter": timestamps.TimestampRouter,
    "InsertHeader": headers.InsertHeader,
    "DropHeaders": headers.DropHeaders,
    "HeaderFrom$Key": headers.HeaderFromKey,
    "HeaderFrom$Value": headers.HeaderFromValue,
    "Filter": routing.Filter,
}
_PREDICATE_CLASSES: dict[str, type[Predicate[Any]]] = {
    "TopicNameMatches": predicates.TopicNameMatches,
    "HasHeaderKey": predicates.HasHeaderKey,
    "RecordIsTombstone": predicates.RecordIsTombstone,
}


def _aliases(table: Mapping[str, type], kafka_pkg: str) -> dict[str, type]:
    out: dict[str, type] = {}
    for short, cls in table.items():
        for name in (short, kafka_pkg + short, short.replace("$", "."),
                     f"{cls.__module__}.{cls.__qualname__}", cls.__qualname__):
            out.setdefault(name, cls)
    return out


BUILTIN_TRANSFORMS: dict[str, type[Transformation[Any]]] = _aliases(_TRANSFORM_CLASSES, _KAFKA_PKG)
BUILTIN_PREDICATES: dict[str, type[Predicate[Any]]] = _aliases(
    _PREDICATE_CLASSES, _KAFKA_PKG + "predicates.")
_NEEDS_VARIANT = {"InsertField", "ReplaceField", "MaskField", "Cast", "TimestampConverter",
                  "ExtractField", "HoistField", "Flatten", "HeaderFrom"}


def _entry_points() -> dict[str, type]:
    found: dict[str, type] = {}
    for ep in importlib.metadata.entry_points(group="kctl.transforms"):
        try:
            obj = ep.load()
        except Exception:  # a broken plugin must not hide the built-ins
            continue
        if inspect.isclass(obj):
            found[ep.name] = obj
    return found


def _import(path: str) -> Any:
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module:
        raise ImportError(f"{path!r} is not a dotted path")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def known_transforms() -> list[str]:
    return sorted(_TRANSFORM_CLASSES) + sorted(
        n for n, c in _entry_points().items() if issubclass(c, Transformation))


def known_predicates() -> list[str]:
    return sorted(_PREDICATE_CLASSES) + sorted(
        n for n, c in _entry_points().items() if issubclass(c, Predicate))


def _resolve(name: str, base: type, builtins: Mapping[str, type], what: str,
             known: list[str]) -> type:
    name = name.strip()
    cls = builtins.get(name)
    if cls is None:
        cls = _entry_points().get(name)
    why = ""
    if cls is None and "." in name:
        try:
            cls = _import(name.replace("$", "."))
        except (ImportError, AttributeError, ValueError) as e:
            cls, why = None, f" (importing it failed: {e})"
    short = name.rsplit(".", 1)[-1]
    if cls is None and short in _NEEDS_VARIANT:
        raise PluginError(f"{what} {name} needs a variant: use {short}$Key or {short}$Value")
    if cls is None:
        raise PluginError(f"Unknown {what.lower()} {name!r}{why}; known {what.lower()}s: "
                          f"{', '.join(known)}")
    if not (inspect.isclass(cls) and issubclass(cls, base)) or inspect.isabstract(cls):
        raise PluginError(f"{name} is not a concrete {what} class")
    return cls


def resolve_transformation(name: str) -> type[Transformation[Any]]:
    return _resolve(name, Transformation, BUILTIN_TRANSFORMS, "Transformation",
                    known_transforms())


def resolve_predicate(name: str) -> type[Predicate[Any]]:
    return _resolve(name, Predicate, BUILTIN_PREDICATES, "Predicate", known_predicates())


@dataclass
class TransformationStage:
    """One transform, optionally applied only where its predicate (xor negate) holds."""

    alias: str
    transformation: Transformation[Any]
    predicate: Predicate[Any] | None = None
    negate: bool = False
    predicate_alias: str | None = None

    def apply(self, record: Any) -> Any:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record
        return self.transformation.apply(record)

    @property
    def class_name(self) -> str:
        t = type(self.transformation)
        return f"{t.__module__}.{t.__qualname__}"


class TransformationChain:
    """Applies the stages in order; a stage returning None drops the record."""

    def __init__(self, stages: list[TransformationStage] | None = None):
        self.stages = list(stages or [])
        self.failed_stage: TransformationStage | None = None

    def __iter__(self) -> Iterator[TransformationStage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    @classmethod
    def from_config(cls, connector_config: Mapping[str, Any]) -> TransformationChain:
        """Build and configure the chain; ValidationError (per key) when the config is bad."""
        stages, errors = _build(connector_config)
        if errors:
            for s in stages:
                _close_quietly(s)
            key, msgs = next(iter(errors.items()))
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ValidationError(f"Invalid configuration {key}: {msgs[0]}{more}", errors)
        return cls(stages)

    def apply(self, record: Any) -> Any:
        for stage in self.stages:
            try:
                record = stage.apply(record)
            except Exception as e:
                # keep the exception's own type: DLQ headers and traces name what really
                # failed (as Kafka Connect's do); the note names the stage it failed in
                self.failed_stage = stage
                if not getattr(e, "_kctl_stage_noted", False):
                    e.add_note(f"in transformation '{stage.alias}' ({stage.class_name})")
                    e._kctl_stage_noted = True  # type: ignore[attr-defined]
                raise
            if record is None:
                return None
        return record

    def close(self) -> None:
        for s in self.stages:
            _close_quietly(s)


def _close_quietly(stage: TransformationStage) -> None:
    for obj in (stage.transformation, stage.predicate):
        if obj is not None:
            with contextlib.suppress(Exception):
                obj.close()


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    return [str(p).strip() for p in value if str(p).strip()]


def _as_text(v: Any) -> Any:
    """YAML/JSON configs may carry numbers and booleans; plugins see Kafka-style strings."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return v


def _sub_props(config: Mapping[str, Any], prefix: str, drop: set[str]) -> dict[str, Any]:
    return {k[len(prefix):]: _as_text(v) for k, v in config.items()
            if k.startswith(prefix) and k[len(prefix):] not in drop}


def _configure(obj: Any, props: Mapping[str, Any], prefix: str,
               errors: dict[str, list[str]]) -> bool:
    """Validate against the plugin's ConfigDef, then configure; errors keyed by the full key."""
    ok = True
    try:
        for cv in obj.config().validate(props):
            for msg in cv.errors:
                msg = (msg.replace(f'"{cv.name}"', f'"{prefix}{cv.name}"')
                       .replace(f"configuration {cv.name}", f"configuration {prefix}{cv.name}"))
                errors.setdefault(prefix + cv.name, []).append(msg)
                ok = False
    except Exception as e:
        errors.setdefault(prefix + "type", []).append(f"config() failed: {e}")
        return False
    if not ok:
        return False
    try:
        obj.configure(props)
    except ValidationError as e:
        for k, msgs in e.errors.items():
            errors.setdefault(prefix + k, []).extend(msgs)
        return False
    except ConfigError as e:
        errors.setdefault(prefix + (e.key or "type"), []).append(str(e))
        return False
    except (KctlError, ValueError, TypeError) as e:
        errors.setdefault(prefix + "type", []).append(f"{type(e).__name__}: {e}")
        return False
    return True


def _parse_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return None


def _instances(config: Mapping[str, Any], kind: str, resolve: Callable[[str], type],
               errors: dict[str, list[str]]) -> tuple[list[str], dict[str, Any]]:
    """The aliases listed under `kind` ("transforms" or "predicates"), and an unconfigured
    instance of each one whose `<kind>.<alias>.type` resolves: one way to read both lists."""
    aliases = _as_list(config.get(kind))
    if len(set(aliases)) != len(aliases):
        errors.setdefault(kind, []).append("Duplicate alias provided.")
    made: dict[str, Any] = {}
    for alias in dict.fromkeys(aliases):
        key = f"{kind}.{alias}.type"
        type_name = config.get(key)
        if not type_name:
            errors.setdefault(key, []).append(
                f'Missing required configuration "{key}" which has no default value.')
            continue
        try:
            made[alias] = resolve(str(type_name))()
        except Exception as e:  # unknown names, import failures, constructors that raise
            errors.setdefault(key, []).append(str(e))
    return aliases, made


def _build(config: Mapping[str, Any]) -> tuple[list[TransformationStage], dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    preds: dict[str, Predicate[Any]] = {}
    pred_aliases, predicates = _instances(config, "predicates", resolve_predicate, errors)
    for alias, pred in predicates.items():
        prefix = f"predicates.{alias}."
        if _configure(pred, _sub_props(config, prefix, {"type"}), prefix, errors):
            preds[alias] = pred

    stages: list[TransformationStage] = []
    _, transforms = _instances(config, "transforms", resolve_transformation, errors)
    for alias, transform in transforms.items():
        prefix = f"transforms.{alias}."
        negate = False
        if config.get(prefix + "negate") is not None:
            parsed = _parse_bool(config.get(prefix + "negate"))
            if parsed is None:
                errors.setdefault(prefix + "negate", []).append(
                    f"Invalid value {config.get(prefix + 'negate')} for configuration "
                    f"{prefix}negate: Expected value to be either true or false")
            else:
                negate = parsed
        pred_alias = config.get(prefix + "predicate")
        predicate = None
        if pred_alias:
            pred_alias = str(pred_alias).strip()
            if pred_alias not in pred_aliases:
                errors.setdefault(prefix + "predicate", []).append(
                    f"Predicate alias '{pred_alias}' is not defined in 'predicates' "
                    f"(defined: {', '.join(pred_aliases) or 'none'})")
            predicate = preds.get(pred_alias)
        elif config.get(prefix + "negate") is not None and negate:
            errors.setdefault(prefix + "negate", []).append(
                "negate=true has no effect without a predicate; set "
                f"{prefix}predicate")
        props = _sub_props(config, prefix, {"type", "predicate", "negate"})
        if _configure(transform, props, prefix, errors):
            stages.append(TransformationStage(alias, transform, predicate, negate,
                                              pred_alias or None))
    return stages, errors


def validate_transforms(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per-key errors for the `transforms`/`predicates` part of a connector config."""
    stages, errors = _build(config)
    for s in stages:
        _close_quietly(s)
    return errors


__all__ = [
    "BUILTIN_PREDICATES", "BUILTIN_TRANSFORMS", "TransformationChain",
    "TransformationStage", "known_predicates", "known_transforms", "resolve_predicate",
    "resolve_transformation", "validate_transforms",
]
