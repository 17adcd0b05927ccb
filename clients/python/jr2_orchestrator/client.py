"""A typed client of the jr2 Orchestrator's API, on Python's standard library alone.

Every route of the API (the table in ``api.py``, generated from the API's OpenAPI document), with
the bodies and answers as TypedDicts; the workspace's and a turn's events as Server-Sent Events,
read by an iterator. An error answer raises its code's subclass of :class:`Jr2Error` (errors.py,
generated from the error catalogue) carrying the HTTP status, the API's error ``code`` and message.
A refused connection is tried again within a reconnect window (30 s), and so is an idempotent call
(GET, HEAD, PUT, DELETE) whose connection is reset before any answer, so a Machine rides through an
Orchestrator's restart or a rollout of its replicas (docs/decisions/0061-clients-beyond-typescript.md,
decision 0079). The client keeps its
connections alive between calls; ``close()``, or leaving a ``with`` block, closes them and every
stream still open (decision 0077).
"""

from __future__ import annotations

import codecs
import errno
import http.client
import json
import os
import ssl
import threading
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
    SetEgressAnswer,
    StreamEvent,
    SubmitTurnBody,
    TurnSubmitted,
    WorkspaceEvent,
)
from .errors import Jr2Error, error_for

T = TypeVar("T")

#: The Effect states after which nothing more happens to it.
SETTLED_EFFECT_STATES: frozenset[str] = frozenset({"succeeded", "failed", "unknown"})

#: The workspace states after which nothing more happens.
FINAL_STATES: frozenset[str] = frozenset({"lost", "failed", "destroyed"})

#: The environment variable the token is read from when none is passed; the TypeScript client's too.
TOKEN_ENV = "JR2_API_TOKEN"

#: The methods a call may be sent again by after its connection was reset before any answer: the
#: server may have received it, and these mean the same sent twice.
IDEMPOTENT_METHODS: frozenset[str] = frozenset({"GET", "HEAD", "PUT", "DELETE"})



# Connect failures besides a refusal: the host or network unreachable (nothing sent).
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN}

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
    mid-character, between the two bytes of a CRLF); comment-only frames skipped."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    buffer = ""
    # A chunk that ended in CR: a LF first in the next is that line end's, not a line of its own.
    after_cr = False
    for chunk in chunks:
        text = decoder.decode(chunk)
        if not text:
            continue
        if after_cr and text.startswith("\n"):
            text = text[1:]
        after_cr = text.endswith("\r")
        buffer += text.replace("\r\n", "\n").replace("\r", "\n")
        while (cut := buffer.find("\n\n")) >= 0:
            frame = parse_frame(buffer[:cut])
            buffer = buffer[cut + 2 :]
            if frame is not None:
                yield frame


def error_of(status: int, text: str, request_id: str | None = None) -> Jr2Error:
    """The API's error body as its code's exception; any other answer as Jr2Error, code ``http``."""
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str):
            return error_for(status, error["code"], error["message"], request_id)
    except (ValueError, AttributeError):
        pass
    return Jr2Error(status, "http", f"HTTP {status}: {text[:200]}", request_id)


class EventStream(Generic[T]):
    """An open event stream: iterate it for its items; it ends when the server ends it. ``close()``
    (or leaving a ``with`` block, or closing its client) closes the connection early."""

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
    """The Orchestrator's API for one token. A context manager: ``with OrchestratorClient(...) as c:``
    closes its kept-alive connections and open streams at the end (or call ``close()``).

    :param url: the Orchestrator's base url, e.g. ``http://127.0.0.1:8090``.
    :param token: an API token (one line of the installation's tokens file); when not passed, the
        environment's ``JR2_API_TOKEN``.
    :param ca_file: for an https url, the PEM CA bundle its certificate chains to, when not a
        public one (or ``ca``: the PEM text itself).
    :param reconnect_window: seconds a call keeps trying while the Orchestrator refuses
        connections, as it does while it restarts, or (GET, HEAD, PUT, DELETE alone) resets them
        before any answer, as a replica going away in a rollout may (default 30; 0 tries once).
    :param timeout: seconds a call waits on the network (default 60; streams wait as long as they
        are open: the server sends a keep-alive while idle).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
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
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        if not token:
            raise ValueError(
                f"OrchestratorClient: no token: pass token=, or set {TOKEN_ENV} to an API token "
                "(a line of the installation's tokens file)"
            )
        self._token = token
        # Connections kept alive between calls, and the streams open now: close() ends them all.
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._streams: set[EventStream[Any]] = set()
        self._closed = False
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
                raise Jr2Error(409, state, f"workspace {name} is {state} ({why})")
            if time.monotonic() >= deadline:
                wait = f", waiting: {json.dumps(view['wait'])}" if "wait" in view else ""
                raise Jr2Error(408, "timeout", f"workspace {name} not ready in time: {state}{wait}")
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
        stream. A stream that fails after it began raises Jr2Error (code ``stream``):
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
        ``state`` is succeeded, failed or unknown. Raises Jr2Error (code ``timeout``) when
        ``timeout`` seconds pass first; the Effect then still runs, and the same call waits on it again."""
        deadline = time.monotonic() + timeout
        record = self.create_effect(name, body)
        while record["state"] not in SETTLED_EFFECT_STATES:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Jr2Error(408, "timeout", f"Effect {body['id']} of workspace {name} is still {record['state']}")
            record = self.get_effect(name, body["id"], wait_seconds=min(60, max(1, int(left + 0.999))))
        return record

    # ---- the service

    def healthy(self) -> bool:
        """Whether the Orchestrator serves (GET /healthz answers 200)."""
        conn, res = self._send("healthz", path_for("healthz"), {})
        self._release(conn, res)
        return res.status == 200

    # ---- its connections

    def close(self) -> None:
        """Closes the kept-alive connections and every stream still open; a call after it raises."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            streams, self._streams = list(self._streams), set()
        for conn in idle:
            conn.close()
        for stream in streams:
            stream.close()

    def __enter__(self) -> OrchestratorClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A client dropped without close() leaves no socket open (its streams hold their own reference).
        if getattr(self, "_lock", None) is not None:
            with self._lock:
                idle, self._idle = self._idle, []
            for conn in idle:
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
        text = self._release(conn, res).decode("utf-8", "replace")
        if res.status >= 400:
            raise error_of(res.status, text, res.getheader("x-request-id"))
        value = _read_json(text, f"{method} {path}", res.status)
        if not isinstance(value, dict):
            raise Jr2Error(502, "unreadable", f"{method} {path} answered {text[:200]}, not an object")
        return value

    def _text(self, route: str) -> str:
        conn, res = self._send(route, path_for(route), {})
        text = self._release(conn, res).decode("utf-8", "replace")
        if res.status >= 400:
            raise error_of(res.status, text, res.getheader("x-request-id"))
        return text

    def _release(self, conn: http.client.HTTPConnection, res: http.client.HTTPResponse) -> bytes:
        """The answer's body read whole; its connection kept for the next call unless the server
        closes it (or the client is closed)."""
        try:
            body = res.read()
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if not res.will_close and not self._closed:
                self._idle.append(conn)
                return body
        conn.close()
        return body

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
            raise error_of(res.status, text, res.getheader("x-request-id"))

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
                    raise Jr2Error(502, "stream", f"the stream failed: {message}")
            finally:
                res.close()
                conn.close()

        def close() -> None:
            # The answer holds its own file on the socket: both closed, or the socket stays open.
            res.close()
            conn.close()
            with self._lock:
                self._streams.discard(stream)

        stream: EventStream[T] = EventStream(items(frames()), close)
        with self._lock:
            if self._closed:
                conn.close()
                raise ValueError("OrchestratorClient is closed: make a new one")
            self._streams.add(stream)
        return stream

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
        the reconnect window: nothing of it was sent, so a create may be sent again too; likewise
        an idempotent one (GET, HEAD, PUT, DELETE) whose new connection is reset before any answer
        (a replica going away, decision 0079), never another, which the server may have received;
        and once more on a new connection when a kept-alive one the server had closed fails before
        any answer. A stream gets a connection of its own."""
        payload = None if body is None else json.dumps(body).encode("utf-8")
        all_headers = {"authorization": f"Bearer {self._token}", **headers}
        if payload is not None:
            all_headers["content-type"] = "application/json"
        wait = None if stream else (timeout or self._timeout)
        method = ROUTES[route].method
        until = time.monotonic() + self._reconnect_window
        backoff = 0.1
        while True:
            conn, reused = self._connection(wait, fresh=stream)
            try:
                conn.request(method, self._prefix + path, body=payload, headers=all_headers)
                return conn, conn.getresponse()
            except ConnectionRefusedError:
                conn.close()
                if time.monotonic() + backoff > until:
                    raise
            except (ConnectionResetError, BrokenPipeError, http.client.BadStatusLine) as err:
                # RemoteDisconnected is both: a kept-alive connection the server closed meanwhile.
                conn.close()
                if reused:
                    continue
                # A garbled status line is an answer: a reset before any alone is sent again.
                reset = isinstance(err, (ConnectionResetError, BrokenPipeError))
                if not reset or method not in IDEMPOTENT_METHODS or time.monotonic() + backoff > until:
                    raise
            except OSError as err:
                # The connect itself failed (no socket yet): nothing was sent. An unreachable host is
                # what a Service still routing to a replica just gone gives for a moment (decision 0079).
                connected = conn.sock is not None
                conn.close()
                if connected or err.errno not in _UNREACHABLE or time.monotonic() + backoff > until:
                    raise
            except BaseException:
                conn.close()
                raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _connection(self, timeout: float | None, *, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection (and True), or a new one (and False)."""
        with self._lock:
            if self._closed:
                raise ValueError("OrchestratorClient is closed: make a new one")
            conn = None if fresh or not self._idle else self._idle.pop()
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl), False
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout), False


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
        raise Jr2Error(status, "unreadable", f"{what} answered no JSON: {text[:200]}") from None
