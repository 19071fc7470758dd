"""`kctl --help` and every subcommand's help: flags read as flags, and nothing is left
undescribed (a user reading `--help` should not have to guess what `name` or
`--only-failed` means)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kctl.cli.main import app

ROOT = typer.main.get_command(app)


def commands(cmd: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from commands(sub, (*path, name))


ALL = list(commands())


def params(cmd: Any, path: tuple[str, ...]) -> list[Any]:
    ctx = cmd.context_class(cmd, info_name=path[-1] if path else "kctl")
    return cmd.get_params(ctx)


def test_the_walk_sees_the_whole_cli():
    names = {" ".join(p) for p, _ in ALL}
    assert {"connector restart", "dlq show", "logger set", "context set",
            "connector offsets set", "rebalance explain", "worker start"} <= names


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) or "kctl" for p, _ in ALL])
def test_every_option_and_argument_is_described(path, cmd):
    missing = [p.name for p in params(cmd, path) if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"kctl {' '.join(path)}: no description for {missing}"


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) or "kctl" for p, _ in ALL])
def test_flags_are_shown_as_flags(path, cmd):
    """A flag's help line names the flag and its description, never a value to give."""
    out = CliRunner().invoke(app, [*path, "--help"], terminal_width=200).output
    flags = [p for p in params(cmd, path) if getattr(p, "is_flag", False)]
    for flag in flags:
        for opt in flag.opts:
            lines = [ln for ln in out.splitlines() if re.search(rf"(^|\s){re.escape(opt)}\b", ln)]
            assert lines, f"{opt} missing from kctl {' '.join(path)} --help:\n{out}"
            assert not any("<bool>" in ln or "BOOLEAN" in ln for ln in lines), \
                f"kctl {' '.join(path)} --help shows {opt} as taking a value:\n{out}"


def test_restart_flags_say_what_they_do():
    out = CliRunner().invoke(app, ["connector", "restart", "--help"], terminal_width=200).output
    assert "--include-tasks" in out and "Restart its tasks too" in out
    assert "--only-failed" in out and "FAILED" in out
    assert "<bool>" not in out
