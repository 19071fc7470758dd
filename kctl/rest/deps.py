"""What a route is given: the herder it calls, and the worker's loggers and clock.

`create_app` puts them in the app's state; a route names what it needs by type
(`herder: HerderDep`), so each router is a module of its own with no closure over them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from kctl.runtime.herder import Herder
from kctl.runtime.loggers import Loggers

__all__ = ["ClockDep", "HerderDep", "LoggersDep"]


async def _herder(request: Request) -> Herder:
    herder: Herder = request.app.state.herder
    return herder


async def _loggers(request: Request) -> Loggers:
    loggers: Loggers = request.app.state.loggers
    return loggers


async def _clock(request: Request) -> Callable[[], float]:
    clock: Callable[[], float] = request.app.state.clock
    return clock


HerderDep = Annotated[Herder, Depends(_herder)]
LoggersDep = Annotated[Loggers, Depends(_loggers)]
ClockDep = Annotated[Callable[[], float], Depends(_clock)]
