"""A typed client of the jr2 Orchestrator's API, on Python's standard library alone (3.11 or newer)."""

from . import api, errors
from .api import ROUTES, MenuTool, OutstandingPick, Route
from .client import (
    FINAL_STATES,
    SETTLED_EFFECT_STATES,
    TOKEN_ENV,
    EventStream,
    Frame,
    OrchestratorClient,
    Snapshot,
    WorkspaceStreamItem,
    error_of,
    parse_frame,
    path_for,
    sse_frames,
)
from .errors import *  # noqa: F403 -- one class per error code, listed in errors.__all__
from .errors import ERRORS, Jr2Error, error_for

__all__ = [
    "api",
    "errors",
    "ROUTES",
    "Route",
    "FINAL_STATES",
    "SETTLED_EFFECT_STATES",
    "TOKEN_ENV",
    "EventStream",
    "MenuTool",
    "OutstandingPick",
    "Frame",
    "OrchestratorClient",
    "Snapshot",
    "WorkspaceStreamItem",
    "error_of",
    "parse_frame",
    "path_for",
    "sse_frames",
    *errors.__all__,
]
