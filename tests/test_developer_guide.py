"""docs/developer-guide.md's code runs: its `# file:` blocks are written out as the files
they name and their tests pass; its other Python blocks run; its JSON, YAML and TOML parse;
and each `kctl` command it shows exists."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "developer-guide.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE = re.compile(r"\A# file: (\S+)\n")


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(GUIDE.read_text()) if lang == language]


def files() -> dict[str, str]:
    """name -> the blocks that name it, in order."""
    out: dict[str, str] = {}
    for body in blocks("python"):
        m = FILE.match(body)
        if m:
            out[m[1]] = out.get(m[1], "") + ("\n\n" if m[1] in out else "") + body[m.end():]
    return out


def test_the_guide_has_the_files_it_describes():
    names = set(files())
    assert {"tables.py", "test_tables.py", "ledger.py", "test_ledger.py", "columns.py",
            "test_columns.py"} <= names, names


def test_the_guides_files_compile_and_their_tests_pass(tmp_path):
    for name, text in files().items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(tmp_path), str(REPO), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    tests = sum(len(re.findall(r"^def test_", t, re.MULTILINE))
                for n, t in files().items() if n.startswith("test_"))
    assert f"{tests} passed" in r.stdout, r.stdout[-2000:]


def test_the_other_python_blocks_run():
    snippets = [b for b in blocks("python") if not FILE.match(b)]
    assert snippets
    for body in snippets:
        exec(compile(body, str(GUIDE), "exec"), {"__name__": "guide"})


def test_configs_parse():
    for body in blocks("json"):
        document = json.loads(body)
        assert document["config"]["connector.class"]
    for body in blocks("yaml"):
        assert isinstance(yaml.safe_load(body), dict)
    for body in blocks("toml"):
        tomllib.loads(body)


def commands() -> list[list[str]]:
    out = []
    for body in blocks("bash"):
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("kctl "):
                out.append(shlex.split(line)[1:])
    return out


@pytest.mark.parametrize("args", commands(), ids=" ".join)
def test_each_kctl_command_shown_exists(args):
    words = []
    skip_value = False
    for a in args:  # the command words: options (and --url's value) and arguments dropped
        if skip_value:
            skip_value = False
        elif a == "--url":
            skip_value = True
        elif a.startswith("-"):
            continue
        elif a[0].islower() and "." not in a and "/" not in a:
            words.append(a)
        else:
            break
    r = subprocess.run([sys.executable, "-m", "kctl.cli.main", *words[:3], "--help"],
                       capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                         "COLUMNS": "200"})
    assert r.returncode == 0, f"kctl {' '.join(words)}: {r.stderr}"
    for a in args:
        if a.startswith("--") and a != "--url":
            assert a.split("=")[0] in r.stdout, f"{a} is no option of kctl {' '.join(words)}"
