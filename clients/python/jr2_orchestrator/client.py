"""A typed client of the jr2 Orchestrator's API, on Python's standard library alone.

Every route of the API (the table in ``api.py``, generated from the API's OpenAPI document), with
the bodies and answers as TypedDicts; the workspace's and a turn's events as Server-Sent Events,
read by an iterator. An error answer raises :class:`OrchestratorError` carrying the HTTP status and
the API's error ``code``. A refused connection is tried again within a reconnect window, so a
Machine rides through an Orchestrator's restart (docs/decisions/0061-clients-beyond-typescript.md).
"""

from __future__ import annotations

import codecs
import http.client
import json
import ssl
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypedDict, TypeVar, cast
from urllib.parse import quote, urlsplit

from .api import (
    ROUTES,
    AbortReceipt,
    AllowedSet,
    AnswerPickAnswer,
    CreateWorkspaceAnswer,
    CreateWorkspaceBody,
    DeleteWorkspaceAnswer,
    EffectBody,
    EffectList,
    EffectRecord,
    EgressLogAnswer,
    GetEgressAnswer,
    GetWorkspaceAnswer,
    ListPicksAnswer,
    ListWorkspacesAnswer,
    ReadAllowedAnswer,
    ReadDeliveryAnswer,
    SetEgressAnswer,
    StreamEvent,
    SubmitTurnBody,
    TakePickAnswer,
    TakePickBody,
    TurnSubmitted,
    WorkspaceEvent,
)

T = TypeVar("T")

#: The Effect states after which nothing more happens to it.
SETTLED_EFFECT_STATES: frozenset[str] = frozenset({"succeeded", "failed", "unknown"})

#: The workspace states after which nothing more happens.
FINAL_STATES: frozenset[str] = frozenset({"lost", "failed", "destroyed"})


class OrchestratorError(Exception):
    """An error the API answered (``{"error": {"code", "message"}}``), or an answer this client
    could not read (code ``unreadable``, ``http``, ``stream``, ``timeout``...)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"OrchestratorError(status={self.status}, code={self.code!r}, message={self.message!r})"


class Snapshot(TypedDict):
    """The first item of a workspace's event stream: its view when the stream began."""

    type: Literal["snapshot"]
    view: GetWorkspaceAnswer


#: One item of a workspace's event stream.
WorkspaceStreamItem = Snapshot | WorkspaceEvent


@dataclass(frozen=True)
class Frame:
    """One Server-Sent Events frame."""

    event: str
    data: str
    id: str | None = None


def parse_frame(text: str) -> Frame | None:
    """One frame's fields; None for a frame with no data (a keep-alive comment)."""
    event = "message"
    frame_id: str | None = None
    data: list[str] = []
    for line in text.split("\n"):
        if line == "" or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            frame_id = value
    return Frame(event, "\n".join(data), frame_id) if data else None


def sse_frames(chunks: Iterable[bytes]) -> Iterator[Frame]:
    """The frames of an event stream as its bytes arrive, in chunks cut anywhere (mid-frame,
    mid-character); comment-only frames skipped."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    buffer = ""
    for chunk in chunks:
        buffer += decoder.decode(chunk)
        buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        while (cut := buffer.find("\n\n")) >= 0:
            frame = parse_frame(buffer[:cut])
            buffer = buffer[cut + 2 :]
            if frame is not None:
                yield frame


def error_of(status: int, text: str) -> OrchestratorError:
    """The API's error body as an OrchestratorError; any other answer by its status."""
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str):
            return OrchestratorError(status, error["code"], error["message"])
    except (ValueError, AttributeError):
        pass
    return OrchestratorError(status, "http", f"HTTP {status}: {text[:200]}")


class EventStream(Generic[T]):
    """An open event stream: iterate it for its items; it ends when the server ends it. ``close()``
    (or leaving a ``with`` block) closes the connection early."""

    def __init__(self, items: Iterator[T], close: Callable[[], None]) -> None:
        self._items = items
        self._close = close

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)

    def close(self) -> None:
        self._close()

    def __enter__(self) -> EventStream[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class OrchestratorClient:
    """The Orchestrator's API for one token.

    :param url: the Orchestrator's base url, e.g. ``http://127.0.0.1:8090``.
    :param token: an API token (one line of JR2_API_TOKENS_FILE); for the sandbox routes, a
        Sandbox token.
    :param ca_file: for an https url, the PEM CA bundle its certificate chains to, when not a
        public one (or ``ca``: the PEM text itself).
    :param reconnect_window: seconds a call keeps trying while the Orchestrator refuses
        connections, as it does while it restarts; 0 tries once.
    :param timeout: seconds a call waits on the network (default 60; streams wait as long as they
        are open: the server sends a keep-alive while idle).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        ca_file: str | None = None,
        ca: str | None = None,
        reconnect_window: float = 30.0,
        timeout: float = 60.0,
    ) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"OrchestratorClient url {url}: write an http:// or https:// url")
        if (ca_file or ca) and parts.scheme != "https":
            raise ValueError(f"OrchestratorClient url {url}: a CA is for an https:// url; write https://")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path
        self._token = token
        self._reconnect_window = reconnect_window
        self._timeout = timeout
        self._ssl = ssl.create_default_context(cafile=ca_file, cadata=ca) if self._https else None

    # ---- workspaces

    def create_workspace(self, body: CreateWorkspaceBody) -> CreateWorkspaceAnswer:
        """Places a workspace; answers its name (the workspace then moves on by itself)."""
        return cast(CreateWorkspaceAnswer, self._call("createWorkspace", {}, body))

    def list_workspaces(self) -> ListWorkspacesAnswer:
        """Every workspace this token may see."""
        return cast(ListWorkspacesAnswer, self._call("listWorkspaces", {}))

    def workspace(self, name: str) -> GetWorkspaceAnswer:
        return cast(GetWorkspaceAnswer, self._call("getWorkspace", {"name": name}))

    def wait_ready(self, name: str, *, timeout: float = 120.0, interval: float = 0.5) -> GetWorkspaceAnswer:
        """Polls the workspace until it is ready; raises naming the failure when it ends otherwise
        (status 409, the state as code), or when ``timeout`` passes first (408, ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.workspace(name)
            state = view["state"]
            if state == "ready":
                return view
            if state in FINAL_STATES:
                if "failure" in view:
                    f = view["failure"]
                    why = f"{f['stage']} failed: {f['reason']}: {f['message']}"
                elif "lost" in view:
                    why = f"lost: {view['lost']['reason']}: {view['lost']['message']}"
                else:
                    why = state
                raise OrchestratorError(409, state, f"workspace {name} is {state} ({why})")
            if time.monotonic() >= deadline:
                wait = f", waiting: {json.dumps(view['wait'])}" if "wait" in view else ""
                raise OrchestratorError(408, "timeout", f"workspace {name} not ready in time: {state}{wait}")
            time.sleep(interval)

    def delete_workspace(self, name: str) -> DeleteWorkspaceAnswer:
        """Ends the workspace (202: it is being destroyed)."""
        return cast(DeleteWorkspaceAnswer, self._call("deleteWorkspace", {"name": name}))

    def workspace_events(self, name: str) -> EventStream[WorkspaceStreamItem]:
        """The workspace's events: first a ``snapshot`` of its view, then each transition, wait and
        renewal as it happens, until a final state, when the server ends the stream."""

        def items(frames: Iterator[Frame]) -> Iterator[WorkspaceStreamItem]:
            for frame in frames:
                data = _read_json(frame.data, "a workspace event")
                if frame.event == "snapshot":
                    yield Snapshot(type="snapshot", view=cast(GetWorkspaceAnswer, data))
                else:
                    yield cast(WorkspaceEvent, data)

        return self._stream("workspaceEvents", {"name": name}, {}, items)

    def egress(self, name: str) -> GetEgressAnswer:
        """The workspace's egress list (decision 0051)."""
        return cast(GetEgressAnswer, self._call("getEgress", {"name": name}))

    def set_egress(self, name: str, allow: list[str]) -> SetEgressAnswer:
        """Replaces the workspace's egress list; in force within 2 s, with no restart."""
        return cast(SetEgressAnswer, self._call("setEgress", {"name": name}, {"allow": allow}))

    def egress_log(self, name: str) -> EgressLogAnswer:
        """The egress point's log of the workspace's connections, oldest first."""
        return cast(EgressLogAnswer, self._call("egressLog", {"name": name}))

    # ---- an Agent's turns and picks

    def submit_turn(self, name: str, body: SubmitTurnBody) -> TurnSubmitted:
        """Gives one of the workspace's Agents a turn; answers the conversation's iid and the admission."""
        return cast(TurnSubmitted, self._call("submitTurn", {"name": name}, body))

    def turn_events(self, name: str, iid: str, *, last_event_id: int | None = None) -> EventStream[StreamEvent]:
        """The conversation's events, from its latest turn's admission or after ``last_event_id``
        (each event's ``offset`` is its SSE id), until that turn's ``end``, when the server ends the
        stream. A stream that fails after it began raises OrchestratorError (code ``stream``):
        resume by passing the last event's offset."""
        headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}

        def items(frames: Iterator[Frame]) -> Iterator[StreamEvent]:
            for frame in frames:
                yield cast(StreamEvent, _read_json(frame.data, "a turn event"))

        return self._stream("turnEvents", {"name": name, "iid": iid}, headers, items)

    def abort(self, name: str, iid: str) -> AbortReceipt:
        """Aborts the conversation's running turn."""
        return cast(AbortReceipt, self._call("abortTurn", {"name": name, "iid": iid}))

    def set_allowed(self, name: str, iid: str, allowed: list[str]) -> AllowedSet:
        """Changes the conversation's Allowed picks; its running turn is told at its next step boundary."""
        return cast(AllowedSet, self._call("setAllowed", {"name": name, "iid": iid}, {"allowed": allowed}))

    def picks(self, name: str) -> ListPicksAnswer:
        """The workspace's outstanding picks."""
        return cast(ListPicksAnswer, self._call("listPicks", {"name": name}))

    def answer(self, name: str, delivery_id: str, answer: str) -> AnswerPickAnswer:
        """Answers a pick: the text the Agent's model reads as the Menu tool's result."""
        params = {"name": name, "deliveryId": delivery_id}
        return cast(AnswerPickAnswer, self._call("answerPick", params, {"answer": answer}))

    # ---- a Machine's Effects (run by the workspace's Effector, each at most once)

    def create_effect(self, name: str, body: EffectBody) -> EffectRecord:
        """Asks the workspace's Effector for an Effect (a push, an http request, a credentialed
        command), recorded before it runs. The same ``id`` again with the same body answers its
        record and runs nothing, so a Machine may retry a create it did not hear the answer of."""
        return cast(EffectRecord, self._call("createEffect", {"name": name}, body))

    def get_effect(self, name: str, effect_id: str, *, wait_seconds: int | None = None) -> EffectRecord:
        """One Effect's record; with ``wait_seconds`` (at most 60) the server holds until it settles."""
        query = "" if wait_seconds is None else f"?wait={max(0, int(wait_seconds))}"
        params = {"name": name, "effectId": effect_id}
        return cast(EffectRecord, self._call("getEffect", params, query=query, timeout=self._timeout + 70))

    def list_effects(self, name: str) -> EffectList:
        """The workspace's Effects, in the order they were sent."""
        return cast(EffectList, self._call("listEffects", {"name": name}))

    def run_effect(self, name: str, body: EffectBody, *, timeout: float = 600.0) -> EffectRecord:
        """Creates the Effect (or finds it, by its id) and waits until it settles: its record, whose
        ``state`` is succeeded, failed or unknown. Raises OrchestratorError (code ``timeout``) when
        ``timeout`` seconds pass first; the Effect then still runs, and the same call waits on it again."""
        deadline = time.monotonic() + timeout
        record = self.create_effect(name, body)
        while record["state"] not in SETTLED_EFFECT_STATES:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OrchestratorError(408, "timeout", f"Effect {body['id']} of workspace {name} is still {record['state']}")
            record = self.get_effect(name, body["id"], wait_seconds=min(60, max(1, int(left + 0.999))))
        return record

    # ---- a Sandbox's routes (the token is the Sandbox token its Custodian adds)

    def take_pick(self, iid: str, body: TakePickBody) -> TakePickAnswer:
        """A Harness's pick."""
        return cast(TakePickAnswer, self._call("takePick", {"iid": iid}, body))

    def read_allowed(self, iid: str) -> ReadAllowedAnswer:
        """The running turn's Allowed picks now."""
        return cast(ReadAllowedAnswer, self._call("readAllowed", {"iid": iid}))

    def read_delivery(self, iid: str, delivery_id: str, *, wait_ms: int | None = None) -> ReadDeliveryAnswer:
        """A pick's delivery, held up to ``wait_ms`` while it is outstanding."""
        query = "" if wait_ms is None else f"?wait={int(wait_ms)}"
        return cast(ReadDeliveryAnswer, self._call("readDelivery", {"iid": iid, "deliveryId": delivery_id}, query=query))

    # ---- the service

    def healthy(self) -> bool:
        """Whether the Orchestrator serves (GET /healthz answers 200)."""
        conn, res = self._send("healthz", path_for("healthz"), {})
        try:
            res.read()
            return res.status == 200
        finally:
            conn.close()

    def metrics(self) -> str:
        """The Prometheus metrics text (an admin token's)."""
        return self._text("metrics")

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI document."""
        return cast(dict[str, Any], _read_json(self._text("openapi"), "GET /v1/openapi.json"))

    # ---- the wire

    def _call(
        self, route: str, params: dict[str, str], body: object = None, query: str = "", timeout: float | None = None
    ) -> object:
        """One route of the table, its method and path from there; the answer's JSON."""
        method = ROUTES[route].method
        path = path_for(route, params) + query
        conn, res = self._send(route, path, {}, body, timeout=timeout)
        try:
            text = res.read().decode("utf-8", "replace")
        finally:
            conn.close()
        if res.status >= 400:
            raise error_of(res.status, text)
        value = _read_json(text, f"{method} {path}", res.status)
        if not isinstance(value, dict):
            raise OrchestratorError(502, "unreadable", f"{method} {path} answered {text[:200]}, not an object")
        return value

    def _text(self, route: str) -> str:
        conn, res = self._send(route, path_for(route), {})
        try:
            text = res.read().decode("utf-8", "replace")
        finally:
            conn.close()
        if res.status >= 400:
            raise error_of(res.status, text)
        return text

    def _stream(
        self,
        route: str,
        params: dict[str, str],
        headers: dict[str, str],
        items: Callable[[Iterator[Frame]], Iterator[T]],
    ) -> EventStream[T]:
        conn, res = self._send(route, path_for(route, params), {"accept": "text/event-stream", **headers}, stream=True)
        if res.status != 200:
            try:
                text = res.read().decode("utf-8", "replace")
            finally:
                conn.close()
            raise error_of(res.status, text)

        def chunks() -> Iterator[bytes]:
            while chunk := res.read1(65536):
                yield chunk

        def frames() -> Iterator[Frame]:
            try:
                for frame in sse_frames(chunks()):
                    if frame.event != "error":
                        yield frame
                        continue
                    message = frame.data
                    try:
                        message = str(json.loads(frame.data).get("message", frame.data))
                    except (ValueError, AttributeError):
                        pass  # not JSON: the text as it came
                    raise OrchestratorError(502, "stream", f"the stream failed: {message}")
            finally:
                conn.close()

        return EventStream(items(frames()), conn.close)

    def _send(
        self,
        route: str,
        path: str,
        headers: dict[str, str],
        body: object = None,
        *,
        stream: bool = False,
        timeout: float | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The request sent, again (backoff 0.1 s to 1 s) while the connection is refused within
        the reconnect window: nothing of it was sent, so a create may be sent again too."""
        payload = None if body is None else json.dumps(body).encode("utf-8")
        all_headers = {"authorization": f"Bearer {self._token}", **headers}
        if payload is not None:
            all_headers["content-type"] = "application/json"
        until = time.monotonic() + self._reconnect_window
        backoff = 0.1
        while True:
            conn = self._connection(None if stream else (timeout or self._timeout))
            try:
                conn.request(ROUTES[route].method, self._prefix + path, body=payload, headers=all_headers)
                return conn, conn.getresponse()
            except ConnectionRefusedError:
                conn.close()
                if time.monotonic() + backoff > until:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
            except BaseException:
                conn.close()
                raise

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)


def path_for(route: str, params: dict[str, str] | None = None) -> str:
    """A route's path with its parameters filled in, each percent-encoded."""
    path = ROUTES[route].path
    for key, value in (params or {}).items():
        path = path.replace("{" + key + "}", quote(value, safe=""))
    if "{" in path:
        raise ValueError(f"{route}: the path needs {path[path.index('{') + 1 : path.index('}')]}")
    return path


def _read_json(text: str, what: str, status: int = 502) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise OrchestratorError(status, "unreadable", f"{what} answered no JSON: {text[:200]}") from None
