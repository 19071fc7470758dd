"""`kctl connector validate` (and REST validate) report keys nothing reads as warnings, with
the did-you-mean `create` gives: a typo such as the README's `batch.max.row` was reported
"valid" without a word. Warnings never make a config invalid: `error_count` stays Kafka's
count of errors, and the warnings are an added `warnings` list of the ConfigInfos answer."""

from __future__ import annotations

import json

import httpx

CONFIG = """
name: clicks
connector.class: FileSource
path: /tmp/none/*.jsonl
format: json
topic: clicks
batch.max.row: 5000
transforms.x.type: whatever
"""


def test_rest_validate_answers_unknown_keys_as_warnings(kctl, worker):
    config = {"connector.class": "FileSource", "name": "clicks", "path": "/tmp/none/*.jsonl",
              "format": "json", "topic": "clicks", "batch.max.row": "5000",
              "zzz.nothing.like.it": "1", "producer.override.linger.ms": "5"}
    got = httpx.put(f"{worker.rest.url}/connector-plugins/FileSource/config/validate",
                    json=config, timeout=30).json()
    assert got["error_count"] == 0
    assert got["warnings"] == [
        {"name": "batch.max.row", "message": "unknown key 'batch.max.row' (did you mean "
                                             "'batch.max.rows'?): no setting of this "
                                             "connector reads it"},
        {"name": "zzz.nothing.like.it", "message": "unknown key 'zzz.nothing.like.it': no "
                                                   "setting of this connector reads it"}]
    # Kafka's shape is untouched: no config entry for a key no setting defines
    assert "batch.max.row" not in {c["definition"]["name"] for c in got["configs"]}


def test_cli_validate_shows_the_warning_and_still_says_valid(kctl):
    f = kctl.file("clicks.yaml", CONFIG)
    r = kctl("connector", "validate", f)
    assert r.exit_code == 0, r.output
    assert "clicks: configuration is valid (1 warning(s) on stderr)" in r.stdout
    assert "unknown key 'batch.max.row' (did you mean 'batch.max.rows'?)" in r.stderr
    assert "transforms.x.type" not in r.stderr  # transform keys are free (checked elsewhere)
    data = json.loads(kctl.ok("connector", "validate", f, "-o", "json"))
    assert [w["name"] for w in data["warnings"]] == ["batch.max.row"]
    assert data["error_count"] == 0


def test_cli_validate_with_errors_shows_both_and_fails(kctl):
    f = kctl.file("bad.yaml", CONFIG.replace("format: json", "format: nope"))
    r = kctl("connector", "validate", f)
    assert r.exit_code == 1
    assert "did you mean 'batch.max.rows'" in r.stderr and "format" in r.output
