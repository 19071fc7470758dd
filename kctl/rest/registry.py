"""The Confluent Schema Registry REST API every worker serves under `/schema-registry` (a
kctl extension; `schema.registry.enable=false` turns it off).

Paths, bodies, answers and `error_code`s are Confluent's, so its clients
(confluent-kafka's SchemaRegistryClient, Confluent's serializers) use it unchanged. Writes
go to the group's leader, which assigns ids: a follower's herder says so and the request
is forwarded, as connector writes are.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers
from kctl.runtime.herder import Herder
from kctl.runtime.registry import Reference, RegistryError, SchemaRegistry, SchemaVersion

PREFIX = "/schema-registry"
# Confluent answers application/vnd.schemaregistry.v1+json by default and application/json
# when asked; its clients read either, and the OpenAPI document declares JSON
MEDIA_TYPE = "application/json"
TAG = "Schema Registry (kctl extension)"


class ReferenceModel(BaseModel):
    name: str
    subject: str
    version: int


class SchemaRequest(BaseModel):
    """A schema to register, look up or check."""

    model_config = ConfigDict(extra="ignore")
    schema_: str = Field(alias="schema", min_length=1)
    schemaType: str | None = None
    references: list[ReferenceModel] = Field(default_factory=list)
    id: int | None = None
    version: int | None = None


class RegisteredModel(BaseModel):
    id: int


class SchemaModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    schema_: str = Field(alias="schema", serialization_alias="schema")
    schemaType: str | None = None
    references: list[ReferenceModel] | None = None


class SubjectVersionModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    subject: str
    version: int
    id: int
    schema_: str = Field(alias="schema", serialization_alias="schema")
    schemaType: str | None = None
    references: list[ReferenceModel] | None = None


class SubjectAndVersion(BaseModel):
    subject: str
    version: int


class CompatibilityCheck(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


_LEVEL = "(?i)^(NONE|BACKWARD|FORWARD|FULL)(_TRANSITIVE)?$"


class ConfigRequest(BaseModel):
    compatibility: str | None = Field(default=None, pattern=_LEVEL)
    compatibilityLevel: str | None = Field(default=None, pattern=_LEVEL)


class ConfigAnswer(BaseModel):
    compatibility: str


class ConfigLevel(BaseModel):
    compatibilityLevel: str


class ModeModel(BaseModel):
    mode: str = Field(pattern="(?i)^(READWRITE|READONLY|IMPORT)$")


_ERRORS = answers(400, 404, 409, 422)  # 400: a request FastAPI cannot validate


def _registry(herder: Herder) -> SchemaRegistry:
    registry = herder.schema_registry
    if registry is None:
        raise RegistryError(404, 404, "This worker serves no schema registry "
                                      "(schema.registry.enable=false)")
    return registry


def _refs(body: SchemaRequest) -> list[Reference]:
    return [Reference(r.name, r.subject, r.version) for r in body.references]


def _schema_type(body: SchemaRequest) -> str:
    return (body.schemaType or "AVRO").upper()


def _with_type(sv: SchemaVersion, out: dict[str, Any]) -> dict[str, Any]:
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                             for r in sv.references]
    return out


def _version_document(sv: SchemaVersion) -> dict[str, Any]:
    return _with_type(sv, {"subject": sv.subject, "version": sv.version, "id": sv.id,
                           "schema": sv.schema})


def _answer(content: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(content, status_code=status, media_type=MEDIA_TYPE)


router = APIRouter(prefix=PREFIX, tags=[TAG], responses=_ERRORS)


@router.get("", summary="The registry's root (Confluent answers {})")
@router.get("/", include_in_schema=False)
def root(herder: HerderDep) -> dict[str, Any]:
    _registry(herder)
    return {}

@router.get("/schemas/types", response_model=list[str], summary="Supported schema types")
def schema_types(herder: HerderDep) -> JSONResponse:
    _registry(herder)
    return _answer(["JSON", "PROTOBUF", "AVRO"])

@router.get("/schemas/ids/{schema_id}", response_model=SchemaModel,
            summary="A schema by its id")
def schema_by_id(herder: HerderDep, schema_id: int, subject: str | None = None) -> JSONResponse:
    sv = _registry(herder).by_id(schema_id)
    return _answer(_with_type(sv, {"schema": sv.schema}))

@router.get("/schemas/ids/{schema_id}/schema", summary="A schema's text by its id")
def schema_text_by_id(herder: HerderDep, schema_id: int) -> JSONResponse:
    sv = _registry(herder).by_id(schema_id)
    return _answer(_raw(sv))

@router.get("/schemas/ids/{schema_id}/versions", response_model=list[SubjectAndVersion],
            summary="The subjects and versions that hold a schema id")
def id_versions(herder: HerderDep, schema_id: int, deleted: bool = False) -> JSONResponse:
    pairs = _registry(herder).id_versions(schema_id, deleted)
    return _answer([{"subject": s, "version": v} for s, v in pairs])

@router.get("/schemas/ids/{schema_id}/subjects", response_model=list[str],
            summary="The subjects that hold a schema id")
def id_subjects(herder: HerderDep, schema_id: int, deleted: bool = False) -> JSONResponse:
    pairs = _registry(herder).id_versions(schema_id, deleted)
    return _answer(sorted({s for s, _ in pairs}))

@router.get("/subjects", response_model=list[str], summary="Subjects")
def subjects(herder: HerderDep, deleted: bool = False, subjectPrefix: str = "") -> JSONResponse:
    return _answer(_registry(herder).subjects(deleted, subjectPrefix))

@router.get("/subjects/{subject}/versions", response_model=list[int],
            summary="A subject's versions")
def versions(herder: HerderDep, subject: str, deleted: bool = False) -> JSONResponse:
    return _answer(_registry(herder).versions(subject, deleted))

@router.get("/subjects/{subject}/versions/{version}", response_model=SubjectVersionModel,
            summary="One version of a subject (a number or latest)")
def version(herder: HerderDep, subject: str, version: str, deleted: bool = False) -> JSONResponse:
    return _answer(_version_document(_registry(herder).version(subject, version, deleted)))

@router.get("/subjects/{subject}/versions/{version}/schema",
            summary="One version's schema text")
def version_schema(herder: HerderDep, subject: str, version: str, deleted: bool = False) -> JSONResponse:
    return _answer(_raw(_registry(herder).version(subject, version, deleted)))

@router.get("/subjects/{subject}/versions/{version}/referencedby", response_model=list[int],
            summary="Ids of schemas that reference this version")
def referenced_by(herder: HerderDep, subject: str, version: str) -> JSONResponse:
    registry = _registry(herder)
    target = registry.version(subject, version)
    ids = sorted({sv.id for s in registry.subjects() for n in registry.versions(s)
                  for sv in [registry.version(s, n)]
                  if any(r.subject == subject and r.version == target.version
                         for r in sv.references)})
    return _answer(ids)

@router.post("/subjects/{subject}/versions", response_model=RegisteredModel,
             summary="Register a schema under a subject")
def register(herder: HerderDep, subject: str, body: SchemaRequest, normalize: bool = False) -> JSONResponse:
    registered = _registry(herder).register(subject, body.schema_, _schema_type(body),
                                            _refs(body), normalize, body.id, body.version)
    return _answer({"id": registered.id})

@router.post("/subjects/{subject}", response_model=SubjectVersionModel,
             summary="Look a schema up in a subject")
def lookup(herder: HerderDep, subject: str, body: SchemaRequest, deleted: bool = False) -> JSONResponse:
    sv = _registry(herder).lookup(subject, body.schema_, _schema_type(body), _refs(body),
                                  deleted)
    return _answer(_version_document(sv))

@router.delete("/subjects/{subject}", response_model=list[int],
               summary="Delete a subject (soft, or permanent after a soft delete)")
def delete_subject(herder: HerderDep, subject: str, permanent: bool = False) -> JSONResponse:
    return _answer(_registry(herder).delete_subject(subject, permanent))

@router.delete("/subjects/{subject}/versions/{version}", response_model=int,
               summary="Delete a version (soft, or permanent after a soft delete)")
def delete_version(herder: HerderDep, subject: str, version: str, permanent: bool = False) -> JSONResponse:
    return _answer(_registry(herder).delete_version(subject, version, permanent))

@router.post("/compatibility/subjects/{subject}/versions/{version}",
             response_model=CompatibilityCheck,
             summary="Whether a schema is compatible with one version")
def compatible_with(herder: HerderDep, subject: str, version: str, body: SchemaRequest,
                    verbose: bool = False) -> JSONResponse:
    problems = _registry(herder).test_compatibility(
        subject, body.schema_, _schema_type(body), _refs(body), version)
    return _answer(_check(problems, verbose))

@router.post("/compatibility/subjects/{subject}/versions",
             response_model=CompatibilityCheck,
             summary="Whether a schema is compatible with the versions its level names")
def compatible(herder: HerderDep, subject: str, body: SchemaRequest, verbose: bool = False) -> JSONResponse:
    problems = _registry(herder).test_compatibility(
        subject, body.schema_, _schema_type(body), _refs(body))
    return _answer(_check(problems, verbose))

@router.get("/config", response_model=ConfigLevel, summary="The global compatibility level")
def global_config(herder: HerderDep) -> JSONResponse:
    return _answer({"compatibilityLevel": _registry(herder).compatibility(None).value})

@router.put("/config", response_model=ConfigAnswer, summary="Set the global level")
def set_global_config(herder: HerderDep, body: ConfigRequest) -> JSONResponse:
    level = _registry(herder).set_compatibility(None, _level(body))
    return _answer({"compatibility": level.value})

@router.delete("/config", response_model=ConfigLevel,
               summary="Reset the global level to BACKWARD")
def delete_global_config(herder: HerderDep) -> JSONResponse:
    return _answer({"compatibilityLevel":
                    _registry(herder).delete_compatibility(None).value})

@router.get("/config/{subject}", response_model=ConfigLevel,
            summary="A subject's compatibility level")
def subject_config(herder: HerderDep, subject: str, defaultToGlobal: bool = False) -> JSONResponse:
    level = _registry(herder).compatibility(subject, defaultToGlobal)
    return _answer({"compatibilityLevel": level.value})

@router.put("/config/{subject}", response_model=ConfigAnswer,
            summary="Set a subject's compatibility level")
def set_subject_config(herder: HerderDep, subject: str, body: ConfigRequest) -> JSONResponse:
    level = _registry(herder).set_compatibility(subject, _level(body))
    return _answer({"compatibility": level.value})

@router.delete("/config/{subject}", response_model=ConfigLevel,
               summary="Remove a subject's level (the global one applies)")
def delete_subject_config(herder: HerderDep, subject: str) -> JSONResponse:
    return _answer({"compatibilityLevel":
                    _registry(herder).delete_compatibility(subject).value})

@router.get("/mode", response_model=ModeModel, summary="The global mode")
def global_mode(herder: HerderDep) -> JSONResponse:
    return _answer({"mode": _registry(herder).mode(None).value})

@router.put("/mode", response_model=ModeModel, summary="Set the global mode")
def set_global_mode(herder: HerderDep, body: ModeModel, force: bool = False) -> JSONResponse:
    return _answer({"mode": _registry(herder).set_mode(None, body.mode, force).value})

@router.get("/mode/{subject}", response_model=ModeModel, summary="A subject's mode")
def subject_mode(herder: HerderDep, subject: str, defaultToGlobal: bool = False) -> JSONResponse:
    return _answer({"mode": _registry(herder).mode(subject, defaultToGlobal).value})

@router.put("/mode/{subject}", response_model=ModeModel, summary="Set a subject's mode")
def set_subject_mode(herder: HerderDep, subject: str, body: ModeModel, force: bool = False) -> JSONResponse:
    return _answer({"mode": _registry(herder).set_mode(subject, body.mode, force).value})

@router.delete("/mode/{subject}", response_model=ModeModel,
               summary="Remove a subject's mode")
def delete_subject_mode(herder: HerderDep, subject: str) -> JSONResponse:
    return _answer({"mode": _registry(herder).delete_mode(subject).value})


def _raw(sv: SchemaVersion) -> Any:
    try:
        return json.loads(sv.schema)
    except json.JSONDecodeError:
        return sv.schema


def _check(problems: list[str], verbose: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"is_compatible": not problems}
    if verbose:
        out["messages"] = problems
    return out


def _level(body: ConfigRequest) -> str:
    level = body.compatibility or body.compatibilityLevel
    if not level:
        raise RegistryError(422, 42203, "Invalid compatibility level: none given")
    return level


def install_schema_registry(app: FastAPI) -> None:
    """The registry's errors answered in Confluent's shape (its routes are `router`)."""

    async def registry_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RegistryError)
        return JSONResponse({"error_code": exc.error_code, "message": str(exc)},
                            status_code=exc.status, media_type=MEDIA_TYPE)

    app.add_exception_handler(RegistryError, registry_error)
