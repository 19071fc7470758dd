"""The Schema Registry's values and errors, as Confluent's REST API and `_schemas` topic
spell them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kctl.errors import KctlError

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class Compatibility(enum.StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


class Mode(enum.StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject: a record of the `_schemas` topic."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False


class RegistryError(KctlError):
    """An answer of the registry's API: an HTTP status and Confluent's `error_code`."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status = status
        self.error_code = error_code


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "") -> RegistryError:
    return RegistryError(404, 40403, f"Schema not found{': ' + detail if detail else ''}")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set "
                                     "permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                     "permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted."
                                     "Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                     "first before being permanently deleted")


def compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                     "compatibility configured")


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode "
                                     "configured")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version "
                                     "id. Allowed values are between [1, 2^31-1] and the string "
                                     "\"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, "
                                     f"backward, forward, full, backward_transitive, "
                                     f"forward_transitive, and full_transitive: {level}")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY and "
                                     f"IMPORT: {mode}")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    detail = "; ".join(messages)
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                                   f"schema for subject \"{subject}\", details: [{detail}]")
