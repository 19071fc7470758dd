"""Named worker URLs, as kcctl's contexts: `kctl context set prod --url ...; use prod`.

Stored as YAML in the user's config directory (`$XDG_CONFIG_HOME/kctl/config.yaml`, or
`KCTL_CONFIG` naming the file). The URL a command uses is, first found: `--url`,
`KCTL_URL`, `--context NAME`, the current context, http://127.0.0.1:8083.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kctl.durable import atomic_write
from kctl.errors import ConfigError, NotFoundError

CONFIG_ENV = "KCTL_CONFIG"
FIELDS = ("url", "cacert", "user", "password")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def config_path() -> Path:
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kctl" / "config.yaml"


@dataclass
class Contexts:
    """The file's content: contexts by name (each a dict with `url`) and the current one."""

    contexts: dict[str, dict[str, str]] = field(default_factory=dict)
    current: str | None = None
    path: Path = field(default_factory=config_path)

    @classmethod
    def load(cls, path: Path | None = None) -> Contexts:
        path = path or config_path()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            return cls(path=path)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read kctl contexts from {path}: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("contexts", {}), dict):
            raise ConfigError(f"{path}: expected a mapping with `contexts` and `current-context`")
        contexts = {str(k): {f: str(v[f]) for f in FIELDS if isinstance(v, dict) and
                             v.get(f) is not None} | {"url": str((v or {}).get("url", ""))}
                    for k, v in doc.get("contexts", {}).items()}
        current = doc.get("current-context")
        return cls(contexts, str(current) if current else None, path)

    def save(self) -> None:
        doc: dict[str, Any] = {"current-context": self.current, "contexts": self.contexts}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, yaml.safe_dump(doc, sort_keys=True).encode(), fsync=True)
        os.chmod(self.path, 0o600)  # it may hold a password

    def set(self, name: str, url: str, *, cacert: str | None = None, user: str | None = None,
            password: str | None = None) -> None:
        if not _NAME.match(name):
            raise ConfigError(f"invalid context name {name!r}: use letters, digits, '.', '_', '-'")
        if not re.match(r"^https?://[^\s/]+", url):
            raise ConfigError(f"invalid URL {url!r}: expected http://HOST:PORT or https://...")
        entry = {"url": url.rstrip("/")}
        if cacert:
            path = Path(cacert).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"--cacert {cacert}: no such file")
            entry["cacert"] = str(path)
        if user:
            entry["user"], entry["password"] = user, password or ""
        self.contexts[name] = entry
        if self.current is None:
            self.current = name

    def use(self, name: str) -> None:
        self.get(name)
        self.current = name

    def delete(self, name: str) -> None:
        self.get(name)
        del self.contexts[name]
        if self.current == name:
            self.current = None

    def get(self, name: str) -> dict[str, str]:
        try:
            return self.contexts[name]
        except KeyError:
            known = ", ".join(sorted(self.contexts)) or "none yet"
            raise NotFoundError(f"no context named {name!r} (known: {known}; "
                                f"add one with `kctl context set {name} --url URL`)") from None

    def connection(self, name: str | None = None) -> dict[str, str] | None:
        """The context `name`, or the current one: url, and cacert, user, password when set."""
        if name:
            return self.get(name)
        if self.current and self.current in self.contexts:
            return self.contexts[self.current]
        return None

    def url(self, name: str | None = None) -> str | None:
        """The URL of context `name`, or of the current one (None when there is none)."""
        if name:
            return self.get(name)["url"]
        if self.current and self.current in self.contexts:
            return self.contexts[self.current]["url"]
        return None
