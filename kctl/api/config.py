"""ConfigDef: typed, documented, validated configuration, as Kafka's ConfigDef.

Every connector, transform and the worker itself declare their keys here, so REST
validation, CLI tables and the configuration reference all come from one definition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from kctl.errors import ConfigError, ValidationError


class ConfigType(Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class Password:
    """A secret that never prints itself (REST answers, statuses and logs show [hidden])."""

    HIDDEN = "[hidden]"
    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


Validator = Callable[[str, Any], None]
"""Raises ConfigError with a message when the parsed value is invalid."""


class Recommender(Protocol):
    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]: ...

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool: ...


# --- validators -------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    min: float | None = None
    max: float | None = None

    @classmethod
    def at_least(cls, min_: float) -> Range:
        return cls(min_, None)

    @classmethod
    def between(cls, min_: float, max_: float) -> Range:
        return cls(min_, max_)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.min is not None and value < self.min:
            raise ConfigError(f"Value must be at least {self.min:g}", key=name)
        if self.max is not None and value > self.max:
            raise ConfigError(f"Value must be no more than {self.max:g}", key=name)

    def __str__(self) -> str:
        lo = "..." if self.min is None else f"{self.min:g}"
        hi = "..." if self.max is None else f"{self.max:g}"
        return f"[{lo},...,{hi}]"


@dataclass(frozen=True)
class ValidString:
    values: tuple[str, ...]
    case_sensitive: bool = False

    @classmethod
    def in_(cls, *values: str, case_sensitive: bool = False) -> ValidString:
        return cls(tuple(values), case_sensitive)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        allowed = self.values if self.case_sensitive else [v.lower() for v in self.values]
        v = value if self.case_sensitive else str(value).lower()
        if v not in allowed:
            raise ConfigError(f"String must be one of: {', '.join(self.values)}", key=name)

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True)
class NonEmptyString:
    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not str(value).strip():
            raise ConfigError("String must be non-empty", key=name)

    def __str__(self) -> str:
        return "non-empty string"


@dataclass(frozen=True)
class Regex:
    """The value must itself be a valid regular expression."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            re.compile(value)
        except re.error as e:
            raise ConfigError(f"Invalid regular expression: {e}", key=name) from e

    def __str__(self) -> str:
        return "regular expression"


# --- definitions ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    validator: Validator | None
    importance: Importance
    doc: str
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str | None = None
    dependents: tuple[str, ...] = ()
    recommender: Recommender | None = None
    internal: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass
class ConfigValue:
    """The outcome of validating one key, shaped like Kafka's (REST /validate reuses it)."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True


def _parse_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError("Expected value to be either true or false")


def _parse_int(v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool):
        raise ValueError("Expected an integer, got a boolean")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str):
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError("Expected an integer") from None
    elif isinstance(v, float) and v.is_integer():
        n = int(v)
    else:
        raise ValueError(f"Expected an integer, got {v!r}")
    if not lo <= n <= hi:
        raise ValueError(f"Value {n} out of range")
    return n


def parse_type(name: str, value: Any, type_: ConfigType) -> Any:
    """Parse a raw (usually string) value into its declared type; ConfigError on failure."""
    if value is None:
        return None
    try:
        match type_:
            case ConfigType.BOOLEAN:
                return _parse_bool(value)
            case ConfigType.STRING | ConfigType.CLASS:
                if not isinstance(value, str):
                    raise ValueError(f"Expected a string, got {type(value).__name__}")
                return value.strip() if type_ is ConfigType.CLASS else value
            case ConfigType.PASSWORD:
                return value if isinstance(value, Password) else Password(str(value))
            case ConfigType.SHORT:
                return _parse_int(value, -(2**15), 2**15 - 1)
            case ConfigType.INT:
                return _parse_int(value, -(2**31), 2**31 - 1)
            case ConfigType.LONG:
                return _parse_int(value, -(2**63), 2**63 - 1)
            case ConfigType.DOUBLE:
                if isinstance(value, bool):
                    raise ValueError("Expected a number, got a boolean")
                return float(value)
            case ConfigType.LIST:
                if isinstance(value, str):
                    return [p.strip() for p in value.split(",") if p.strip()]
                if isinstance(value, list | tuple):
                    return [str(p) for p in value]
                raise ValueError(f"Expected a comma-separated list, got {value!r}")
    except ValueError as e:
        raise ConfigError(
            f"Invalid value {value!r} for configuration {name}: {e}", key=name
        ) from e
    raise AssertionError(type_)


class ConfigDef:
    """An ordered set of ConfigKeys with parsing, validation and documentation."""

    def __init__(self, keys: Iterable[ConfigKey] = ()):
        self._keys: dict[str, ConfigKey] = {}
        for k in keys:
            self._add(k)

    def _add(self, key: ConfigKey) -> None:
        if key.name in self._keys:
            raise ConfigError(f"Configuration {key.name} is defined twice", key=key.name)
        self._keys[key.name] = key

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        doc: str = "",
        *,
        group: str | None = None,
        order_in_group: int = -1,
        width: Width = Width.NONE,
        display_name: str | None = None,
        dependents: Sequence[str] = (),
        recommender: Recommender | None = None,
        internal: bool = False,
    ) -> ConfigDef:
        if default is not NO_DEFAULT and default is not None:
            default = parse_type(name, default, type)
            if validator:
                validator(name, default)
        self._add(ConfigKey(name, type, default, validator, importance, doc, group,
                            order_in_group, width, display_name, tuple(dependents),
                            recommender, internal))
        return self

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new ConfigDef with both sets of keys (e.g. common connector keys + plugin keys)."""
        merged = ConfigDef(self._keys.values())
        for k in other._keys.values():
            if k.name not in merged._keys:
                merged._add(k)
        return merged

    @property
    def keys(self) -> Mapping[str, ConfigKey]:
        return self._keys

    def names(self) -> list[str]:
        return list(self._keys)

    def groups(self) -> list[str]:
        seen: dict[str, None] = {}
        for k in self._keys.values():
            if k.group:
                seen.setdefault(k.group, None)
        return list(seen)

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Parse and validate every defined key; raise ValidationError listing all problems."""
        values = self.validate(props)
        errors = {v.name: v.errors for v in values if v.errors}
        if errors:
            first = next(iter(errors.items()))
            raise ValidationError(
                f"Invalid configuration {first[0]}: {first[1][0]}"
                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                errors,
            )
        return {v.name: v.value for v in values}

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Per-key results with errors instead of exceptions (what REST /validate returns)."""
        parsed: dict[str, Any] = {}
        results: dict[str, ConfigValue] = {}
        for key in self._keys.values():
            cv = ConfigValue(key.name)
            results[key.name] = cv
            if key.name in props and props[key.name] is not None:
                try:
                    cv.value = parse_type(key.name, props[key.name], key.type)
                except ConfigError as e:
                    cv.value = props[key.name]
                    cv.errors.append(str(e))
                    continue
            elif key.has_default:
                cv.value = key.default
            else:
                cv.errors.append(f"Missing required configuration \"{key.name}\" which has no default value.")
                continue
            if key.validator is not None and cv.value is not None:
                try:
                    key.validator(key.name, cv.value)
                except ConfigError as e:
                    cv.errors.append(f"Invalid value {props.get(key.name, cv.value)} for configuration {key.name}: {e}")
            parsed[key.name] = cv.value
        for key in self._keys.values():
            if key.recommender is not None:
                cv = results[key.name]
                try:
                    cv.recommended_values = list(key.recommender.valid_values(key.name, parsed))
                    cv.visible = key.recommender.visible(key.name, parsed)
                except Exception as e:  # a broken recommender must not break validation
                    cv.errors.append(f"Recommender failed: {e}")
                chosen = cv.value if isinstance(cv.value, list) else [cv.value]
                if (cv.recommended_values and cv.value is not None and not cv.errors
                        and any(v not in cv.recommended_values for v in chosen)):
                    # (a LIST's items are each one of them, not the list itself)
                    cv.errors.append(
                        f"Invalid value {cv.value} for configuration {key.name}: "
                        f"must be one of {cv.recommended_values}")
        return list(results.values())

    def to_markdown(self) -> str:
        """A reference table for the user guide, generated so docs never drift from code."""
        rows = ["| name | type | default | valid values | importance | description |",
                "| --- | --- | --- | --- | --- | --- |"]
        for k in self._keys.values():
            if k.internal:
                continue
            default = "" if not k.has_default else ("null" if k.default is None else
                                                    _fmt_default(k.default))
            valid = str(k.validator) if k.validator else ""
            doc = k.doc.replace("|", "\\|").replace("\n", " ")
            rows.append(f"| `{k.name}` | {k.type.value.lower()} | {default} | {valid} | "
                        f"{k.importance.value.lower()} | {doc} |")
        return "\n".join(rows) + "\n"


def _fmt_default(v: Any) -> str:
    if isinstance(v, list):
        return "`" + ",".join(v) + "`" if v else '""'
    if isinstance(v, bool):
        return f"`{str(v).lower()}`"
    if v == "":
        return '""'
    return f"`{v}`"


class AbstractConfig:
    """Parsed values with typed getters; `originals` keeps what the user wrote."""

    def __init__(self, definition: ConfigDef, props: Mapping[str, Any]):
        self.definition = definition
        self.originals: dict[str, Any] = dict(props)
        self.values = definition.parse(props)

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigError(f"Unknown configuration {name!r}", key=name)
        return self.values[name]

    def get_int(self, name: str) -> int:
        return int(self.get(name))

    def get_str(self, name: str) -> str:
        return str(self.get(name))

    def get_bool(self, name: str) -> bool:
        return bool(self.get(name))

    def get_list(self, name: str) -> list[str]:
        return list(self.get(name) or [])

    def get_password(self, name: str) -> Password | None:
        value: Password | None = self.get(name)
        return value

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, Any]:
        return {(k[len(prefix):] if strip else k): v for k, v in self.originals.items()
                if k.startswith(prefix)}
