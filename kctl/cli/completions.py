"""Static shell completion scripts for `kctl`, generated from the CLI and checked in.

    python -m kctl.cli.completions          # (re)write completions/kctl.{bash,zsh,fish}
    python -m kctl.cli.completions --check  # exit 1 when a checked-in script is stale

The generator walks the click command tree behind the typer app and writes every command
path, option (long and short, flag or taking a value), choice and file-valued parameter
into the scripts themselves. So the scripts never run `kctl` to complete (instant, and no
Python start-up per TAB), and a checked-in script goes stale -- and the test fails -- as
soon as a command or option is added, renamed or removed.

Light on purpose: imports typer, click and kctl.cli.main (which never imports Spark).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kctl.exit_status import ExitStatus

PROG_NAME = "kctl"
SHELLS = ("bash", "zsh", "fish")
REGENERATE = "python -m kctl.cli.completions"

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT / "completions"

# Positional arguments that name files although typed `str` (they also accept `-` for
# stdin, so the command modules keep them strings). Path- and file-typed parameters need no entry.
FILE_ARGUMENTS = frozenset({"file", "files", "config", "connectors"})

_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a command name
_OPTION = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
_CHOICE = re.compile(r"^[A-Za-z0-9_.,:/@+%-]+$")  # needs no quoting in any of the shells


# -- the model: what the scripts know about the CLI -----------------------------------------


@dataclass(frozen=True)
class Option:
    """An option as the shells need it: every spelling, and what its value completes to."""

    names: tuple[str, ...]  # "-o", "--output", and a flag's "--no-x" secondary names
    takes_value: bool
    choices: tuple[str, ...]
    files: bool  # the value is a file name
    multiple: bool
    help: str
    name: str  # the parameter's name, shown as the value's message in zsh


@dataclass(frozen=True)
class Argument:
    """A positional argument: the shells complete it by its position after the command."""

    name: str
    choices: tuple[str, ...]
    files: bool
    nargs: int  # -1: takes all remaining words


@dataclass(frozen=True)
class Command:
    """A command path with its options, arguments and subcommands: one node of the tree."""

    path: tuple[str, ...]  # () for `kctl` itself
    help: str
    options: tuple[Option, ...]
    arguments: tuple[Argument, ...]
    subcommands: tuple[Command, ...]

    def walk(self) -> Iterator[Command]:
        """This command and every command below it, parents first, in declaration order."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    def value_options(self) -> list[str]:
        return [n for o in self.options if o.takes_value for n in o.names]


def _one_line(text: str | None, limit: int = 90) -> str:
    """The first line of a help text, whitespace collapsed: descriptions are one line."""
    lines = [line.strip() for line in (text or "").strip().splitlines()]
    line = " ".join(lines[0].split()) if lines else ""
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def _choices(param: Any) -> tuple[str, ...]:
    """A parameter's choices: typer's vendored click keeps them on `type_descriptor`,
    click itself on a `click.Choice` type."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        values = desc.choices or ()
    else:
        values = getattr(getattr(param, "type", None), "choices", None) or ()
    out = tuple(str(v.value) if isinstance(v, Enum) else str(v) for v in values)
    for value in out:
        if not _CHOICE.match(value):
            raise ValueError(f"choice {value!r} of {param.name!r} needs shell quoting; "
                             "teach kctl.cli.completions to quote it")
    return out


def _is_path(param: Any) -> bool:
    """Whether a parameter's type is a path or file (typer's descriptor, or click.Path/File)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return bool(desc.is_path or desc.is_file)
    return getattr(getattr(param, "type", None), "name", "") in ("path", "filename")


def _model(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Command:
    options: list[Option] = []
    arguments: list[Argument] = []
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            arguments.append(Argument(
                name=param.name, choices=_choices(param), nargs=param.nargs,
                files=_is_path(param) or param.name in FILE_ARGUMENTS))
            continue
        names = (*param.opts, *param.secondary_opts)
        for name in names:
            if not _OPTION.match(name):
                raise ValueError(f"unexpected option name {name!r} in {' '.join(path)!r}")
        takes_value = not (getattr(param, "is_flag", False) or getattr(param, "count", False))
        options.append(Option(
            names=names, takes_value=takes_value,
            choices=_choices(param) if takes_value else (),
            files=takes_value and _is_path(param), multiple=bool(param.multiple),
            help=_one_line(getattr(param, "help", None)), name=param.name or names[-1]))
    subcommands = []
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            if not _WORD.match(name):
                raise ValueError(f"unexpected command name {name!r}")
            sub_ctx = sub.context_class(sub, info_name=name, parent=ctx)
            subcommands.append(_model(sub, sub_ctx, (*path, name)))
    return Command(path=path, help=_one_line(cmd.short_help or cmd.help),
                   options=tuple(options), arguments=tuple(arguments),
                   subcommands=tuple(subcommands))


def model(cli: Any = None) -> Command:
    """The completion model of a click command tree (default: the kctl app's)."""
    if cli is None:
        import typer.main

        from kctl.cli.main import app

        cli = typer.main.get_command(app)
    return _model(cli, cli.context_class(cli, info_name=PROG_NAME), ())


def _slots(cmd: Command) -> tuple[list[Argument], Argument | None]:
    """Positional slots of a command: one per word, then the argument taking the rest."""
    fixed: list[Argument] = []
    for arg in cmd.arguments:
        if arg.nargs < 0:
            return fixed, arg
        fixed.extend([arg] * arg.nargs)
    return fixed, None


def _header(comment: str, install: list[str]) -> list[str]:
    return [
        f"{comment} {PROG_NAME} shell completion, generated from the CLI by `{REGENERATE}`.",
        f"{comment} Do not edit: regenerate after changing commands or options",
        f"{comment} (tests/cli/test_completions.py fails while this file is stale).",
        *(f"{comment} {line}" for line in install),
    ]


# -- bash ------------------------------------------------------------------------------------


def _sq(text: str) -> str:
    """Single-quoted for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _bash(root: Command) -> str:
    """`_kctl` walks COMP_WORDS through `case` tables of the tree (no subshells per TAB);
    `complete -o default` supplies file names, switched off where no file goes."""
    def key(cmd: Command) -> str:
        return " ".join((PROG_NAME, *cmd.path))

    out = _header("#", [
        "Install: source it from ~/.bashrc, or copy it to",
        "~/.local/share/bash-completion/completions/kctl (bash-completion loads it on demand).",
    ])
    out += [
        "",
        "# _kctl_command PATH: subcommands (subs), options (opts) and options taking a value",
        "# (vopts) of the command PATH (\"kctl\", \"kctl connector\", ...).",
        "_kctl_command() {",
        "    case $1 in",
    ]
    for cmd in root.walk():
        out += [
            f"        {_sq(key(cmd))})",
            f"            subs={_sq(' '.join(s.path[-1] for s in cmd.subcommands))}",
            f"            opts={_sq(' '.join(n for o in cmd.options for n in o.names))}",
            f"            vopts={_sq(' '.join(cmd.value_options()))} ;;",
        ]
    out += [
        "        *)",
        "            subs='' opts='' vopts='' ;;",
        "    esac",
        "}",
        "",
        "# _kctl_value PATH OPTION: how to complete OPTION's value: kind=choice (from words),",
        "# file or none.",
        "_kctl_value() {",
        '    case "$1 $2" in',
    ]
    for cmd in root.walk():
        for opt in cmd.options:
            if opt.choices or opt.files:
                pattern = "|".join(_sq(f"{key(cmd)} {n}") for n in opt.names)
                action = (f"kind=choice words={_sq(' '.join(opt.choices))}" if opt.choices
                          else "kind=file")
                out += [f"        {pattern})", f"            {action} ;;"]
    out += [
        "        *)",
        "            kind=none ;;",
        "    esac",
        "}",
        "",
        "# _kctl_argument PATH INDEX: how to complete positional argument INDEX (from 0) of PATH.",
        "_kctl_argument() {",
        "    kind=none",
        "    case $1 in",
    ]

    def action(arg: Argument) -> str:
        if arg.choices:
            return f"kind=choice words={_sq(' '.join(arg.choices))}"
        return "kind=file" if arg.files else "kind=none"

    for cmd in root.walk():
        fixed, rest = _slots(cmd)
        if not any(a.choices or a.files for a in [*fixed, *([rest] if rest else [])]):
            continue
        out += [f"        {_sq(key(cmd))})", "            case $2 in"]
        out += [f"                {i}) {action(a)} ;;" for i, a in enumerate(fixed)
                if a.choices or a.files]
        if rest is not None and (rest.choices or rest.files):
            out.append(f"                *) {action(rest)} ;;")
        out += ["            esac ;;"]
    out += [
        "    esac",
        "}",
        "",
        "_kctl() {",
        "    local cur=${COMP_WORDS[COMP_CWORD]} path=kctl word i=1 npos=0 value_of=''",
        "    local subs='' opts='' vopts='' kind=none words=''",
        "    [[ $cur == = ]] && cur=''  # right after `--opt=`: bash splits words at '='",
        "    _kctl_command \"$path\"",
        "    # Walk the words before the cursor: follow subcommands, skip options' values.",
        "    while (( i < COMP_CWORD )); do",
        "        word=${COMP_WORDS[i]}",
        "        if [[ -n $value_of ]]; then",
        "            [[ $word == = ]] || value_of=''",
        "        elif [[ $word == -?* ]]; then",
        "            [[ \" $vopts \" == *\" $word \"* ]] && value_of=$word",
        "        elif [[ \" $subs \" == *\" $word \"* ]]; then",
        "            path+=\" $word\" npos=0",
        "            _kctl_command \"$path\"",
        "        else",
        "            (( npos++ ))",
        "        fi",
        "        (( i++ ))",
        "    done",
        "    COMPREPLY=()",
        "    if [[ -n $value_of ]]; then",
        "        _kctl_value \"$path\" \"$value_of\"",
        "    elif [[ $cur == -* ]]; then",
        "        kind=choice words=$opts",
        "    elif [[ -n $subs ]]; then",
        "        kind=choice words=$subs",
        "    else",
        "        _kctl_argument \"$path\" \"$npos\"",
        "    fi",
        "    if [[ $kind == choice ]]; then",
        "        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))",
        "    fi",
        "    # file: leave COMPREPLY empty so `complete -o default` offers file names;",
        "    # otherwise offer no file names (compopt is bash >= 4).",
        "    [[ $kind == file ]] || compopt +o default 2>/dev/null",
        "    return 0",
        "}",
        "",
        "complete -o default -F _kctl kctl",
    ]
    return "\n".join(out) + "\n"


# -- zsh -------------------------------------------------------------------------------------


def _zsh_text(text: str) -> str:
    """Text inside an _arguments `[description]` or a `name:description`."""
    return re.sub(r"([\\\[\]:])", r"\\\1", text)


def _zsh_action(choices: tuple[str, ...], files: bool) -> str:
    if choices:
        return "(" + " ".join(choices) + ")"
    return "_files" if files else " "


def _zsh(root: Command) -> str:
    """One `_arguments` function per command path; groups dispatch on their subcommand
    the usual zsh way (`->command` / `*::` states), so option values are skipped by zsh."""
    names: dict[str, tuple[str, ...]] = {}

    def func(cmd: Command) -> str:
        name = "_" + "_".join((PROG_NAME, *cmd.path))
        if names.setdefault(name, cmd.path) != cmd.path:
            raise ValueError(f"zsh function {name} would complete two commands")
        return name

    out = ["#compdef kctl", *_header("#", [
        "Install: copy it as _kctl into a directory on $fpath before `compinit` runs,",
        "or source it after `compinit`.",
    ])]
    for cmd in root.walk():
        specs = []
        for opt in cmd.options:
            group = f"({' '.join(opt.names)})" if len(opt.names) > 1 and not opt.multiple else ""
            star = "*" if opt.multiple else ""
            for name in opt.names:
                suffix = ("=" if name.startswith("--") else "+") if opt.takes_value else ""
                spec = f"{group}{star}{name}{suffix}[{_zsh_text(opt.help)}]"
                if opt.takes_value:
                    spec += f":{_zsh_text(opt.name)}:{_zsh_action(opt.choices, opt.files)}"
                specs.append(spec)
        if cmd.subcommands:
            specs += ["1:command:->command", "*::argument:->argument"]
        else:
            fixed, rest = _slots(cmd)
            specs += [f"{i}:{_zsh_text(a.name)}:{_zsh_action(a.choices, a.files)}"
                      for i, a in enumerate(fixed, 1)]
            if rest is not None:
                specs.append(f"*:{_zsh_text(rest.name)}:{_zsh_action(rest.choices, rest.files)}")
        title = " ".join((PROG_NAME, *cmd.path))
        out += ["", f"# {title}", f"{func(cmd)}() {{"]
        if cmd.subcommands:
            out += ["    local curcontext=$curcontext state state_descr line ret=1",
                    "    typeset -A opt_args"]
        lines = [_sq(s) for s in specs]
        args = "_arguments -C" if cmd.subcommands else "_arguments"
        out.append(f"    {args} \\")
        out += [f"        {s} \\" for s in lines[:-1]]
        out.append(f"        {lines[-1]}" + (" && ret=0" if cmd.subcommands else ""))
        if cmd.subcommands:
            out += [
                "    case $state in",
                "        command)",
                "            local -a commands=(",
                *(f"                {_sq(_zsh_text(s.path[-1]) + ':' + s.help)}"
                  for s in cmd.subcommands),
                "            )",
                f"            _describe -t commands {_sq(title + ' command')} commands"
                " && ret=0 ;;",
                "        argument)",
                f"            curcontext=${{curcontext%:*:*}}:{'-'.join((PROG_NAME, *cmd.path))}"
                "-$line[1]:",
                "            case $line[1] in",
                *(f"                {s.path[-1]}) {func(s)} && ret=0 ;;"
                  for s in cmd.subcommands),
                "            esac ;;",
                "    esac",
                "    return ret",
            ]
        out.append("}")
    out += [
        "",
        '# Autoloaded from $fpath, this file is the body of _kctl; sourced, it registers _kctl.',
        'if [[ $funcstack[1] == _kctl ]]; then',
        '    _kctl "$@"',
        "else",
        "    compdef _kctl kctl",
        "fi",
    ]
    return "\n".join(out) + "\n"


# -- fish ------------------------------------------------------------------------------------


def _fq(text: str) -> str:
    """Single-quoted for fish."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish(root: Command) -> str:
    """`complete` lines conditioned on the exact command path: `__fish_seen_subcommand_from`
    would mix up nested groups (`connector get` and `connector offsets get`, two `list`s)."""
    def cases(values: Callable[[Command], list[str]]) -> list[str]:
        lines = ['    switch "$argv"']
        for cmd in root.walk():
            words = values(cmd)
            if words:
                lines += [f"        case {_fq(' '.join(cmd.path))}",
                          f"            printf '%s\\n' {' '.join(words)}"]
        return [*lines, "    end"]

    out = _header("#", [
        "Install: copy it to ~/.config/fish/completions/kctl.fish",
    ])
    out += [
        "",
        "function __kctl_subcommands --description 'Subcommands of the kctl command path in argv'",
        *cases(lambda c: [s.path[-1] for s in c.subcommands]),
        "end",
        "",
        "function __kctl_value_options --description 'Options of the kctl command path in argv "
        "that take a value'",
        *cases(Command.value_options),
        "end",
        "",
        "# Prints the number of positional words after the last subcommand, then the command path",
        "# (one word a line), of the command line before the cursor.",
        "function __kctl_walk --description 'Where the cursor is in the kctl command tree'",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l path",
        "    set -l npos 0",
        "    set -l value 0",
        "    for word in $words",
        "        if test $value = 1",
        "            set value 0",
        "        else if string match -q -- '-?*' $word",
        "            contains -- $word (__kctl_value_options $path); and set value 1",
        "        else if contains -- $word (__kctl_subcommands $path)",
        "            set -a path $word",
        "            set npos 0",
        "        else",
        "            set npos (math $npos + 1)",
        "        end",
        "    end",
        "    printf '%s\\n' $npos $path",
        "end",
        "",
        "function __kctl_at --description 'True when the kctl command path is argv'",
        "    set -l w (__kctl_walk)",
        "    set -e w[1]",
        '    test "$w" = "$argv"',
        "end",
        "",
        "# __kctl_arg N PATH...: the cursor is on positional argument N (from 0; N+ for N or later).",
        "function __kctl_arg --description 'True when the cursor is on a positional argument'",
        "    set -l index $argv[1]",
        "    set -e argv[1]",
        "    set -l w (__kctl_walk)",
        "    set -l npos $w[1]",
        "    set -e w[1]",
        '    test "$w" = "$argv"; or return 1',
        "    if string match -q -- '*+' $index",
        "        test $npos -ge (string trim -r -c + -- $index)",
        "    else",
        "        test $npos -eq $index",
        "    end",
        "end",
        "",
        "# No file names unless a parameter takes one (-F below).",
        "complete -c kctl -f",
    ]
    for cmd in root.walk():
        at = " ".join(("__kctl_at", *cmd.path))
        out += ["", f"# {' '.join((PROG_NAME, *cmd.path))}"]
        for sub in cmd.subcommands:
            out.append(f"complete -c kctl -n {_fq(at)} -a {sub.path[-1]} -d {_fq(sub.help)}")
        for opt in cmd.options:
            flags = []
            for name in opt.names:
                if name.startswith("--"):
                    flags.append(f"-l {name[2:]}")
                elif len(name) == 2:
                    flags.append(f"-s {name[1:]}")
                else:
                    flags.append(f"-o {name[1:]}")
            if opt.takes_value:
                flags.append("-r -F" if opt.files else "-x")
                if opt.choices:
                    flags.append(f"-a {_fq(' '.join(opt.choices))}")
            out.append(f"complete -c kctl -n {_fq(at)} {' '.join(flags)} -d {_fq(opt.help)}")
        fixed, rest = _slots(cmd)
        slots = [(str(i), a) for i, a in enumerate(fixed)]
        if rest is not None:
            slots.append((f"{len(fixed)}+", rest))
        for index, arg in slots:
            cond = _fq(" ".join(("__kctl_arg", index, *cmd.path)))
            if arg.choices:
                out.append(f"complete -c kctl -n {cond} -a {_fq(' '.join(arg.choices))}")
            elif arg.files:
                out.append(f"complete -c kctl -n {cond} -F")
    return "\n".join(out) + "\n"


_GENERATORS: dict[str, Callable[[Command], str]] = {"bash": _bash, "zsh": _zsh, "fish": _fish}


def generate(shell: str, cli: Any = None) -> str:
    """The completion script for `shell` (bash, zsh or fish) of the click command `cli`
    (default: kctl's), ending with one newline."""
    if shell not in SHELLS:
        raise ValueError(f"unsupported shell {shell!r}; expected one of {', '.join(SHELLS)}")
    return _GENERATORS[shell](model(cli))


def file_name(shell: str) -> str:
    return f"{PROG_NAME}.{shell}"


def stale_files(directory: Path) -> list[str]:
    """Names of the scripts in `directory` that are missing or differ from generate()."""
    root = model()
    stale = []
    for shell in SHELLS:
        path = directory / file_name(shell)
        try:
            current = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != _GENERATORS[shell](root):
            stale.append(path.name)
    return stale


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    root = model()
    written = []
    for shell in SHELLS:
        path = directory / file_name(shell)
        path.write_bytes(_GENERATORS[shell](root).encode("utf-8"))
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
            return ExitStatus.ERROR
        print(f"shell completion scripts are up to date ({', '.join(SHELLS)})")
        return ExitStatus.SUCCESS
    for path in write_all(args.dir):
        print(f"wrote {path}")
    return ExitStatus.SUCCESS


if __name__ == "__main__":
    sys.exit(main())
