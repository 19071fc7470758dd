"""The generated parts of the user guide, so none of them drifts from the code.

    python -m kctl.docs          # write every generated page
    python -m kctl.docs --check  # exit 1 naming the stale pages (CI runs this)

Each page is rendered from the code or from recorded data: the configuration reference
from the ConfigDefs, the CLI reference from the typer app, the REST reference from the
OpenAPI document FastAPI generates, and the performance page from the benchmarks' result
files. The output is deterministic: no timestamps and no paths of this machine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REGENERATE = "python -m kctl.docs"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def _configuration(root: Path) -> str:
    from kctl.docs.configuration import render_configuration

    return render_configuration()


def _cli(root: Path) -> str:
    from kctl.docs.cli_reference import render_cli_reference

    return render_cli_reference()


def _rest(root: Path) -> str:
    from kctl.docs.rest_reference import render_rest_reference

    return render_rest_reference()


def _performance(root: Path) -> str:
    from kctl.docs.performance import render_performance

    return render_performance(root)


# Path under the repository root -> what renders it (given the root, for recorded data).
PAGES: dict[Path, Callable[[Path], str]] = {
    Path("docs") / "configuration.md": _configuration,
    Path("docs") / "reference" / "cli.md": _cli,
    Path("docs") / "reference" / "rest.md": _rest,
    Path("docs") / "performance.md": _performance,
}


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def expected_files(root: Path) -> dict[Path, str]:
    """Each generated file under `root` with the content it should have."""
    return {root / relative: render(root) for relative, render in PAGES.items()}


def stale_files(root: Path) -> list[Path]:
    return [path for path, text in expected_files(root).items() if _read(path) != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REGENERATE, description="Write (or --check) the generated pages of the user guide.")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a generated page is stale")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="repository root holding docs/ and benchmarks/ (default: this repo)")
    args = parser.parse_args(argv)
    try:
        expected = expected_files(args.root)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = [path for path, text in expected.items() if _read(path) != text]
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        if stale:
            print(f"run `{REGENERATE}` and commit the result", file=sys.stderr)
            return 1
        print("generated pages are up to date")
        return 0
    for path, text in expected.items():
        if _read(path) != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
            print(f"wrote {path}")
    return 0
