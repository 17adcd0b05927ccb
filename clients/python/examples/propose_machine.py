#!/usr/bin/env python3
"""An example Machine in Python, the same as examples/propose-machine.ts.

It drives one workspace through the Orchestrator's API with the typed client: creates a workspace on
a repository, asks the Agent for a change with a ``propose`` Menu tool allowed, holds the Agent's
``propose`` pick for a human's approval (by default it prints the pick and approves it; ``--ask``
reads ``approve [answer]`` or ``reject [reason]`` from stdin), answers it, reads the turn to its
end and destroys the workspace. Its states are the TypeScript machine's: creating, provisioning,
turn, awaitingApproval, answering, continuing, destroying, then done or failed.

    JR2_ORCHESTRATOR_URL=http://127.0.0.1:8090 JR2_REPO_URL=$PWD/.jr2/demo/remotes/demo.git \\
      PYTHONPATH=clients/python python3 clients/python/examples/propose_machine.py

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
from typing import Literal

try:
    import jr2_orchestrator  # noqa: F401 (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout: the package is this file's grandparent's
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jr2_orchestrator import MenuTool, OrchestratorClient, OrchestratorError, OutstandingPick
from jr2_orchestrator.api import CreateWorkspaceBody, StreamEvent, StreamEventEnd

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
    "destroying",
    "done",
    "failed",
]

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
    out: ProposeOutput = field(default_factory=ProposeOutput)
    _last_event_id: int | None = None
    _submission_id: str | None = None

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
            self.out.workspace = self.client.create_workspace(self.workspace)["name"]
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
                self.out.answer = "approved"
            else:
                verdict, text = self.decide(pick)
                if verdict == "approve":
                    self.out.answer = text or "approved"
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
            return "destroying"
        if state == "destroying":
            self._destroy(ws)
            if self.out.error is not None:
                return "failed"
            self.log("workspace destroyed")
            return "done"
        raise AssertionError(state)

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
            except OrchestratorError as err:
                if err.status == 404:
                    return
                raise
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

    def say(line: str) -> None:
        print(line, flush=True)

    machine = ProposeMachine(
        client=OrchestratorClient(args.url, token, ca_file=ca_file),
        workspace=workspace,
        message=args.message,
        decide=ask if args.ask else None,
        ready_timeout=args.ready_timeout,
        log=say,
        on_state=lambda s: say(f"-> {s}"),
    )
    output = machine.run()
    print(json.dumps({k: v for k, v in asdict(output).items() if v is not None}, indent=2), flush=True)
    return output


if __name__ == "__main__":
    sys.exit(1 if main().error else 0)
