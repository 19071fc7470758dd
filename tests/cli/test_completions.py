"""The checked-in shell completion scripts: up to date, generated from the real command tree,
and completing in real shells (bash always; zsh and fish when installed)."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import pytest
import typer
import typer.main

from kctl.cli import completions
from kctl.cli.completions import REGENERATE, SHELLS, generate, model
from kctl.cli.main import app

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "completions"
# No `kctl` on this PATH: the scripts must complete without running it.
SHELL_PATH = "/usr/bin:/bin"


@pytest.mark.parametrize("shell", SHELLS)
def test_checked_in_script_is_up_to_date(shell):
    path = COMPLETIONS / f"kctl.{shell}"
    assert path.is_file(), f"{path} is missing: run `{REGENERATE}`"
    assert path.read_bytes().decode("utf-8") == generate(shell), (
        f"{path.relative_to(REPO)} is stale: run `{REGENERATE}` and commit the result")


def test_generate_is_deterministic_static_and_commented():
    for shell in SHELLS:
        script = generate(shell)
        assert script == generate(shell)
        assert "_KCTL_COMPLETE" not in script  # static: never calls back into kctl
        assert REGENERATE in script.split("\n\n")[0]  # the header says how to regenerate
        assert script.endswith("\n") and not script.endswith("\n\n")
    with pytest.raises(ValueError):
        generate("tcsh")


def test_every_command_and_option_is_in_every_script():
    """Coverage of the model the scripts are written from, so a walker bug can't hide one."""
    root = model()
    paths = {cmd.path for cmd in root.walk()}
    for expected in [("connector", "offsets", "get"), ("connector", "offsets", "set"),
                     ("connector", "offsets", "reset"), ("rebalance", "explain"),
                     ("dlq", "show"), ("dlq", "replay"), ("worker", "start"),
                     ("plugins", "list")]:
        assert expected in paths
    status = next(c for c in root.walk() if c.path == ("connector", "status"))
    output = next(o for o in status.options if "--output" in o.names)
    assert "-o" in output.names and output.takes_value
    assert output.choices == ("table", "json", "yaml")
    scripts = {shell: generate(shell) for shell in SHELLS}
    for cmd in root.walk():
        for shell, script in scripts.items():
            if cmd.path:
                assert cmd.path[-1] in script, (shell, cmd.path)
            for opt in cmd.options:
                for name in opt.names:
                    spelled = name if shell != "fish" else name.lstrip("-")
                    assert spelled in script, (shell, cmd.path, name)


def test_module_stays_light():
    code = ("import sys, kctl.cli.completions as c; [c.generate(s) for s in c.SHELLS]; "
            "print(','.join(m for m in ('pyspark', 'pyarrow', 'pandas', 'fastapi') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == ""


# --- staleness detection is real: a changed CLI changes every script -------------------------


class Level(str, Enum):  # noqa: UP042 - like kctl.cli.common.Output
    low = "low"
    high = "high"


def _changed_cli():
    """kctl's click tree with a command added, an option added, one renamed, one removed."""
    cli = typer.main.get_command(app)  # a fresh tree: changing it leaves `app` alone
    extra = typer.Typer()

    @extra.command()
    def frobnicate(
        target: Path = typer.Argument(..., help="A file."),
        level: Level = typer.Option(Level.low, "--level", "-l", help="How hard."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only show."),
    ) -> None:
        """Frobnicate a connector."""

    fake = typer.main.get_command(extra)  # a single command, not a group
    connector = cli.commands["connector"]
    connector.add_command(fake, "frobnicate")
    create = connector.commands["create"]
    create.params.append(next(p for p in fake.params if p.name == "dry_run"))
    connector.commands["halt"] = connector.commands.pop("stop")
    cli.params = [p for p in cli.params if p.name != "debug"]
    return cli


@pytest.mark.parametrize("shell", SHELLS)
def test_a_changed_cli_makes_the_checked_in_script_stale(shell):
    changed = generate(shell, _changed_cli())
    assert changed != (COMPLETIONS / f"kctl.{shell}").read_text()
    for word in ("frobnicate", "dry-run", "halt", "high"):
        assert word in changed
    assert "debug" not in changed
    assert "stop" in generate(shell)  # the app itself is unchanged


def test_a_changed_cli_completes_in_bash(tmp_path):
    script = tmp_path / "kctl.bash"
    script.write_text(generate("bash", _changed_cli()))
    assert _bash(script, "kctl", "connector", "fro").words == ["frobnicate"]
    assert _bash(script, "kctl", "connector", "frobnicate", "-l", "").words == ["low", "high"]
    assert _bash(script, "kctl", "connector", "frobnicate", "").default  # the file argument
    assert _bash(script, "kctl", "connector", "create", "--d").words == ["--dry-run"]
    assert _bash(script, "kctl", "connector", "h").words == ["halt"]
    assert _bash(script, "kctl", "--d").words == []


def test_a_plain_click_tree():
    """Older typer builds on click itself: choices from click.Choice, files from click.Path."""
    click = pytest.importorskip("click")

    @click.group()
    def cli() -> None:
        """A tool."""

    @cli.command()
    @click.option("-f", "--format", type=click.Choice(["csv", "tsv"]), help="Format.")
    @click.option("--quiet/--loud", help="Noise.")
    @click.argument("inputs", nargs=-1, type=click.Path())
    def export(format: str, quiet: bool, inputs: tuple[str, ...]) -> None:
        """Export data."""

    root = model(cli)
    (command,) = root.subcommands
    fmt, quiet, _help = command.options
    assert fmt.names == ("-f", "--format") and fmt.choices == ("csv", "tsv")
    assert quiet.names == ("--quiet", "--loud") and not quiet.takes_value
    assert command.arguments[0].files and command.arguments[0].nargs == -1
    assert "'kctl export -f'|'kctl export --format')" in generate("bash", cli)


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


# --- a real bash ----------------------------------------------------------------------------


class Offered:
    def __init__(self, words: list[str], default: bool) -> None:
        self.words = words  # COMPREPLY
        self.default = default  # `complete -o default` stays on: bash offers file names


def _bash(script: Path, *words: str) -> Offered:
    """What the bash completion in `script` offers for the command line `words` (the last
    one is the word being completed), the way bash's programmable completion calls it."""
    bash = shutil.which("bash")
    assert bash, "bash is required"
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (f"source '{script}'\n"
               "complete -p kctl | grep -q -- '-o default' || echo 'no -o default' >&2\n"
               "default=1; compopt() { [[ $* == '+o default' ]] && default=0; }\n"
               f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
               f"_kctl kctl '{words[-1]}' '{words[-2]}'\n"
               "echo \"default=$default\"; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    out = subprocess.run([bash, "--norc", "--noprofile", "-c", program], capture_output=True,
                         text=True, env={"PATH": SHELL_PATH, "HOME": str(script.parent)},
                         timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    first, *rest = out.stdout.splitlines()
    return Offered([line for line in rest if line], first == "default=1")


def _kctl_bash(*words: str) -> Offered:
    return _bash(COMPLETIONS / "kctl.bash", *words)


def test_bash_completes_commands_and_subcommands():
    assert _kctl_bash("kctl", "conn").words == ["connector"]
    offered = _kctl_bash("kctl", "connector", "st")
    assert offered.words == ["status", "stop"] and not offered.default
    assert _kctl_bash("kctl", "connector", "offsets", "").words == ["get", "set", "reset"]
    assert _kctl_bash("kctl", "rebalance", "").words == ["explain", "history"]
    assert _kctl_bash("kctl", "group", "").words == ["describe"]
    assert _kctl_bash("kctl", "dlq", "").words == ["show", "replay", "purge"]
    assert _kctl_bash("kctl", "--url", "http://w:8083", "conn").words == ["connector"]


def test_bash_completes_options_and_choices():
    assert _kctl_bash("kctl", "connector", "status", "-o", "").words == ["table", "json", "yaml"]
    assert _kctl_bash("kctl", "connector", "status", "--output", "=", "j").words == ["json"]
    assert _kctl_bash("kctl", "connector", "offsets", "get", "--o").words == ["--output"]
    assert _kctl_bash("kctl", "rebalance", "explain", "--kind", "").words == [
        "connect", "consumer"]
    assert "--include-tasks" in _kctl_bash("kctl", "connector", "restart", "x", "-").words
    # an option's value is skipped: `json` is not taken for a positional argument
    assert _kctl_bash("kctl", "connector", "status", "-o", "json", "--h").words == ["--help"]


def test_bash_offers_files_only_where_a_file_goes():
    for words in [("kctl", "connector", "create", ""), ("kctl", "connector", "apply", "x"),
                  ("kctl", "connector", "offsets", "set", "name", ""),
                  ("kctl", "rebalance", "explain", "-s", ""),
                  ("kctl", "worker", "start", "worker.yaml", "a.yaml", "")]:
        offered = _kctl_bash(*words)
        assert offered.words == [] and offered.default, words
    for words in [("kctl", "connector", "status", ""), ("kctl", "connector", "offsets", "set", ""),
                  ("kctl", "--url", ""), ("kctl", "connector", "list", "-o", "json", "")]:
        offered = _kctl_bash(*words)
        assert offered.words == [] and not offered.default, words


# --- a real fish ----------------------------------------------------------------------------


def _fish() -> str:
    fish = shutil.which("fish")
    if fish is None:
        pytest.skip("fish is not installed")
    return fish


def _fish_complete(line: str, cwd: Path | None = None) -> list[str]:
    """The candidates fish offers for `line` with the checked-in script (without descriptions)."""
    program = (f"source '{COMPLETIONS / 'kctl.fish'}'; complete -C '{line}'")
    out = subprocess.run([_fish(), "--no-config", "-c", program], capture_output=True,
                         text=True, env={"PATH": SHELL_PATH, "HOME": str(cwd or REPO)},
                         cwd=cwd, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return [line.split("\t")[0] for line in out.stdout.splitlines()]


def test_fish_syntax():
    out = subprocess.run([_fish(), "--no-config", "-n", str(COMPLETIONS / "kctl.fish")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_fish_completes(tmp_path):
    (tmp_path / "ct.yaml").touch()
    assert _fish_complete("kctl conn") == ["connector"]
    assert _fish_complete("kctl connector st") == ["status", "stop"]
    assert sorted(_fish_complete("kctl connector status -o ")) == ["json", "table", "yaml"]
    assert sorted(_fish_complete("kctl connector offsets ")) == ["get", "reset", "set"]
    # nested groups: `get` and `list` exist at two levels
    assert "--output" in _fish_complete("kctl connector offsets get --")
    assert _fish_complete("kctl connector offsets get x ") == []
    assert _fish_complete("kctl plugins l") == ["list"]
    assert _fish_complete("kctl rebalance explain --tr") == ["--trace"]
    assert _fish_complete("kctl --url http://w:8083 conn") == ["connector"]
    assert _fish_complete("kctl connector create ", tmp_path) == ["ct.yaml"]
    assert _fish_complete("kctl rebalance explain -s ", tmp_path) == ["ct.yaml"]
    assert _fish_complete("kctl connector offsets set name ", tmp_path) == ["ct.yaml"]
    assert _fish_complete("kctl connector offsets set ", tmp_path) == []
    assert _fish_complete("kctl connector status ", tmp_path) == []


# --- a real zsh -----------------------------------------------------------------------------


class Zsh:
    """An interactive zsh on a pseudo-terminal with the checked-in script installed on $fpath
    (as _kctl) and compadd wrapped to record the matches one TAB offers."""

    def __init__(self, zsh: str, home: Path) -> None:
        (home / "_kctl").write_bytes((COMPLETIONS / "kctl.zsh").read_bytes())
        work = home / "work"  # the shell's directory: file completion offers ct.yaml
        work.mkdir()
        (work / "ct.yaml").touch()
        self.out = home / "matches"
        setup = f"""
PS1='% '; unsetopt beep
fpath=({home} $fpath); autoload -Uz compinit; compinit -u -d {home}/.zcompdump
compadd() {{
  if [[ ${{@[1,(i)(-|--)]}} == *-(O|A|D)\\ * ]]; then builtin compadd "$@"; return; fi
  local -a hits; builtin compadd -A hits "$@"
  (( $#hits )) && print -rl -- $hits >> {self.out}
  builtin compadd "$@"
}}
_kctl_test_complete() {{ zle complete-word; print -r -- '<done>' >> {self.out}; BUFFER=''; }}
zle -N _kctl_test_complete; bindkey '^T' _kctl_test_complete
print -r -- '<ready>' > {self.out}
"""
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [zsh, "-f", "-i"], stdin=slave, stdout=slave, stderr=slave, cwd=work,
            start_new_session=True,
            env={"PATH": SHELL_PATH, "HOME": str(home), "TERM": "dumb"})
        os.close(slave)
        os.write(self.master, setup.encode())
        self._wait_for("<ready>\n")

    def _wait_for(self, end: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if select.select([self.master], [], [], 0.05)[0]:
                try:
                    os.read(self.master, 65536)  # keep the terminal drained
                except OSError:
                    break
            text = self.out.read_text() if self.out.exists() else ""
            if text.endswith(end):
                return text
        raise AssertionError(f"zsh did not answer; it was at {self.out.read_text()!r}")

    def complete(self, line: str) -> list[str]:
        self.out.unlink()
        os.write(self.master, line.encode() + b"\x14")  # ^T: complete, record, clear the line
        return self._wait_for("<done>\n").splitlines()[:-1]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)


@pytest.fixture(scope="module")
def zsh(tmp_path_factory) -> Iterator[Zsh]:
    path = shutil.which("zsh")
    if path is None:
        pytest.skip("zsh is not installed")
    shell = Zsh(path, tmp_path_factory.mktemp("zsh"))
    yield shell
    shell.close()


def test_zsh_syntax():
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    out = subprocess.run([zsh, "-n", str(COMPLETIONS / "kctl.zsh")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_zsh_script_can_be_sourced_after_compinit(tmp_path):
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    program = (f"autoload -Uz compinit; compinit -u -d {tmp_path}/.zcompdump; "
               f"source {COMPLETIONS / 'kctl.zsh'}; print -r -- $_comps[kctl]")
    out = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True,
                         env={"PATH": SHELL_PATH, "HOME": str(tmp_path)}, timeout=60)
    assert out.stdout.strip() == "_kctl", out.stderr


def test_zsh_completes(zsh):
    assert zsh.complete("kctl conn") == ["connector"]
    assert zsh.complete("kctl connector st") == ["status", "stop"]
    assert zsh.complete("kctl connector status -o ") == ["table", "json", "yaml"]
    assert zsh.complete("kctl connector status --output=") == ["table", "json", "yaml"]
    assert zsh.complete("kctl connector offsets ") == ["get", "set", "reset"]
    assert sorted(zsh.complete("kctl connector offsets get -")) == ["--help", "--output", "-o"]
    assert zsh.complete("kctl --url http://w:8083 conn") == ["connector"]
    assert zsh.complete("kctl connector create ") == ["ct.yaml"]
    assert zsh.complete("kctl rebalance explain -s ") == ["ct.yaml"]
    assert zsh.complete("kctl connector status ") == []
    assert zsh.complete("kctl rebalance explain --join a --jo") == ["--join"]  # repeatable
