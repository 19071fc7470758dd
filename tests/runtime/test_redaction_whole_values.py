"""A secret is hidden where it stands as a value of its own, and nowhere else.

A connector whose password is `postgres` once made every log line of its worker read
`jdbc:[hidden]ql://...`: the redactor replaced the password inside the word `postgresql`,
garbling the line, and the gap spelt the password out. Redaction now replaces whole values
only: the password as a word of its own (after `password `, between quotes, as a URL's
user info or `password=` parameter), never a part of a longer word.
"""

from __future__ import annotations

import json
import logging

import pytest

from kctl.api.config import ConfigDef, ConfigType
from kctl.runtime.secrets import HIDDEN, REDACTOR, Redactor, install_log_redaction, register_secrets

URL = "jdbc:postgresql://127.0.0.1:5432/test"


@pytest.fixture
def postgres() -> Redactor:
    r = Redactor()
    r.add(["postgres"])
    return r


def test_a_password_inside_a_longer_word_is_left_alone(postgres):
    assert postgres.redact(f"connecting to {URL}") == f"connecting to {URL}"
    assert postgres.redact("postgresql, postgres_fdw and xpostgres") == \
        "postgresql, postgres_fdw and xpostgres"


@pytest.mark.parametrize(("text", "shown"), [
    ("login refused for password postgres", f"login refused for password {HIDDEN}"),
    ("postgres", HIDDEN),
    ("{'connection.password': 'postgres'}", f"{{'connection.password': '{HIDDEN}'}}"),
    (json.dumps({"password": "postgres"}), json.dumps({"password": HIDDEN})),
    ("jdbc:postgresql://kctl:postgres@db/test", f"jdbc:postgresql://kctl:{HIDDEN}@db/test"),
    (f"{URL}?user=kctl&password=postgres", f"{URL}?user=kctl&password={HIDDEN}"),
    ("password=postgres.", f"password={HIDDEN}."),
])
def test_a_password_standing_alone_in_other_text_is_hidden_and_nothing_else(postgres, text,
                                                                             shown):
    assert postgres.redact(text) == shown


def test_secrets_that_begin_or_end_with_punctuation_are_hidden_wherever_they_stand():
    r = Redactor()
    r.add(["!s3cret#", "pa'ss\\word"])
    assert r.redact("x!s3cret#y") == f"x{HIDDEN}y"  # no word to cut at its edges
    assert r.redact("said pa'ss\\word.") == f"said {HIDDEN}."
    assert r.redact(repr("pa'ss\\word")) == f'"{HIDDEN}"'


def test_the_workers_log_lines_keep_a_url_that_contains_the_password_as_a_word_part(
        caplog, monkeypatch):
    # the process's redactor as it was comes back after the test: `postgres` is a word
    # other tests' messages carry
    monkeypatch.setattr(REDACTOR, "_values", set(REDACTOR._values))
    monkeypatch.setattr(REDACTOR, "_pattern", REDACTOR._pattern)
    install_log_redaction()
    register_secrets({"connection.password": "postgres", "connection.url": URL},
                     ConfigDef().define("connection.password", ConfigType.PASSWORD, None))
    log = logging.getLogger("kctl.test.whole_values")
    with caplog.at_level(logging.INFO, logger="kctl.test.whole_values"):
        log.info("task reading %s with password %s", URL, "postgres")
    assert f"task reading {URL} with password {HIDDEN}" in caplog.text
    assert "jdbc:[hidden]" not in caplog.text
