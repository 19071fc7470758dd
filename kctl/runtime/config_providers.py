"""Config providers: secrets kept out of connector configs, as Kafka's ConfigProvider (KIP-297).

A config value may hold placeholders `${provider:path:key}` (or `${provider:key}`, an empty
path, as Kafka's `${env:VAR}`). The worker declares its providers:

    config.providers=file,env,dir
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.file.param.allowed.paths=/etc/kctl/secrets

and replaces the placeholders only when it starts a connector or a task, so the config
store, the REST answers and the task configs keep the placeholders and never the secret.

Unlike Kafka's ConfigTransformer, which leaves a placeholder it cannot resolve as it is (so
a connector later logs in with the literal text `${file:...}`), a strict transform fails
with one line naming the placeholder and the key: the connector fails with that line in
its status and the worker keeps running. Validation transforms leniently (Kafka's way),
because the secret may live only on the worker that will run the task.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kctl.errors import ConfigError

CONFIG_PROVIDERS_CONFIG = "config.providers"
PROVIDER_PREFIX = "config.providers."
ALLOWED_PATHS_CONFIG = "allowed.paths"
ALLOWLIST_PATTERN_CONFIG = "allowlist.pattern"

# Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key}
PLACEHOLDER = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")


class ConfigProvider:
    """Where placeholder values come from; subclass it for a provider of your own and name
    it by dotted path in `config.providers.<name>.class`.

    `configure` receives the `config.providers.<name>.param.*` settings (prefix removed).
    `get` answers the keys it has under `path`; a key it does not have is simply absent
    (the transformer says which placeholder could not be resolved). Raise ConfigError for a
    path that cannot be read, with a message that names the path, never a value.
    """

    def configure(self, configs: Mapping[str, str]) -> None:
        """Take the provider's parameters (none by default)."""

    def get(self, path: str, keys: Iterable[str] | None = None) -> dict[str, str]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what configure() took (nothing by default)."""


class _AllowedPaths:
    """Kafka's `allowed.paths` (KIP-993): when set, only files under these directories can
    be read, so a connector config cannot read arbitrary files of the worker's host."""

    def __init__(self, configs: Mapping[str, str], provider: str):
        raw = str(configs.get(ALLOWED_PATHS_CONFIG) or "")
        self.roots: list[str] = []
        for entry in (p.strip() for p in raw.split(",")):
            if not entry:
                continue
            if not os.path.isabs(entry):
                raise ConfigError(f"{provider}: {ALLOWED_PATHS_CONFIG} entries must be "
                                  f"absolute paths, got {entry!r}", key=ALLOWED_PATHS_CONFIG)
            self.roots.append(os.path.realpath(entry))

    def check(self, path: str) -> str:
        """The path as it will be read; ConfigError when it is outside every allowed root."""
        if not self.roots:
            return path
        real = os.path.realpath(path)  # `..` and symlinks cannot leave an allowed root
        if any(real == root or real.startswith(root.rstrip(os.sep) + os.sep)
               for root in self.roots):
            return real
        raise ConfigError(f"path {path} is not in {ALLOWED_PATHS_CONFIG} "
                          f"({', '.join(self.roots)})")


class FileConfigProvider(ConfigProvider):
    """`${file:/path/to/file.properties:key}`: a key of a Java-properties file."""

    def configure(self, configs: Mapping[str, str]) -> None:
        self._allowed = _AllowedPaths(configs, "FileConfigProvider")

    def get(self, path: str, keys: Iterable[str] | None = None) -> dict[str, str]:
        from kctl.runtime.worker_config import parse_properties

        if not path:
            return {}
        allowed = getattr(self, "_allowed", None)
        real = allowed.check(path) if allowed else path
        try:
            text = Path(real).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
            raise ConfigError(f"could not read properties from file {path}: {why}") from None
        props = parse_properties(text)
        return dict(props) if keys is None else {k: props[k] for k in keys if k in props}


class DirectoryConfigProvider(ConfigProvider):
    """`${dir:/path/to/dir:name}`: the contents of the file `name` in the directory, as
    Kubernetes mounts secrets (only regular files directly in the directory)."""

    def configure(self, configs: Mapping[str, str]) -> None:
        self._allowed = _AllowedPaths(configs, "DirectoryConfigProvider")

    def get(self, path: str, keys: Iterable[str] | None = None) -> dict[str, str]:
        if not path:
            return {}
        allowed = getattr(self, "_allowed", None)
        real = Path(allowed.check(path) if allowed else path)
        if not real.is_dir():
            raise ConfigError(f"{path} is not a directory")
        wanted = None if keys is None else set(keys)
        out: dict[str, str] = {}
        for entry in real.iterdir():
            if (wanted is not None and entry.name not in wanted) or not entry.is_file():
                continue
            if allowed and allowed.roots:
                allowed.check(str(entry))  # a symlink inside may point elsewhere
            try:
                out[entry.name] = entry.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"could not read file {entry} for property {entry.name}: "
                                  f"{getattr(e, 'strerror', None) or type(e).__name__}") from None
        return out


class EnvVarConfigProvider(ConfigProvider):
    """`${env:VAR}`: an environment variable of the worker process. `allowlist.pattern`
    (a regex, default everything) limits which variables a config may read."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        self._environ = environ

    def configure(self, configs: Mapping[str, str]) -> None:
        pattern = configs.get(ALLOWLIST_PATTERN_CONFIG)
        try:
            self._pattern = re.compile(str(pattern)) if pattern is not None else None
        except re.error as e:
            raise ConfigError(f"EnvVarConfigProvider: invalid {ALLOWLIST_PATTERN_CONFIG} "
                              f"{pattern!r}: {e}", key=ALLOWLIST_PATTERN_CONFIG) from e

    def get(self, path: str, keys: Iterable[str] | None = None) -> dict[str, str]:
        if path:
            raise ConfigError(f"path is not supported for EnvVarConfigProvider, invalid value "
                              f"{path!r} (write ${{env:VAR}})")
        environ = os.environ if self._environ is None else self._environ
        pattern = getattr(self, "_pattern", None)
        names = environ.keys() if keys is None else [k for k in keys if k in environ]
        return {k: environ[k] for k in names if pattern is None or pattern.search(k)}


# The names `config.providers.<name>.class` accepts besides a dotted Python path.
_KAFKA = "org.apache.kafka.common.config.provider."
PROVIDER_CLASSES: dict[str, type[ConfigProvider]] = {}
for _cls, _aliases in ((FileConfigProvider, ("file",)),
                       (DirectoryConfigProvider, ("dir", "directory")),
                       (EnvVarConfigProvider, ("env",))):
    for _alias in (*_aliases, _cls.__name__, _KAFKA + _cls.__name__,
                   f"{__name__}.{_cls.__name__}"):
        PROVIDER_CLASSES[_alias] = _cls


def load_provider_class(name: str, key: str) -> type[Any]:
    """An alias, a Kafka class name or `package.module.Class` of a provider with `get`."""
    if name in PROVIDER_CLASSES:
        return PROVIDER_CLASSES[name]
    module, _, attr = name.rpartition(".")
    if not module:
        raise ConfigError(f"Invalid value {name!r} for configuration {key}: not a known "
                          f"provider (file, env, dir, or Kafka's class names) nor a dotted "
                          f"Python path", key=key)
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"Invalid value {name!r} for configuration {key}: cannot load it "
                          f"({type(e).__name__}: {e})", key=key) from e
    if not isinstance(cls, type) or not callable(getattr(cls, "get", None)):
        raise ConfigError(f"Invalid value {name!r} for configuration {key}: not a config "
                          "provider class (it needs get(path, keys))", key=key)
    return cls


def providers_from_config(props: Mapping[str, Any]) -> dict[str, ConfigProvider]:
    """The providers `config.providers` names, each configured with its `param.*` keys."""
    raw = props.get(CONFIG_PROVIDERS_CONFIG) or ""
    names = [n.strip() for n in (raw.split(",") if isinstance(raw, str) else raw)
             if str(n).strip()]
    providers: dict[str, ConfigProvider] = {}
    for name in names:
        key = f"{PROVIDER_PREFIX}{name}.class"
        class_name = props.get(key)
        if not class_name:
            raise ConfigError(f"Missing required configuration {key!r}: config.providers "
                              f"names {name!r}, which needs a class (e.g. "
                              f"{_KAFKA}FileConfigProvider)", key=key)
        cls = load_provider_class(str(class_name).strip(), key)
        param = f"{PROVIDER_PREFIX}{name}.param."
        params = {k[len(param):]: str(v) for k, v in props.items() if k.startswith(param)}
        try:
            provider = cls()
            provider.configure(params)
        except ConfigError as e:
            raise ConfigError(f"config provider {name!r}: {e}", key=e.key or key) from e
        except Exception as e:
            raise ConfigError(f"config provider {name!r} ({class_name}) failed to configure: "
                              f"{type(e).__name__}: {e}", key=key) from e
        providers[name] = provider
    return providers


class ConfigResolutionError(ConfigError):
    """A placeholder that could not be resolved; the message names the key and the
    placeholder (the reference), never a resolved value."""


def has_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


def only_placeholders(value: Any) -> bool:
    """The whole value is made of placeholders: it says where a secret is, not what it is."""
    return isinstance(value, str) and bool(value) and \
        not PLACEHOLDER.sub("", value) and has_placeholder(value)


@dataclass
class Transformed:
    """A transformed config and, per key, whether any placeholder in it was resolved."""

    data: dict[str, str]
    resolved_keys: set[str] = field(default_factory=set)


class ConfigTransformer:
    """Replaces placeholders with what the providers answer (Kafka's ConfigTransformer):
    one `get(path, keys)` per provider and path, whatever number of keys use it."""

    def __init__(self, providers: Mapping[str, ConfigProvider]):
        self.providers = dict(providers)

    def transform(self, config: Mapping[str, str], *, strict: bool = True,
                  what: str = "config") -> Transformed:
        """`strict`: an unknown provider or a missing path or key raises
        ConfigResolutionError; otherwise the placeholder stays as it is (Kafka's way)."""
        wanted: dict[tuple[str, str], set[str]] = {}
        first_use: dict[tuple[str, str], tuple[str, str]] = {}  # (provider, path) -> key, text
        for key, value in config.items():
            if not isinstance(value, str):
                continue
            for m in PLACEHOLDER.finditer(value):
                provider, path, var = m.group(1), m.group(2) or "", m.group(3)
                if provider not in self.providers:
                    if strict:
                        known = ", ".join(sorted(self.providers)) or "none"
                        raise ConfigResolutionError(
                            f"cannot resolve {m.group(0)} in {what} key {key}: no config "
                            f"provider {provider!r} (config.providers: {known})", key=key)
                    continue
                wanted.setdefault((provider, path), set()).add(var)
                first_use.setdefault((provider, path), (key, m.group(0)))
        found: dict[tuple[str, str], dict[str, str]] = {}
        for (provider, path), keys in wanted.items():
            try:
                found[(provider, path)] = self.providers[provider].get(path, set(keys))
            except Exception as e:
                if not strict:
                    continue
                key, text = first_use[(provider, path)]
                why = str(e) if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}"
                raise ConfigResolutionError(
                    f"cannot resolve {text} in {what} key {key}: {why}", key=key) from None
        out: dict[str, str] = {}
        resolved: set[str] = set()
        for key, value in config.items():
            if not has_placeholder(value):
                out[key] = value
                continue

            def replace(m: re.Match[str], key: str = key) -> str:
                provider, path, var = m.group(1), m.group(2) or "", m.group(3)
                values = found.get((provider, path))
                if values is not None and var in values:
                    resolved.add(key)
                    return str(values[var])
                if strict:
                    where = f" in {path}" if path else ""
                    raise ConfigResolutionError(
                        f"cannot resolve {m.group(0)} in {what} key {key}: no key "
                        f"{var!r}{where} (config provider {provider!r})", key=key)
                return m.group(0)

            out[key] = PLACEHOLDER.sub(replace, value)
        return Transformed(out, resolved)

    def reverse(self, raw: Mapping[str, str], resolved: Mapping[str, str],
                secret_keys: Iterable[str], generated: Mapping[str, str]) -> dict[str, str]:
        """Put placeholders back into what a connector generated from its resolved config
        (Kafka's AbstractHerder.reverseTransform), so task configs are stored and shown
        with references, not secrets: a key the connector config resolved gets its raw
        value back; and, beyond Kafka, a value equal to what a secret key resolved to gets
        that key's placeholder back under whatever key the connector copied it to."""
        out = dict(generated)
        by_value = {resolved[k]: raw[k] for k in secret_keys
                    if k in raw and k in resolved and has_placeholder(raw[k]) and resolved[k]}
        for key, value in generated.items():
            if key in raw and has_placeholder(raw[key]):
                out[key] = raw[key]
            elif value in by_value:
                out[key] = by_value[value]
        return out

    def close(self) -> None:
        for p in self.providers.values():
            with contextlib.suppress(Exception):  # closing must not stop a shutdown
                p.close()
