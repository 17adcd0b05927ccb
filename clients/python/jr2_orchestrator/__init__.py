"""A typed client of the jr2 Orchestrator's API, on Python's standard library alone (3.11 or newer)."""

from . import api
from .api import ROUTES, MenuTool, OutstandingPick, Route
from .client import (
    FINAL_STATES,
    SETTLED_EFFECT_STATES,
    EventStream,
    Frame,
    OrchestratorClient,
    OrchestratorError,
    Snapshot,
    WorkspaceStreamItem,
    error_of,
    parse_frame,
    path_for,
    sse_frames,
)

__all__ = [
    "api",
    "ROUTES",
    "Route",
    "FINAL_STATES",
    "SETTLED_EFFECT_STATES",
    "EventStream",
    "MenuTool",
    "OutstandingPick",
    "Frame",
    "OrchestratorClient",
    "OrchestratorError",
    "Snapshot",
    "WorkspaceStreamItem",
    "error_of",
    "parse_frame",
    "path_for",
    "sse_frames",
]
