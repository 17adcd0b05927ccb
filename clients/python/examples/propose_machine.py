#!/usr/bin/env python3
"""An example Machine in Python, the same as examples/propose-machine.ts.

It drives one workspace through the Orchestrator's API with the typed client: creates a workspace on
a repository, asks the Agent for a change with a ``propose`` Menu tool allowed, holds the Agent's
``propose`` pick for a human's approval (by default it prints the pick and approves it; ``--ask``
reads ``approve [answer]`` or ``reject [reason]`` from stdin), answers it and reads the turn to its
end. Then, when a forge is named and the change was approved, it publishes it through the
workspace's Effector (decision 0070): a ``push`` of the workspace's branch to the slot's remote and
an ``http`` Effect opening a pull request, its Authorization a secret by reference and its body a
Worktree file the Agent wrote. Last, it destroys the workspace. Its states are the TypeScript
machine's: creating, provisioning, turn, awaitingApproval, answering, continuing, (pushing,
openingPullRequest,) destroying, then done or failed.

    JR2_ORCHESTRATOR_URL=http://127.0.0.1:8090 JR2_REPO_URL=$PWD/.jr2/demo/remotes/demo.git \\
      PYTHONPATH=clients/python python3 clients/python/examples/propose_machine.py

To publish: ``--forge-pulls-url`` (JR2_FORGE_PULLS_URL, the forge's pull request endpoint) and
``--forge-secret`` (JR2_FORGE_SECRET, ``<secret>/<key>``: the effect secret holding the API's
Authorization value, an entry of the pod config's effector.secrets bound to that origin); the
repository's fence entry must name a push ``secret``.

The token is JR2_API_TOKEN, or the first line of .jr2/demo/orchestrator/api-tokens (``npm start``).
An https:// JR2_ORCHESTRATOR_URL whose certificate chains to a private CA: JR2_ORCHESTRATOR_CA_FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, cast

try:
    import jr2_orchestrator  # noqa: F401 (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout: the package is this file's grandparent's
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_orchestrator import MenuTool, NotFoundError, OrchestratorClient, OutstandingPick
from jr2_orchestrator.api import CreateWorkspaceBody, EffectBody, StreamEvent, StreamEventEnd

PROPOSE: MenuTool = {
    "name": "propose",
    "description": "Propose the change you made for a human's approval; the answer says whether it is approved.",
    "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
}

State = Literal[
    "creating",
    "provisioning",
    "turn",
    "awaitingApproval",
    "answering",
    "continuing",
    "pushing",
    "openingPullRequest",
    "destroying",
    "done",
    "failed",
]

#: The ids of the machine's publishing Effects, the TypeScript machine's.
PUBLISH_IDS = {"push": "publish-push", "pull_request": "publish-pull-request"}


@dataclass
class Forge:
    """Where an approved change is published: the Repo Slot's branch pushed to the slot's remote (its
    fence entry's push secret), then a pull request opened by an ``http`` POST to ``pulls_url``."""

    #: The forge's pull request endpoint, e.g. https://forge.example/api/repos/acme/app/pulls.
    pulls_url: str
    #: The effect secret ``{"secret", "key"}`` whose value is the API's Authorization header.
    authorization: dict[str, str]
    #: The Repo Slot to push (default: the workspace's first).
    slot: str | None = None
    #: The Worktree file that is the request's body, as the Agent wrote it, and its content type.
    body_file: str = "PR.md"
    content_type: str = "text/markdown"

#: A human's decision on a pick: ("approve", answer) or ("reject", reason); either text may be empty.
Decision = tuple[Literal["approve", "reject"], str]


@dataclass
class ProposeOutput:
    workspace: str | None = None
    iid: str | None = None
    pick: OutstandingPick | None = None
    answer: str | None = None
    outcome: str | None = None
    message: str | None = None
    #: The push's result (the commit the remote now holds) and the pull request's http answer.
    pushed: dict[str, object] | None = None
    pull_request: dict[str, object] | None = None
    error: str | None = None


@dataclass
class ProposeMachine:
    """The machine: ``run()`` goes through its states and answers its output."""

    client: OrchestratorClient
    #: The workspace to create (image, branch, repos).
    workspace: CreateWorkspaceBody
    #: What the Agent is asked to do.
    message: str
    agent: str = "coder"
    #: A human's decision on the pick; None approves it by itself after printing it.
    decide: Callable[[OutstandingPick], Decision] | None = None
    ready_timeout: float | None = None
    log: Callable[[str], None] = print
    #: Told each state as it is entered.
    on_state: Callable[[State], None] = lambda _: None
    #: Told every event of the turn's stream as it is read (progress such as ``usage`` included).
    on_event: Callable[[StreamEvent], None] = lambda _: None
    #: Publish the approved change here; None skips publishing.
    forge: Forge | None = None
    #: How long each Effect may take to settle, in seconds.
    effect_timeout: float = 300.0
    out: ProposeOutput = field(default_factory=ProposeOutput)
    _last_event_id: int | None = None
    _submission_id: str | None = None
    _approved: bool = False

    def run(self) -> ProposeOutput:
        state: State = "creating"
        while True:
            self.on_state(state)
            if state in ("done", "failed"):
                return self.out
            try:
                state = self._step(state)
            except Exception as err:  # each state's failure is the machine's error, as in TypeScript
                self.out.error = str(err)
                state = "failed" if state in ("creating", "destroying") else "destroying"

    def _step(self, state: State) -> State:
        if state == "creating":
            self.out.workspace = self.client.create_workspace(self._create_body())["name"]
            self.log(f"workspace {self.out.workspace} created")
            return "provisioning"
        ws = self.out.workspace
        assert ws is not None
        if state == "provisioning":
            opts = {} if self.ready_timeout is None else {"timeout": self.ready_timeout}
            self.client.wait_ready(ws, **opts)
            self.log("workspace ready")
            return "turn"
        if state == "turn":
            return self._turn(ws)
        if state == "awaitingApproval":
            pick = self.out.pick
            assert pick is not None
            self.log(f"the Agent proposes: {json.dumps(pick.get('args') or {})} (delivery {pick['deliveryId']})")
            if self.decide is None:
                self.out.answer, self._approved = "approved", True
            else:
                verdict, text = self.decide(pick)
                if verdict == "approve":
                    self.out.answer, self._approved = text or "approved", True
                else:
                    self.out.answer = f"rejected: {text}" if text else "rejected"
            return "answering"
        if state == "answering":
            assert self.out.pick is not None and self.out.answer is not None
            self.client.answer(ws, self.out.pick["deliveryId"], self.out.answer)
            self.log(f"answered: {self.out.answer}")
            return "continuing"
        if state == "continuing":
            end = self._continue(ws)
            self.out.outcome, self.out.message = end["outcome"], end.get("message")
            self.log(f"turn {end['outcome']}: {end.get('message', '')}")
            # Publishing, when a forge is named and the change was approved; otherwise skipped.
            if self.forge is not None and self._approved and end["outcome"] == "completed":
                return "pushing"
            return "destroying"
        if state == "pushing":
            body: EffectBody = {"id": PUBLISH_IDS["push"], "kind": "push", "slot": self._slot()}
            self.out.pushed = self._effect(ws, body)
            self.log(f"pushed: {json.dumps(self.out.pushed)}")
            return "openingPullRequest"
        if state == "openingPullRequest":
            forge = self.forge
            assert forge is not None
            pr: EffectBody = {
                "id": PUBLISH_IDS["pull_request"],
                "kind": "http",
                "method": "POST",
                "url": forge.pulls_url,
                "headers": {
                    "authorization": {"secret": forge.authorization["secret"], "key": forge.authorization["key"]},
                    "content-type": forge.content_type,
                },
                "body": {"file": {"slot": self._slot(), "path": forge.body_file}},
            }
            self.out.pull_request = self._effect(ws, pr)
            self.log(f"pull request: {self.out.pull_request.get('status')}")
            return "destroying"
        if state == "destroying":
            self._destroy(ws)
            if self.out.error is not None:
                return "failed"
            self.log("workspace destroyed")
            return "done"
        raise AssertionError(state)

    def _slot(self) -> str:
        """The Repo Slot a forge publishes: its own, or the workspace's first."""
        slot = self.forge.slot if self.forge is not None else None
        repos = self.workspace.get("repos") or []
        slot = slot or (repos[0]["slot"] if repos else None)
        if not slot:
            raise ValueError("publishing to a forge needs a Repo Slot: the workspace names none")
        return slot

    def _create_body(self) -> CreateWorkspaceBody:
        """The create body, with an Effector that pushes the slot and mounts the API secret when a
        forge is named."""
        if self.forge is None:
            return self.workspace
        body = cast(CreateWorkspaceBody, {**self.workspace})
        secret = {"secret": self.forge.authorization["secret"], "key": self.forge.authorization["key"]}
        body["effector"] = {"pushes": [self._slot()], "secrets": [secret]}
        return body

    def _effect(self, ws: str, body: EffectBody) -> dict[str, object]:
        """Runs one Effect to its end; anything but ``succeeded`` raises, naming why."""
        record = self.client.run_effect(ws, body, timeout=self.effect_timeout)
        if record["state"] != "succeeded":
            err = record.get("error")
            why = f"{err['code']}: {err['message']}" if err else "no result"
            raise RuntimeError(f"Effect {body['id']} {record['state']}: {why}")
        return cast(dict[str, object], record.get("result") or {})

    def _turn(self, ws: str) -> State:
        """Submits the turn, then reads its stream until the Agent picks ``propose`` (or the turn ends)."""
        submitted = self.client.submit_turn(
            ws, {"agent": self.agent, "message": self.message, "menu": [PROPOSE], "allowed": [PROPOSE["name"]]}
        )
        iid = self.out.iid = submitted["iid"]
        self._submission_id = submitted["admission"]["submissionId"]
        with self.client.turn_events(ws, iid) as events:
            for e in events:
                self._last_event_id = e["offset"]
                self.on_event(e)
                if e["kind"] == "end":
                    # The turn ended without proposing anything: nothing to approve.
                    self.out.outcome, self.out.message = e["outcome"], e.get("message")
                    self.out.error = "the turn ended without a propose pick"
                    return "destroying"
                if e["kind"] == "pick" and e["pick"] == PROPOSE["name"]:
                    break
        # The stream named the pick (or closed before it): the picks list has its delivery.
        while True:
            for p in self.client.picks(ws)["items"]:
                if p["iid"] == iid and p["pick"] == PROPOSE["name"]:
                    self.out.pick = p
                    return "awaitingApproval"
            time.sleep(0.25)

    def _continue(self, ws: str) -> StreamEventEnd:
        """Reads the rest of the turn's stream to its end."""
        assert self.out.iid is not None
        with self.client.turn_events(ws, self.out.iid, last_event_id=self._last_event_id) as events:
            for e in events:
                self.on_event(e)
                if e["kind"] == "end" and e["submissionId"] == self._submission_id:
                    return e
        raise RuntimeError("the turn's stream closed before its end")

    def _destroy(self, ws: str) -> None:
        """Deletes the workspace and waits until it is destroyed (or gone)."""
        self.client.delete_workspace(ws)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.client.workspace(ws)["state"] == "destroyed":
                    return
            except NotFoundError:
                return
            time.sleep(0.25)
        raise RuntimeError(f"workspace {ws} not destroyed in time")


def ask(_pick: OutstandingPick) -> Decision:
    """A human's decision, read from stdin: ``approve [answer]`` or ``reject [reason]``."""
    line = sys.stdin.readline().strip()
    verdict, _, text = line.partition(" ")
    if verdict == "reject":
        return ("reject", text)
    return ("approve", text)


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> ProposeOutput:
    """Runs the example against the Orchestrator the environment names."""
    env = dict(os.environ) if env is None else env
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=env.get("JR2_ORCHESTRATOR_URL", "http://127.0.0.1:8090"))
    parser.add_argument("--repo", default=env.get("JR2_REPO_URL"), help="a repository inside the Orchestrator's fence")
    parser.add_argument("--no-repo", action="store_true", help="a workspace with no Repo Slot")
    parser.add_argument("--image", default=env.get("JR2_HARNESS_IMAGE", "ghcr.io/example/harness:1"))
    parser.add_argument(
        "--message",
        default="In /work/app, add a line to README.md saying hello, then call propose with a summary of the change.",
    )
    parser.add_argument("--ask", action="store_true", help="read the approval from stdin")
    parser.add_argument("--ready-timeout", type=float, default=None, help="seconds")
    parser.add_argument(
        "--forge-pulls-url",
        default=env.get("JR2_FORGE_PULLS_URL"),
        help="publish the approved change: the forge's pull request endpoint",
    )
    parser.add_argument(
        "--forge-secret",
        default=env.get("JR2_FORGE_SECRET"),
        help="<secret>/<key>: the effect secret holding the forge API's Authorization value",
    )
    args = parser.parse_args(argv)

    token_file = Path(".jr2/demo/orchestrator/api-tokens")
    token = env.get("JR2_API_TOKEN") or (
        token_file.read_text().split("\n")[0].strip() if token_file.exists() else None
    )
    if not token:
        raise SystemExit(f"set JR2_API_TOKEN (or run `npm start`, which writes {token_file})")
    if not args.repo and not args.no_repo:
        raise SystemExit("set JR2_REPO_URL to a repository inside the Orchestrator's fence")
    ca_file = env.get("JR2_ORCHESTRATOR_CA_FILE") or None
    workspace: CreateWorkspaceBody = {"image": args.image, "branch": "example/propose"}
    if args.repo and not args.no_repo:
        workspace["repos"] = [{"slot": "app", "url": args.repo}]

    forge = None
    if args.forge_pulls_url:
        secret, _, key = (args.forge_secret or "").partition("/")
        if not secret or not key:
            raise SystemExit("set --forge-secret (JR2_FORGE_SECRET) to <secret>/<key>")
        forge = Forge(pulls_url=args.forge_pulls_url, authorization={"secret": secret, "key": key})

    def say(line: str) -> None:
        print(line, flush=True)

    # The client's connections (kept alive between calls) are closed when the run ends.
    with OrchestratorClient(args.url, token, ca_file=ca_file) as client:
        machine = ProposeMachine(
            client=client,
            workspace=workspace,
            message=args.message,
            decide=ask if args.ask else None,
            ready_timeout=args.ready_timeout,
            log=say,
            on_state=lambda s: say(f"-> {s}"),
            forge=forge,
        )
        output = machine.run()
    print(json.dumps({k: v for k, v in asdict(output).items() if v is not None}, indent=2), flush=True)
    return output


if __name__ == "__main__":
    sys.exit(1 if main().error else 0)
