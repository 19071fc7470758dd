"""The CLI's exit codes come from one table, ExitStatus, and nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

from kctl.exit_status import ExitStatus

EDGES = [Path("kctl/cli"), Path("kctl/launch.py")]
ROOT = Path(__file__).resolve().parents[2]


def exit_calls(tree: ast.AST):
    """Calls that set an exit code: typer.Exit(...), sys.exit(...), os._exit(...), fail(..)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in {"typer.Exit", "sys.exit", "os._exit", "fail", "_fail", "raise_exit"}:
                yield node
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, int) and not isinstance(node.value.value, bool):
            yield node


def test_no_bare_exit_numbers_at_the_edges():
    bare = []
    for edge in EDGES:
        for path in ([ROOT / edge] if edge.suffix else sorted((ROOT / edge).rglob("*.py"))):
            tree = ast.parse(path.read_text())
            for call in exit_calls(tree):
                args = call.args if isinstance(call, ast.Call) else [call.value]
                args = [*args, *(k.value for k in getattr(call, "keywords", []))]
                if any(isinstance(a, ast.Constant) and type(a.value) is int for a in args):
                    bare.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)}")
    assert not bare, "exit codes must be ExitStatus members:\n" + "\n".join(bare)


def test_the_table_keeps_the_documented_numbers():
    assert [(s.name, int(s)) for s in ExitStatus] == [
        ("SUCCESS", 0), ("ERROR", 1), ("USAGE", 2), ("NOT_FOUND", 3), ("CONFLICT", 4),
        ("UNREACHABLE", 5), ("INTERRUPTED", 130)]
