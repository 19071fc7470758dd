"""Java SimpleDateFormat patterns (as Kafka's SMTs take them), formatted and parsed in UTC."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache

from kctl.errors import ConfigError, DataError

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_NUMERIC = set("yMdHhkKmsSDu")
_SUPPORTED = _NUMERIC | set("EazZXG")


@dataclass(frozen=True)
class _Tok:
    letter: str  # "" for literal text
    count: int
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC and not (self.letter == "M" and self.count >= 3)


@lru_cache(maxsize=64)
def tokenize(pattern: str) -> tuple[_Tok, ...]:
    """Split a SimpleDateFormat pattern; ConfigError for letters it does not support."""
    toks: list[_Tok] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j == i + 1:
                toks.append(_Tok("", 0, "'"))
                i += 2
                continue
            if j < 0:
                raise ConfigError(f"Unterminated quote in date pattern {pattern!r}")
            toks.append(_Tok("", 0, pattern[i + 1:j].replace("''", "'")))
            i = j + 1
        elif c.isalpha() and c.isascii():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            if c not in _SUPPORTED:
                raise ConfigError(f"Illegal pattern character '{c}' in date pattern {pattern!r}")
            toks.append(_Tok(c, j - i))
            i = j
        else:
            toks.append(_Tok("", 0, c))
            i += 1
    return tuple(toks)


def validate_pattern(pattern: str) -> None:
    tokenize(pattern)


def format_datetime(value: dt.datetime, pattern: str) -> str:
    """Format an instant in UTC with a SimpleDateFormat pattern."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    v = value.astimezone(dt.UTC)
    out: list[str] = []
    for t in tokenize(pattern):
        c, k = t.letter, t.count
        if not c:
            out.append(t.text)
        elif c == "y":
            out.append(f"{v.year % 100:02d}" if k == 2 else f"{v.year:0{k}d}")
        elif c == "M":
            out.append(_MONTHS[v.month - 1] if k >= 4 else _MONTHS[v.month - 1][:3] if k == 3
                       else f"{v.month:0{k}d}")
        elif c == "d":
            out.append(f"{v.day:0{k}d}")
        elif c == "H":
            out.append(f"{v.hour:0{k}d}")
        elif c == "k":
            out.append(f"{v.hour or 24:0{k}d}")
        elif c == "K":
            out.append(f"{v.hour % 12:0{k}d}")
        elif c == "h":
            out.append(f"{(v.hour % 12) or 12:0{k}d}")
        elif c == "m":
            out.append(f"{v.minute:0{k}d}")
        elif c == "s":
            out.append(f"{v.second:0{k}d}")
        elif c == "S":
            out.append(f"{v.microsecond // 1000:0{k}d}")
        elif c == "D":
            out.append(f"{v.timetuple().tm_yday:0{k}d}")
        elif c == "u":
            out.append(str(v.isoweekday()))
        elif c == "E":
            out.append(_DAYS[v.weekday()] if k >= 4 else _DAYS[v.weekday()][:3])
        elif c == "a":
            out.append("AM" if v.hour < 12 else "PM")
        elif c == "G":
            out.append("AD")
        elif c == "z":
            out.append("UTC" if k < 4 else "Coordinated Universal Time")
        elif c == "Z":
            out.append("+0000")
        elif c == "X":
            out.append("Z")
    return "".join(out)


@lru_cache(maxsize=64)
def _parser(pattern: str) -> re.Pattern[str]:
    toks = tokenize(pattern)
    parts: list[str] = []
    used: set[str] = set()
    for i, t in enumerate(toks):
        c, k = t.letter, t.count
        if not c:
            parts.append(re.escape(t.text))
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        group = c if c not in used else None
        used.add(c)
        if t.numeric:
            width = rf"\d{{{k}}}" if (nxt is not None and nxt.numeric) else rf"\d{{1,{max(k, 9)}}}"
            if c == "y" and k == 2:
                width = r"\d{2}"
            parts.append(f"(?P<{group}>{width})" if group else width)
        elif c == "M":
            names = "|".join(_MONTHS + [m[:3] for m in _MONTHS])
            parts.append(f"(?P<M>{names})" if group else f"(?:{names})")
        elif c == "E":
            parts.append("(?:" + "|".join(_DAYS + [d[:3] for d in _DAYS]) + ")")
        elif c == "a":
            parts.append("(?P<a>AM|PM|am|pm)" if group else "(?:AM|PM|am|pm)")
        elif c == "G":
            parts.append("(?:AD|BC)")
        else:  # z, Z, X: a zone
            zone = r"Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?"
            parts.append(f"(?P<{c}>{zone})" if group else f"(?:{zone})")
    return re.compile("".join(parts), re.IGNORECASE)


def _zone_offset(z: str) -> dt.timedelta:
    if z.upper() in ("Z", "UTC", "GMT"):
        return dt.timedelta(0)
    sign = -1 if z[0] == "-" else 1
    digits = z[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return sign * dt.timedelta(hours=hours, minutes=minutes)


def parse_datetime(text: str, pattern: str) -> dt.datetime:
    """Parse `text` with a SimpleDateFormat pattern into an aware UTC datetime."""
    m = _parser(pattern).fullmatch(text.strip())
    if m is None:
        raise DataError(f"Could not parse timestamp: value ({text}) does not match pattern "
                        f"({pattern})")
    g = m.groupdict()

    def num(key: str, default: int) -> int:
        return int(g[key]) if g.get(key) else default

    year = num("y", 1970)
    if g.get("y") and len(g["y"]) == 2:
        year += 2000 if year < 80 else 1900
    month_s = g.get("M")
    if month_s and not month_s.isdigit():
        month = next(i + 1 for i, name in enumerate(_MONTHS)
                     if name.lower().startswith(month_s.lower()[:3]))
    else:
        month = num("M", 1)
    hour = num("H", -1)
    if hour < 0:
        hour = num("k", 0) % 24 if g.get("k") else -1
    if hour < 0:
        h12 = num("h", 12) % 12 if g.get("h") else num("K", 0)
        hour = h12 + (12 if (g.get("a") or "").upper() == "PM" else 0)
    try:
        if g.get("D") and not g.get("d"):
            base = dt.datetime(year, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=int(g["D"]) - 1)
            month, day = base.month, base.day
        else:
            day = num("d", 1)
        value = dt.datetime(year, month, day, hour, num("m", 0), num("s", 0),
                            num("S", 0) * 1000, tzinfo=dt.UTC)
    except ValueError as e:
        raise DataError(f"Could not parse timestamp: value ({text}) does not match pattern "
                        f"({pattern}): {e}") from e
    zone = g.get("Z") or g.get("X") or g.get("z")
    if zone:
        value -= _zone_offset(zone)
    return value
