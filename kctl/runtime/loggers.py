"""Log levels changed at run time, as Kafka Connect's `/admin/loggers` (KIP-495).

Levels are named as log4j names them (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF), so the
requests and answers Connect users know work unchanged; they map onto Python logging, with
TRACE registered below DEBUG. Setting a logger's level sets it on every logger below it
that has a level of its own too (the others inherit it), and answers their names.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kctl.errors import NotFoundError, ValidationError

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
ROOT = "root"

_BY_NAME = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
            "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
            "OFF": logging.CRITICAL + 10}
_NAME_OF = {v: k for k, v in _BY_NAME.items()} | {logging.WARNING: "WARN"}
LEVELS = tuple(_BY_NAME)


def level_name(level: int) -> str:
    """The log4j name of a Python level (the nearest one below it for a custom level)."""
    if level in _NAME_OF:
        return _NAME_OF[level]
    below = [v for v in _NAME_OF if v <= level]
    return _NAME_OF[max(below)] if below else "TRACE"


def parse_level(name: Any) -> int:
    if name is None:
        raise ValidationError(
            f"The request names no 'level': use one of {', '.join(_BY_NAME)}",
            {"level": ["missing"]})
    text = str(name).strip().upper()
    if text == "WARNING":
        text = "WARN"
    if text not in _BY_NAME:
        raise ValidationError(
            f"Invalid log level {name!r}: use one of {', '.join(_BY_NAME)}",
            {"level": ["invalid log level"]})
    return _BY_NAME[text]


class Loggers:
    """The worker's loggers: their effective levels and when kctl last changed each."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self._modified: dict[str, int] = {}  # logger name -> ms since the epoch

    @staticmethod
    def _logger(name: str) -> logging.Logger:
        return logging.getLogger() if name == ROOT else logging.getLogger(name)

    @staticmethod
    def _known() -> list[str]:
        return sorted(n for n, v in logging.root.manager.loggerDict.items()
                      if isinstance(v, logging.Logger))

    def _entry(self, name: str) -> dict[str, Any]:
        return {"level": level_name(self._logger(name).getEffectiveLevel()),
                "last_modified": self._modified.get(name)}

    def all(self) -> dict[str, dict[str, Any]]:
        """Root and every logger with a level of its own (others inherit theirs)."""
        with self._lock:
            named = [n for n in self._known() if self._logger(n).level != logging.NOTSET]
            return {n: self._entry(n) for n in [ROOT, *named]}

    def get(self, name: str) -> dict[str, Any]:
        with self._lock:
            if name != ROOT and name not in self._known():
                raise NotFoundError(f"Logger {name} not found")
            return self._entry(name)

    def set(self, name: str, level: Any) -> list[str]:
        """Set `name` and its descendants that have their own level; the names touched."""
        value = parse_level(level)
        now = int(self._clock() * 1000)
        with self._lock:
            prefix = "" if name == ROOT else name + "."
            below = [n for n in self._known() if n.startswith(prefix) and n != name]
            self._logger(name).setLevel(value)
            touched = [name]
            for child in below:
                logger = self._logger(child)
                if logger.level != logging.NOTSET:
                    logger.setLevel(value)
                touched.append(child)
            for n in touched:
                self._modified[n] = now
            return sorted(touched)
