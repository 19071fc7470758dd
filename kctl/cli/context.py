"""`kctl context ...`: named worker URLs (kcctl's contexts); the file they live in is
`contexts.py`."""

from __future__ import annotations

import sys
from typing import Any

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, console, done, fail, fmt, run, state, worker_url
from kctl.exit_status import ExitStatus

app = typer.Typer(help="Named worker URLs (kcctl's contexts).", no_args_is_help=True)

ContextArg = typer.Argument(..., help="The context's name.")


def _contexts() -> Any:
    from kctl.cli.contexts import Contexts

    return run(Contexts.load)


@app.command("set")
def context_set(name: str = ContextArg, url: str = typer.Option(..., "--url", help="The worker's REST URL."),
                use: bool = typer.Option(False, "--use", help="Make it the current context."),
                cacert: str = typer.Option(None, "--cacert",
                                           help="CA certificate(s) (PEM) to verify an https "
                                                "worker with."),
                user: str = typer.Option(None, "--user",
                                         help="User for the worker's Basic auth; the password "
                                              "comes from --password-stdin, KCTL_PASSWORD or "
                                              "a prompt, never from the command line."),
                password_stdin: bool = typer.Option(False, "--password-stdin",
                                                    help="Read the password from stdin."),
                output: Output | None = OutputOpt) -> None:
    """Add or change a context (the first one becomes current). The file is private
    (mode 0600): it may hold a password."""
    import os

    password = None
    if user:
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        elif os.environ.get("KCTL_PASSWORD") is not None:
            password = os.environ["KCTL_PASSWORD"]
        elif sys.stdin.isatty():
            password = typer.prompt(f"password for {user}", hide_input=True)
        else:
            raise fail("--user needs a password: --password-stdin, KCTL_PASSWORD or a "
                       "terminal to prompt on", ExitStatus.USAGE)
    ctx = _contexts()
    run(lambda: ctx.set(name, url, cacert=cacert, user=user, password=password))
    if use:
        ctx.use(name)
    run(ctx.save)
    done(f"context {name} set to {ctx.contexts[name]['url']}"
         + (" (current)" if ctx.current == name else ""), output, _context_json(ctx, name))


def _context_json(ctx: Any, name: str) -> dict[str, Any]:
    c = ctx.contexts[name]
    extra = {k: c[k] for k in ("cacert", "user") if c.get(k)}  # never the password
    return {"name": name, "url": c["url"], **extra, "current": ctx.current == name}


@app.command("use")
def context_use(name: str = ContextArg, output: Output | None = OutputOpt) -> None:
    """Make a context the current one."""
    ctx = _contexts()
    run(lambda: ctx.use(name))
    run(ctx.save)
    done(f"now using context {name} ({ctx.contexts[name]['url']})", output,
         _context_json(ctx, name))


@app.command("list")
def context_list(output: Output | None = OutputOpt) -> None:
    """Contexts, the current one marked."""
    ctx = _contexts()
    data = [{"name": n, "url": c["url"], "current": n == ctx.current}
            for n, c in sorted(ctx.contexts.items())]
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["", "name", "url"], (
            ("*" if d["current"] else "", d["name"], d["url"]) for d in data)))


@app.command("current")
def context_current(output: Output | None = OutputOpt) -> None:
    """The current context and the URL commands use (after --url and KCTL_URL)."""
    ctx = _contexts()
    url = worker_url() or "http://127.0.0.1:8083"
    name = state.context or ctx.current
    source = ("--url / KCTL_URL" if state.url else f"context {name}" if name else "default")
    if not render.dump({"name": name, "url": url, "from": source}, fmt(output), console):
        console.print(f"{name or '(none)'}  {url}  (from {source})", highlight=False,
                      markup=False)


@app.command("delete")
def context_delete(name: str = ContextArg, output: Output | None = OutputOpt) -> None:
    """Forget a context."""
    ctx = _contexts()
    gone = run(lambda: _context_json(ctx, name) if name in ctx.contexts else ctx.get(name))
    run(lambda: ctx.delete(name))
    run(ctx.save)
    done(f"context {name} deleted", output, gone)
