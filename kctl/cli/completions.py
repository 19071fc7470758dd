"""Shell completion scripts for `kctl`, generated from the CLI and checked in.

    python -m kctl.cli.completions          # (re)write completions/kctl.{bash,zsh,fish}
    python -m kctl.cli.completions --check  # exit 1 when a checked-in script is stale

The scripts come from the same shell-completion machinery `kctl` answers with at run time
(the click that typer uses, with typer's completion classes registered), so a script and
the installed `kctl` always speak the same protocol: the script runs `kctl` with
`_KCTL_COMPLETE=complete_<shell>` and shows what it prints.

Light on purpose: imports typer, click and kctl.cli.main (which never imports Spark).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

PROG_NAME = "kctl"
COMPLETE_VAR = "_KCTL_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
REGENERATE = "python -m kctl.cli.completions"

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT / "completions"


def _shell_completion() -> Any:
    """The shell_completion module of the click that typer's commands are built on.

    typer >= 0.2x vendors click as `typer._click`; older typer uses click itself. Either
    way `typer.completion` registers typer's completion classes there, whose scripts match
    what `kctl` handles at run time (click's own classes speak a different protocol).
    """
    import typer.completion

    typer.completion.completion_init()
    try:
        from typer._click import shell_completion
    except ImportError:  # typer without a vendored click
        from click import shell_completion
    return shell_completion


def generate(shell: str) -> str:
    """The completion script for `shell` (bash, zsh or fish), ending with one newline."""
    if shell not in SHELLS:
        raise ValueError(f"unsupported shell {shell!r}; expected one of {', '.join(SHELLS)}")
    import typer.main

    from kctl.cli.main import app

    cli = typer.main.get_command(app)
    comp_cls = _shell_completion().get_completion_class(shell)
    if comp_cls is None:  # pragma: no cover - typer always registers the three
        raise ValueError(f"no completion class for {shell!r}")
    comp = comp_cls(cli, {}, PROG_NAME, COMPLETE_VAR)
    return comp.source().strip() + "\n"


def file_name(shell: str) -> str:
    return f"{PROG_NAME}.{shell}"


def stale_files(directory: Path) -> list[str]:
    """Names of the scripts in `directory` that are missing or differ from generate()."""
    stale = []
    for shell in SHELLS:
        path = directory / file_name(shell)
        try:
            current = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != generate(shell):
            stale.append(path.name)
    return stale


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell in SHELLS:
        path = directory / file_name(shell)
        path.write_bytes(generate(shell).encode("utf-8"))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REGENERATE, description="Write (or --check) the kctl shell completion scripts.")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a checked-in script is missing or stale")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help="directory of the scripts (default: completions/ in the repo)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.dir)
        for name in stale:
            print(f"stale or missing: {args.dir / name}", file=sys.stderr)
        if stale:
            print(f"run `{REGENERATE}` to regenerate the shell completion scripts",
                  file=sys.stderr)
            return 1
        print(f"shell completion scripts are up to date ({', '.join(SHELLS)})")
        return 0
    for path in write_all(args.dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
