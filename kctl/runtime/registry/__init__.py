"""A Confluent-compatible Schema Registry that every worker serves: its semantics
(`registry`), each format's rules (`formats`), and its values and errors (`model`)."""

from kctl.runtime.registry.model import Compatibility, Mode, Reference, RegistryError, SchemaVersion
from kctl.runtime.registry.registry import Registered, SchemaRegistry

__all__ = ["Compatibility", "Mode", "Reference", "Registered", "RegistryError", "SchemaRegistry",
           "SchemaVersion"]
