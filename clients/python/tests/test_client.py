"""The client against a stand-in server (http.server in a thread): each route's method and path from
the table, the bearer token (passed, or the environment's), errors as the API's code's exception,
both event streams read across split chunks (a CRLF split at every point) and keep-alives, its
connections kept alive and closed with it, a refused connection sent again within the
reconnect window, and a call reset before any answer sent again when it is idempotent alone. ``python3 -m unittest discover -s clients/python/tests -t clients/python`` runs it."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
import unittest
from unittest import mock
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, cast

from jr2_orchestrator import (
    ROUTES,
    Jr2Error,
    NotFoundError,
    OrchestratorClient,
    errors,
    parse_frame,
    path_for,
    sse_frames,
)

Handler = Callable[[BaseHTTPRequestHandler, str], None]


class StandIn:
    """A server that records each request and answers with ``handler``."""

    def __init__(self, handler: Handler, port: int = 0) -> None:
        self.seen: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                outer.seen.append(
                    {
                        "port": self.client_address[1],
                        "method": self.command,
                        "url": self.path,
                        "auth": self.headers.get("authorization"),
                        "lastEventId": self.headers.get("last-event-id"),
                        "body": body,
                    }
                )
                handler(self, body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", port), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer(
    h: BaseHTTPRequestHandler,
    status: int,
    body: object,
    content_type: str = "application/json",
    request_id: str | None = None,
) -> None:
    data = (body if isinstance(body, str) else json.dumps(body)).encode()
    h.send_response(status)
    h.send_header("content-type", content_type)
    h.send_header("content-length", str(len(data)))
    if request_id:
        h.send_header("x-request-id", request_id)
    h.end_headers()
    h.wfile.write(data)


def sse(h: BaseHTTPRequestHandler, chunks: list[bytes]) -> None:
    """An event stream written in the given pieces, then ended (a close-delimited body)."""
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    h.send_header("connection", "close")
    h.end_headers()
    for c in chunks:
        h.wfile.write(c)
        h.wfile.flush()
        time.sleep(0.002)
    h.close_connection = True


class Routes(unittest.TestCase):
    def setUp(self) -> None:
        def handler(h: BaseHTTPRequestHandler, _body: str) -> None:
            if h.path == "/healthz":
                return answer(h, 200, {"ok": True})
            if h.path == "/metrics":
                return answer(h, 200, "jr2_up 1\n", "text/plain")
            if "nosuch" in h.path:
                return answer(h, 404, {"error": {"code": "not_found", "message": "no workspace"}}, request_id="req-404")
            if "broken" in h.path:
                return answer(h, 500, "oops", "text/plain")
            answer(h, 200, {"name": "ws-1"})

        self.server = StandIn(handler)
        self.client = OrchestratorClient(self.server.url + "/", "tok-1")

    def tearDown(self) -> None:
        self.server.stop()

    def test_every_route_with_its_method_path_and_token(self) -> None:
        c, w = self.client, "ws 1"
        c.create_workspace({"image": "img", "branch": "b"})
        c.list_workspaces()
        c.workspace(w)
        c.delete_workspace(w)
        c.egress(w)
        c.set_egress(w, ["a.example:443"])
        c.egress_log(w)
        c.submit_turn(w, {"agent": "coder", "message": "hi"})
        c.abort(w, "ws.1")
        c.set_allowed(w, "ws.1", ["propose"])
        c.picks(w)
        c.answer(w, "d/1", "yes")
        c.create_effect(w, {"id": "push-1", "kind": "push", "slot": "app"})
        c.list_effects(w)
        c.get_effect(w, "push-1", wait_seconds=30)
        self.assertTrue(c.healthy())
        self.assertEqual(c.metrics(), "jr2_up 1\n")
        c.openapi()
        called = [f"{s['method']} {s['url']}" for s in self.server.seen]
        self.assertEqual(
            called,
            [
                "POST /v1/workspaces",
                "GET /v1/workspaces",
                "GET /v1/workspaces/ws%201",
                "DELETE /v1/workspaces/ws%201",
                "GET /v1/workspaces/ws%201/egress",
                "PUT /v1/workspaces/ws%201/egress",
                "GET /v1/workspaces/ws%201/egress/log",
                "POST /v1/workspaces/ws%201/turns",
                "POST /v1/workspaces/ws%201/turns/ws.1/abort",
                "PUT /v1/workspaces/ws%201/turns/ws.1/allowed",
                "GET /v1/workspaces/ws%201/picks",
                "POST /v1/workspaces/ws%201/picks/d%2F1/answer",
                "POST /v1/workspaces/ws%201/effects",
                "GET /v1/workspaces/ws%201/effects",
                "GET /v1/workspaces/ws%201/effects/push-1?wait=30",
                "GET /healthz",
                "GET /metrics",
                "GET /v1/openapi.json",
            ],
        )
        # Every route but the two streams (below) and the health check's HEAD has a method.
        import re

        for route_id, route in ROUTES.items():
            if route_id in ("workspaceEvents", "turnEvents", "healthzHead"):
                continue
            pattern = re.compile(f"^{route.method} " + re.sub(r"\{\w+\}", "[^/]+", route.path) + "$")
            self.assertTrue(any(pattern.match(c.split("?")[0]) for c in called), f"route {route_id} has a method")
        self.assertTrue(all(s["auth"] == "Bearer tok-1" for s in self.server.seen))
        # A Harness's routes are no Machine's: not in the table, no method.
        self.assertFalse([r for r in ROUTES.values() if "/sandbox/" in r.path or r.auth == "sandbox"])
        self.assertFalse(hasattr(c, "take_pick") or hasattr(c, "read_delivery") or hasattr(c, "read_allowed"))
        # One connection, kept alive, carried every call.
        self.assertEqual(len({s["port"] for s in self.server.seen}), 1)
        self.assertEqual(json.loads(self.server.seen[0]["body"]), {"image": "img", "branch": "b"})
        self.assertEqual(json.loads(self.server.seen[5]["body"]), {"allow": ["a.example:443"]})

    def test_run_effect_creates_then_holds_until_it_settles(self) -> None:
        states = ["queued", "sent", "succeeded"]

        def handler(h: BaseHTTPRequestHandler, _body: str) -> None:
            answer(h, 200, {"id": "e-1", "kind": "http", "idempotent": False, "state": states.pop(0) if states else "succeeded"})

        server = StandIn(handler)
        try:
            c = OrchestratorClient(server.url, "tok-1")
            record = c.run_effect("ws", {"id": "e-1", "kind": "http", "method": "GET", "url": "https://forge.example/x"})
            self.assertEqual(record["state"], "succeeded")
            self.assertEqual(
                [f"{s['method']} {s['url']}" for s in server.seen],
                [
                    "POST /v1/workspaces/ws/effects",
                    "GET /v1/workspaces/ws/effects/e-1?wait=60",
                    "GET /v1/workspaces/ws/effects/e-1?wait=60",
                ],
            )
        finally:
            server.stop()

    def test_an_error_answer_raises_with_status_code_and_message(self) -> None:
        with self.assertRaises(NotFoundError) as caught:
            self.client.workspace("nosuch")
        self.assertIsInstance(caught.exception, Jr2Error)
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "not_found"))
        self.assertEqual(caught.exception.message, "no workspace")
        self.assertEqual(caught.exception.request_id, "req-404")
        with self.assertRaises(Jr2Error) as other:
            self.client.workspace("broken")
        self.assertEqual((other.exception.status, other.exception.code), (500, "http"))
        self.assertIn("HTTP 500: oops", other.exception.message)

    def test_each_code_a_machine_meets_has_its_class(self) -> None:
        for code, cls in errors.ERRORS.items():
            err = errors.error_for(cls.STATUS, code, "m")
            self.assertIs(type(err), cls)
            self.assertEqual((err.code, err.status, cls.CODE), (code, cls.STATUS, code))
        # A code newer than the client, or a Harness's own: the base class, still with its code.
        self.assertIs(type(errors.error_for(409, "not_running", "m")), Jr2Error)
        self.assertNotIn("rate_limited", errors.ERRORS)

    def test_the_token_from_the_environment_when_none_is_passed(self) -> None:
        with mock.patch.dict(os.environ, {"JR2_API_TOKEN": "env-tok"}):
            OrchestratorClient(self.server.url).list_workspaces()
            OrchestratorClient(self.server.url, "passed").list_workspaces()
        self.assertEqual([s["auth"] for s in self.server.seen], ["Bearer env-tok", "Bearer passed"])
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaisesRegex(ValueError, "set JR2_API_TOKEN"):
                OrchestratorClient(self.server.url)

    def test_a_ca_is_for_https(self) -> None:
        with self.assertRaisesRegex(ValueError, "write https://"):
            OrchestratorClient("http://127.0.0.1:1", "t", ca="pem")


class Connections(unittest.TestCase):
    def test_a_with_block_keeps_one_connection_and_closes_it_and_its_streams(self) -> None:
        ended = threading.Event()

        def handler(h: BaseHTTPRequestHandler, _: str) -> None:
            if h.path.endswith("/events"):
                h.send_response(200)
                h.send_header("content-type", "text/event-stream")
                h.end_headers()
                h.wfile.write(b'id: 1\nevent: snapshot\ndata: {"name":"ws-1"}\n\n')
                h.wfile.flush()
                # Held open until the client closes it: then a write fails.
                try:
                    for _ in range(500):
                        time.sleep(0.01)
                        h.wfile.write(b": keep-alive\n\n")
                        h.wfile.flush()
                except OSError:
                    ended.set()
                h.close_connection = True
                return
            answer(h, 200, {"name": "ws-1"})

        server = StandIn(handler)
        try:
            with OrchestratorClient(server.url, "t") as c:
                c.workspace("ws-1")
                c.workspace("ws-1")
                stream = c.workspace_events("ws-1")
                self.assertEqual(next(stream), {"type": "snapshot", "view": {"name": "ws-1"}})
                idle = list(c._idle)
                self.assertEqual(len(idle), 1)
            # Both calls on one connection; the stream on its own.
            calls = [s["port"] for s in server.seen if not s["url"].endswith("/events")]
            self.assertEqual(len(set(calls)), 1)
            self.assertIsNone(idle[0].sock, "the kept-alive connection is closed")
            self.assertTrue(ended.wait(5), "the open stream was closed with the client")
            with self.assertRaisesRegex(ValueError, "closed"):
                c.workspace("ws-1")
        finally:
            server.stop()

    def test_a_kept_alive_connection_the_server_closed_is_replaced(self) -> None:
        def handler(h: BaseHTTPRequestHandler, _: str) -> None:
            answer(h, 200, {"name": "ws-1"})
            # Closed after answering, with no `connection: close`: the client learns it on its next call.
            h.close_connection = True

        server = StandIn(handler)
        try:
            with OrchestratorClient(server.url, "t") as c:
                for _ in range(3):
                    self.assertEqual(c.workspace("ws-1"), {"name": "ws-1"})
                    time.sleep(0.05)
            self.assertEqual(len(server.seen), 3)
        finally:
            server.stop()


class Streams(unittest.TestCase):
    def test_a_workspace_stream_across_split_chunks_crlf_and_keep_alives(self) -> None:
        view = {"name": "ws-1", "state": "attaching", "conditions": []}
        ready = {"type": "transition", "from": "attaching", "to": "ready", "at": "2026-12-06T12:00:00Z"}
        gone = {"type": "transition", "from": "destroying", "to": "destroyed", "at": "2026-12-06T12:00:01Z"}
        text = (
            f"id: 1\nevent: snapshot\ndata: {json.dumps(view)}\n\n: keep-alive\n\n"
            f"id: 2\r\nevent: transition\r\ndata: {json.dumps(ready)}\r\n\r\n"
            f"id: 3\nevent: transition\ndata: {json.dumps(gone)}\n\n"
        ).encode()
        # Cut every 7 bytes: mid-frame, mid-line.
        server = StandIn(lambda h, _: sse(h, [text[i : i + 7] for i in range(0, len(text), 7)]))
        try:
            items = list(OrchestratorClient(server.url, "t").workspace_events("ws-1"))
            self.assertEqual(items, [{"type": "snapshot", "view": view}, ready, gone])
            self.assertEqual(server.seen[0]["url"], "/v1/workspaces/ws-1/events")
        finally:
            server.stop()

    def test_a_turn_stream_resumes_after_an_offset_and_raises_a_failed_stream(self) -> None:
        event = {"kind": "text", "offset": 5, "at": "t", "text": "hi"}

        def handler(h: BaseHTTPRequestHandler, _: str) -> None:
            if "nosuch" in h.path:
                return answer(h, 404, {"error": {"code": "not_found", "message": "no such"}})
            sse(h, [f"id: 5\nevent: text\ndata: {json.dumps(event)}\n\n".encode(), b'event: error\ndata: {"message":"gone"}\n\n'])

        server = StandIn(handler)
        try:
            client = OrchestratorClient(server.url, "t")
            read: list[object] = []
            with self.assertRaises(Jr2Error) as caught:
                for e in client.turn_events("ws-1", "ws-1.a", last_event_id=4):
                    read.append(e)
            self.assertEqual(read, [event])
            self.assertEqual((caught.exception.code, caught.exception.status), ("stream", 502))
            self.assertIn("gone", caught.exception.message)
            self.assertEqual(server.seen[0]["lastEventId"], "4")
            with self.assertRaises(Jr2Error) as missing:
                client.turn_events("nosuch", "nosuch.a")
            self.assertEqual((missing.exception.status, missing.exception.code), (404, "not_found"))
        finally:
            server.stop()

    def test_frames(self) -> None:
        frame = parse_frame("id: 7\nevent: end\ndata: a\ndata: b")
        self.assertEqual((frame.event, frame.data, frame.id) if frame else None, ("end", "a\nb", "7"))
        self.assertIsNone(parse_frame(": keep-alive"))
        # A character cut across chunks is joined.
        snowman = "data: \u2603\n\n".encode()
        self.assertEqual([f.data for f in sse_frames([snowman[:7], snowman[7:]])], ["\u2603"])

    def test_a_crlf_split_between_chunks_is_one_line_end_at_every_cut(self) -> None:
        # A recorded turn stream, CRLF line ends throughout, cut once at every byte: a CR ending one
        # chunk and its LF starting the next must not make an empty line (an early dispatch).
        recorded = (
            "id: 1\r\nevent: turn\r\ndata: {\"kind\":\"turn\",\"offset\":1}\r\n\r\n"
            ": keep-alive\r\n\r\n"
            "id: 2\r\nevent: text\r\ndata: line one\r\ndata: line two\r\n\r\n"
            "id: 3\revent: end\rdata: {\"kind\":\"end\"}\r\r"
        ).encode()
        whole = [(f.event, f.data, f.id) for f in sse_frames([recorded])]
        self.assertEqual(
            whole,
            [("turn", '{"kind":"turn","offset":1}', "1"), ("text", "line one\nline two", "2"), ("end", '{"kind":"end"}', "3")],
        )
        for cut in range(1, len(recorded)):
            got = [(f.event, f.data, f.id) for f in sse_frames([recorded[:cut], recorded[cut:]])]
            self.assertEqual(got, whole, f"cut at byte {cut}")
        # Byte by byte, too.
        self.assertEqual([(f.event, f.data, f.id) for f in sse_frames([bytes([b]) for b in recorded])], whole)

    def test_path_for_encodes_and_names_a_missing_parameter(self) -> None:
        self.assertEqual(path_for("getWorkspace", {"name": "a/b"}), "/v1/workspaces/a%2Fb")
        with self.assertRaisesRegex(ValueError, "needs name"):
            path_for("getWorkspace", {})


class Restart(unittest.TestCase):
    def test_a_refused_call_is_sent_again_until_the_orchestrator_listens(self) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()

        with self.assertRaises(ConnectionRefusedError):
            OrchestratorClient(f"http://127.0.0.1:{port}", "t", reconnect_window=0).workspace("ws-1")

        # Each refusal counted as it happens: socket.create_connection (what http.client connects
        # with) wrapped to count the ConnectionRefusedError it raises, and otherwise left as it is.
        # The server comes up once the call has been refused, not after a guessed while.
        refusals: list[tuple[str, int]] = []
        refused = threading.Event()
        connect = socket.create_connection

        def counting(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            try:
                return connect(address, *args, **kwargs)
            except ConnectionRefusedError:
                refusals.append(address)
                refused.set()
                raise

        answers: list[Any] = []

        def call() -> None:
            try:
                answers.append(OrchestratorClient(f"http://127.0.0.1:{port}", "t").workspace("ws-1"))
            except BaseException as err:  # the assertions below say it
                answers.append(err)

        servers: list[StandIn] = []
        with mock.patch("socket.create_connection", counting):
            caller = threading.Thread(target=call)
            caller.start()
            try:
                self.assertTrue(refused.wait(10), "the call was never refused within 10 s")
                servers.append(StandIn(lambda h, _: answer(h, 200, {"name": "ws-1", "state": "ready"}), port))
                caller.join(30)
                self.assertFalse(caller.is_alive(), "the call did not end within 30 s of the server's start")
            finally:
                for s in servers:
                    s.stop()
        self.assertEqual(len(answers), 1)
        self.assertIsInstance(answers[0], dict, answers[0])
        self.assertEqual(answers[0]["state"], "ready")
        self.assertGreaterEqual(len(refusals), 1)
        self.assertEqual(set(refusals), {("127.0.0.1", port)})
        self.assertEqual([r["url"] for r in servers[0].seen], ["/v1/workspaces/ws-1"])


class Hangup:
    """A server that reads each request whole and, for its first ``drop`` connections, ends the
    connection before any answer byte (the first by a reset, the others by a close), as a replica
    going away may (decision 0079); then answers ``body``."""

    def __init__(self, drop: int, body: object) -> None:
        self.requests: list[str] = []
        self._drop = drop
        self._body = json.dumps(body).encode()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(data.split(b"\r\n", 1)[0].decode())
                n = len(self.requests)
                if n <= self._drop:
                    if n == 1:
                        # SO_LINGER 0: the close is a reset (RST), not an orderly FIN.
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    + f"content-length: {len(self._body)}\r\n\r\n".encode()
                    + self._body
                )

    def stop(self) -> None:
        self._sock.close()


class Rollout(unittest.TestCase):
    """A replica going away mid-call (decision 0079): an idempotent call is sent again, within the
    reconnect window; a create, which the server may have received, never."""

    def test_an_idempotent_call_reset_before_any_answer_is_sent_again(self) -> None:
        server = Hangup(2, {"name": "ws-1", "state": "ready"})
        try:
            view = OrchestratorClient(server.url, "t").workspace("ws-1")
        finally:
            server.stop()
        self.assertEqual(view["state"], "ready")
        self.assertEqual(server.requests, ["GET /v1/workspaces/ws-1 HTTP/1.1"] * 3)

    def test_a_create_reset_before_any_answer_is_not_sent_again(self) -> None:
        server = Hangup(1, {"name": "ws-1"})
        try:
            with self.assertRaises(ConnectionResetError):
                OrchestratorClient(server.url, "t").create_workspace(cast(Any, {"repo": "r"}))
        finally:
            server.stop()
        self.assertEqual(server.requests, ["POST /v1/workspaces HTTP/1.1"])

    def test_with_no_window_a_reset_call_fails_at_once(self) -> None:
        server = Hangup(1, {"name": "ws-1", "state": "ready"})
        try:
            with self.assertRaises(ConnectionResetError):
                OrchestratorClient(server.url, "t", reconnect_window=0).workspace("ws-1")
        finally:
            server.stop()
        self.assertEqual(len(server.requests), 1)


if __name__ == "__main__":
    unittest.main()
