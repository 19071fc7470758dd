"""Kafka Connect's plugin paths: what is installed, each plugin's config keys, and a
config validated as `connector create` would validate it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers
from kctl.rest.models import ConfigInfos, ConfigKeyInfo, ConfigMap, PluginInfo

__all__ = ["router"]

router = APIRouter()


@router.get("/connector-plugins", response_model=list[PluginInfo], responses=answers(400))
def plugins(herder: HerderDep, connectorsOnly: bool = True) -> Any:
    return [p.to_json() for p in herder.plugins(connectorsOnly)]


@router.get("/connector-plugins/{plugin}/config", response_model=list[ConfigKeyInfo],
            responses=answers(404))
def plugin_config(plugin: str, herder: HerderDep) -> Any:
    return herder.plugin_config(plugin)


@router.put("/connector-plugins/{plugin}/config/validate", response_model=ConfigInfos,
            responses=answers(400))
def validate(plugin: str, body: ConfigMap, herder: HerderDep) -> Any:
    return herder.validate_connector_config(plugin, body)
