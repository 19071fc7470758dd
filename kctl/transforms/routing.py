"""RegexRouter and Filter."""

from __future__ import annotations

import re
from typing import Any

from kctl.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance
from kctl.api.records import ConnectRecord
from kctl.api.transform import Transformation
from kctl.errors import ConfigError
from kctl.transforms._base import ConfiguredTransformation, java_regex, java_regex_validator


def java_replacement(template: str, m: re.Match[str]) -> str:
    """Expand a java.util.regex replacement (`$1`, `${name}`, `\\$`) against a match."""
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        c = template[i]
        if c == "\\":
            if i + 1 >= n:
                raise ConfigError("character to be escaped is missing", key="replacement")
            out.append(template[i + 1])
            i += 2
        elif c == "$":
            i += 1
            if i < n and template[i] == "{":
                j = template.find("}", i)
                if j < 0:
                    raise ConfigError("named capturing group is missing trailing '}'",
                                      key="replacement")
                out.append(m.group(template[i + 1:j]) or "")
                i = j + 1
                continue
            j = i
            while j < n and template[j].isdigit():
                j += 1
            if j == i:
                raise ConfigError("Illegal group reference", key="replacement")
            # As Java: take the longest group number that exists.
            num = template[i:j]
            while len(num) > 1 and int(num) > (m.re.groups or 0):
                num = num[:-1]
            if int(num) > (m.re.groups or 0):
                raise ConfigError(f"No group {num}", key="replacement")
            out.append(m.group(int(num)) or "")
            i += len(num)
        else:
            out.append(c)
            i += 1
    return "".join(out)


class RegexRouter(ConfiguredTransformation, Transformation[Any]):
    """Rename the topic when it fully matches `regex`, using `replacement` ($1 refers to groups)."""

    CONFIG_DEF = (
        ConfigDef()
        .define("regex", ConfigType.STRING, NO_DEFAULT, java_regex_validator, Importance.HIGH,
                "Regular expression to use for matching.")
        .define("replacement", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH,
                "Replacement string."))

    def configured(self) -> None:
        self.regex = java_regex(self.cfg["regex"])
        self.replacement = self.cfg["replacement"]

    def apply(self, record: ConnectRecord) -> Any:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        return record.new_record(topic=java_replacement(self.replacement, m))


class Filter(Transformation[Any]):
    """Drops every record; used with a predicate to drop only some."""

    def apply(self, record: ConnectRecord) -> Any:
        return None
