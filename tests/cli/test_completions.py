"""The checked-in shell completion scripts: up to date, and working in a real bash."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.cli import completions
from kctl.cli.completions import REGENERATE, SHELLS, generate

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "completions"


@pytest.mark.parametrize("shell", SHELLS)
def test_checked_in_script_is_up_to_date(shell):
    path = COMPLETIONS / f"kctl.{shell}"
    assert path.is_file(), f"{path} is missing: run `{REGENERATE}`"
    assert path.read_bytes().decode("utf-8") == generate(shell), (
        f"{path.relative_to(REPO)} is stale: run `{REGENERATE}` and commit the result")


def test_generate_is_deterministic_and_names_kctl():
    for shell in SHELLS:
        script = generate(shell)
        assert script == generate(shell)
        assert "_KCTL_COMPLETE" in script and "kctl" in script
        assert script.endswith("\n") and not script.endswith("\n\n")
    with pytest.raises(ValueError):
        generate("tcsh")


def test_module_stays_light():
    code = ("import sys, kctl.cli.completions as c; [c.generate(s) for s in c.SHELLS]; "
            "print(','.join(m for m in ('pyspark', 'pyarrow', 'pandas', 'fastapi') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == ""


# --- a real bash ----------------------------------------------------------------------------


def _path_with_kctl() -> str:
    """PATH on which `kctl` (the console script the bash function runs) is found."""
    found = shutil.which("kctl")
    directory = os.path.dirname(found) if found else os.path.dirname(sys.executable)
    assert os.path.exists(os.path.join(directory, "kctl")), (
        "the kctl console script is not installed: python3 -m pip install -e .")
    return directory + os.pathsep + os.environ.get("PATH", "")


def _bash_complete(*words: str) -> list[str]:
    """COMPREPLY of the checked-in bash completion for the command line `words`."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = (COMPLETIONS / "kctl.bash").read_text()
    func = re.search(r"^complete .*-F (\S+) kctl$", script, re.MULTILINE)
    assert func, "no `complete -F FUNC kctl` line in completions/kctl.bash"
    quoted = " ".join(f"'{w}'" for w in words)
    # bash calls the function with (command, word being completed, previous word)
    program = (f"source {COMPLETIONS / 'kctl.bash'!s}\n"
               f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
               f"{func.group(1)} kctl '{words[-1]}' '{words[-2]}'\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = {**os.environ, "PATH": _path_with_kctl()}
    env.pop("_KCTL_COMPLETE", None)
    out = subprocess.run([bash, "--norc", "--noprofile", "-c", program], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line]


def test_bash_completes_a_command():
    assert "connector" in _bash_complete("kctl", "conn")


def test_bash_completes_a_subcommand():
    offered = _bash_complete("kctl", "connector", "st")
    assert "status" in offered and "stop" in offered
    assert "create" not in offered


# --- --check --------------------------------------------------------------------------------


def test_check_passes_on_the_repo():
    out = subprocess.run([sys.executable, "-m", "kctl.cli.completions", "--check"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr


def test_check_fails_on_a_stale_or_missing_script(tmp_path):
    assert completions.main(["--dir", str(tmp_path)]) == 0
    assert completions.main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "kctl.zsh").write_text("# an old script\n")
    (tmp_path / "kctl.fish").unlink()
    out = subprocess.run(
        [sys.executable, "-m", "kctl.cli.completions", "--check", "--dir", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 1
    assert "kctl.zsh" in out.stderr and "kctl.fish" in out.stderr
    assert "kctl.bash" not in out.stderr
    assert REGENERATE in out.stderr
