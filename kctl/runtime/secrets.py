"""Passwords kept out of what a worker shows: REST answers, statuses and log lines.

Which keys are secret: the keys a connector's ConfigDef declares as PASSWORD and, for keys
it does not declare (client pass-through settings such as
`producer.override.ssl.key.password` or `consumer.override.sasl.jaas.config`, whose types
live in the Kafka client's ConfigDef), keys named like one (`password`, `secret`,
`credentials`, `sasl.jaas.config`, ...). A declared key of another type is never secret,
whatever its name.

A password can also sit inside a value: a URL's user info (`postgresql://u:secret@host`)
or its `password=` parameter (`jdbc:mariadb://host/db?password=secret`). Those parts are
secrets whatever the key (see `url_passwords`).

Two mechanisms, because a secret can travel two ways:

- masking, by key: a secret key given literally is shown as `[hidden]` in every REST
  answer (config, info, tasks, validate). A value made only of placeholders
  (`${file:/etc/db.properties:password}`) is shown, since it names where the secret is,
  not what it is. A write that sends `[hidden]` back for a secret key keeps the stored
  value (see `restore_hidden`), so GET-edit-PUT round trips (kcctl's apply) work.
- redaction, by value: the values of secret keys, once known (literal or resolved at
  start), are replaced by `[hidden]` in every log record of the process, every status
  trace and every REST error message, wherever a connector or a library put them (an
  exception message, say). Only a whole value is replaced: where the secret stands as a
  word of its own (`password postgres`, `'postgres'`, `u:postgres@`), never where it is
  part of a longer word (`postgres` inside `jdbc:postgresql://`), so the rest of the text
  reads as it was written and no gap spells the secret out. Values shorter than
  MIN_SECRET_LENGTH are not redacted: such a value hides nothing.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.api.config import ConfigDef, ConfigType, Password
from kctl.runtime.config_providers import has_placeholder, only_placeholders

HIDDEN = Password.HIDDEN
_JAAS_PASSWORD = re.compile(r'\bpassword\s*=\s*"((?:[^"\\]|\\.)*)"')
MIN_SECRET_LENGTH = 4
_SECRET_WORDS = ("password", "secret", "credentials")
_SECRET_SUFFIXES = ("sasl.jaas.config", "basic.auth.user.info", "ssl.keystore.key", "ssl.key.pem",
                    "ssl.keystore.certificate.chain", "ssl.truststore.certificates")


# a URL's `user:password@` and its `password=` parameter (`?`, `&` or `;` before it, as in
# JDBC URLs of PostgreSQL, MariaDB and SQL Server)
_URL_USERINFO = re.compile(r"(://[^/?#@:\s]*:)([^/?#@\s]+)(@)")
_URL_PASSWORD = re.compile(r"(?i)([?&;]password=)([^&;#\s]*)")


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and ("://" in value or value.startswith("jdbc:"))


def url_passwords(value: Any) -> list[str]:
    """The passwords written into a URL value (placeholders are references, not secrets)."""
    if not _is_url(value):
        return []
    found = [m.group(2) for p in (_URL_USERINFO, _URL_PASSWORD) for m in p.finditer(value)]
    return [f for f in found if f and f != HIDDEN and not has_placeholder(f)]


def mask_url(value: str) -> str:
    """A URL with the passwords written into it shown as `[hidden]`."""
    if not url_passwords(value):
        return value

    def hide(m: re.Match[str]) -> str:
        secret = m.group(2)
        if not secret or has_placeholder(secret):
            return m.group(0)
        return m.group(1) + HIDDEN + (m.group(3) if m.lastindex == 3 else "")

    return _URL_PASSWORD.sub(hide, _URL_USERINFO.sub(hide, value))


def looks_secret(key: str) -> bool:
    """A key nothing declares, named like Kafka's PASSWORD-typed client settings."""
    k = key.lower()
    return any(w in k for w in _SECRET_WORDS) or k.endswith(_SECRET_SUFFIXES)


def secret_keys(config: Iterable[str], definition: ConfigDef | None) -> set[str]:
    """The keys of `config` whose values are secrets (see the module docstring)."""
    declared = definition.keys if definition is not None else {}
    out = set()
    for key in config:
        spec = declared.get(key)
        if (spec.type is ConfigType.PASSWORD) if spec is not None else looks_secret(key):
            out.add(key)
    return out


def mask(config: Mapping[str, str], definition: ConfigDef | None) -> dict[str, str]:
    """The config as REST shows it: secret keys given literally become `[hidden]`."""
    hidden = secret_keys(config, definition)
    return {k: (HIDDEN if k in hidden and v is not None and not only_placeholders(v)
                else mask_url(v) if _is_url(v) else v)
            for k, v in config.items()}


def restore_hidden(incoming: Mapping[str, Any], stored: Mapping[str, str] | None,
                   definition: ConfigDef | None) -> dict[str, Any]:
    """A write that sends `[hidden]` for a secret key means "unchanged": the stored value
    is kept rather than replaced by the mask (what a client that read the masked config
    sends back). `[hidden]` for a key with no stored value stays as it is (validation or
    the connector then see it literally)."""
    out = dict(incoming)
    if not stored:
        return out
    for key in secret_keys(incoming, definition):
        if out[key] == HIDDEN and key in stored:
            out[key] = stored[key]
    for key, value in out.items():  # a URL sent back as shown (maybe edited elsewhere)
        if isinstance(value, str) and HIDDEN in value and _is_url(stored.get(key)):
            out[key] = _url_restored(value, stored[key])
    return out


def _url_restored(incoming: str, stored: str) -> str:
    """`incoming` with its `[hidden]` passwords put back from the stored URL, in order
    (a host or parameter edited around them is kept); as sent when they do not line up."""
    secrets = url_passwords(stored)
    parts = incoming.split(HIDDEN)
    if len(parts) - 1 != len(secrets) or mask_url(incoming) != incoming:
        return incoming
    out = parts[0]
    for secret, rest in zip(secrets, parts[1:], strict=True):
        out += secret + rest
    return out


def _whole(secret: str) -> str:
    """A pattern of `secret` standing as a word of its own: a word character is neither
    just before it (when it starts with one) nor just after it (when it ends with one)."""
    before = r"(?<!\w)" if re.match(r"\w", secret[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
    return before + re.escape(secret) + after


class Redactor:
    """The secret values this process knows; `redact` replaces them in any text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[Any]) -> None:
        """Remember these values (and the escaped forms a repr or JSON text gives them)."""
        new: set[str] = set()
        for v in values:
            text = v.value() if isinstance(v, Password) else v
            if not isinstance(text, str) or len(text) < MIN_SECRET_LENGTH:
                continue
            new |= {text, repr(text)[1:-1], json.dumps(text)[1:-1]}
        with self._lock:
            if new <= self._values:
                return
            self._values |= new
            ordered = sorted(self._values, key=len, reverse=True)  # longest first
            self._pattern = re.compile("|".join(map(_whole, ordered)))

    def redact(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(HIDDEN, text)

    def __bool__(self) -> bool:
        return self._pattern is not None


REDACTOR = Redactor()
"""Process-wide, as logging is: every worker of the process adds its connectors' secrets."""


def register_secrets(config: Mapping[str, Any], definition: ConfigDef | None) -> None:
    """Add the values of the config's secret keys to the process's redactor; a value with
    placeholders is a reference, not a secret (its resolved value is added at start)."""
    keys = [k for k in secret_keys(config, definition) if not has_placeholder(config[k])]
    REDACTOR.add(config[k] for k in keys)
    REDACTOR.add(p for v in config.values() for p in url_passwords(v))
    # a JAAS entry's password alone may be logged too (a client quoting what it sent)
    REDACTOR.add(m.group(1) for k in keys if str(k).endswith("sasl.jaas.config")
                 for m in _JAAS_PASSWORD.finditer(str(config[k])))


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed call: logging reports it itself when formatting
        return
    redacted = REDACTOR.redact(message)
    if redacted != message:
        record.msg, record.args = redacted, None
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = REDACTOR.redact(text)
        if clean != text:
            # formatters print exc_text when set; dropping exc_info keeps a handler that
            # renders the exception itself from printing the secret
            record.exc_info, record.exc_text = None, clean
    if record.stack_info:
        record.stack_info = REDACTOR.redact(record.stack_info)


_install_lock = threading.Lock()
_installed = False


def install_log_redaction() -> None:
    """Redact known secrets from every log record the process creates, whichever handler
    writes it (the worker's stderr, a file, a test's capture): a LogRecord factory sees
    every record, where a handler filter would miss handlers added later."""
    global _installed
    with _install_lock:
        if _installed:
            return
        base = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = base(*args, **kwargs)
            if REDACTOR:
                _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
