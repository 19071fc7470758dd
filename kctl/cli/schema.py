"""`kctl schema ...`: the Schema Registry a worker serves (Confluent's API under
/schema-registry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, client, console, done, fail, fmt, run
from kctl.exit_status import ExitStatus

app = typer.Typer(help="Schemas in the worker's Schema Registry (Confluent's API).",
                  no_args_is_help=True)

PREFIX = "/schema-registry"
SubjectArg = typer.Argument(..., help="A subject, e.g. orders-value.")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


def _get(path: str, **params: Any) -> Any:
    c = client()
    return run(lambda: c.get(f"{PREFIX}{path}", params=params or None))


@app.command("list")
def schema_list(deleted: bool = typer.Option(False, "--deleted",
                                             help="Include soft-deleted subjects."),
                output: Output | None = OutputOpt) -> None:
    """Subjects, with their latest version and schema id."""
    subjects = _get("/subjects", deleted=str(deleted).lower())
    rows = []
    for subject in subjects:
        latest = _get(f"/subjects/{subject}/versions/latest", deleted=str(deleted).lower())
        rows.append({"subject": subject, "version": latest["version"], "id": latest["id"],
                     "type": latest.get("schemaType", "AVRO")})
    if not render.dump(rows, fmt(output), console):
        console.print(render.table(["subject", "latest version", "id", "type"],
                                   ((r["subject"], r["version"], r["id"], r["type"])
                                    for r in rows)))


@app.command("versions")
def schema_versions(subject: str = SubjectArg, output: Output | None = OutputOpt) -> None:
    """A subject's versions."""
    versions = _get(f"/subjects/{subject}/versions")
    if not render.dump(versions, fmt(output), console):
        rows = []
        for v in versions:
            doc = _get(f"/subjects/{subject}/versions/{v}")
            rows.append((v, doc["id"], doc.get("schemaType", "AVRO")))
        console.print(render.table(["version", "id", "type"], rows))


@app.command("show")
def schema_show(subject: str = SubjectArg,
                version: str = typer.Option("latest", "--version", "-v",
                                            help="A version number, or latest."),
                output: Output | None = OutputOpt) -> None:
    """One version of a subject: its id, type and schema."""
    doc = _get(f"/subjects/{subject}/versions/{version}")
    if render.dump(doc, fmt(output), console):
        return
    console.print(f"{doc['subject']} version {doc['version']}, id {doc['id']}, "
                  f"{doc.get('schemaType', 'AVRO')}", highlight=False, markup=False)
    try:
        text = json.dumps(json.loads(doc["schema"]), indent=2)
    except json.JSONDecodeError:
        text = doc["schema"]
    console.print(text, highlight=False, markup=False)


@app.command("compat")
def schema_compat(subject: str = SubjectArg,
                  file: Path = typer.Argument(..., help="The schema to check (a file)."),
                  schema_type: str = typer.Option("AVRO", "--type",
                                                  help="AVRO, JSON or PROTOBUF."),
                  version: str = typer.Option(None, "--version", "-v",
                                              help="Check against this version only "
                                                   "[default: those the level names]."),
                  output: Output | None = OutputOpt) -> None:
    """Whether a schema may be registered under a subject (exit 1 when it may not)."""
    try:
        text = file.read_text()
    except OSError as e:
        raise fail(f"cannot read {file}: {e.strerror}", ExitStatus.USAGE) from None
    path = f"/compatibility/subjects/{subject}/versions" + (f"/{version}" if version else "")
    body = {"schema": text, "schemaType": schema_type.upper()}
    c = client()
    answer = run(lambda: c.post(f"{PREFIX}{path}", params={"verbose": "true"}, json=body))
    if not render.dump(answer, fmt(output), console):
        if answer["is_compatible"]:
            console.print(f"compatible with {subject}", highlight=False, markup=False)
        else:
            console.print(f"NOT compatible with {subject}:", highlight=False, markup=False)
            for message in answer.get("messages") or []:
                console.print(f"  - {message}", highlight=False, markup=False)
    if not answer["is_compatible"]:
        raise typer.Exit(ExitStatus.ERROR)


@app.command("config")
def schema_config(subject: str = typer.Argument(None, help="A subject [default: global]."),
                  level: str = typer.Option(None, "--level",
                                            help="Set the compatibility level: "
                                                 + ", ".join(LEVELS) + "."),
                  output: Output | None = OutputOpt) -> None:
    """Show or set the compatibility level, globally or of one subject."""
    path = f"{PREFIX}/config" + (f"/{subject}" if subject else "")
    c = client()
    if level is None:
        answer = run(lambda: c.get(path, params={"defaultToGlobal": "true"} if subject else None))
        if not render.dump(answer, fmt(output), console):
            console.print(answer["compatibilityLevel"], highlight=False, markup=False)
        return
    if level.upper() not in LEVELS:
        raise fail(f"unknown level {level!r}: one of {', '.join(LEVELS)}", ExitStatus.USAGE)
    answer = run(lambda: c.put(path, json={"compatibility": level.upper()}))
    done(f"{subject or 'global'}: {answer['compatibility']}", output, answer)
