// The clients' copies of the route table and body types (clients/typescript/src/api.ts,
// clients/python/jr2_orchestrator/api.py) are what scripts/gen-clients.ts writes from the API's
// OpenAPI document now (docs/decisions/0061-clients-beyond-typescript.md); and the TypeScript
// copy's types are the server's zod schemas' own, checked by the compiler: a body the client
// writes is one the server reads, an answer the server writes is one the client reads.
import type { z } from "zod";
import { CLIENT_ERROR_CODES, GENERATED, drifted, errorClassOf, generate } from "../../scripts/gen-clients";
import { ERRORS } from "../../api/orchestrator-errors";
import type * as client from "../../clients/typescript/src";
import type {
  AnswerReceipt,
  CreateWorkspaceBody,
  EgressLog,
  PickList,
  SubmitTurnBody,
  WorkspaceEvent,
  WorkspaceList,
  WorkspaceView,
} from "../../api/orchestrator-schemas";
import type { Admission, StreamEvent } from "../../api/agent-protocol";
import { ROUTES, isInternal, type RouteId } from "../../api/orchestrator-routes";

/** True when each of A and B is assignable to the other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// Each line fails to compile (`npx tsc --noEmit`) when the two sides part.
export const SAME: true[] = [
  true satisfies Same<client.CreateWorkspaceBody, z.input<typeof CreateWorkspaceBody>>,
  true satisfies Same<client.SubmitTurnBody, z.input<typeof SubmitTurnBody>>,
  true satisfies Same<client.WorkspaceView, WorkspaceView>,
  true satisfies Same<client.WorkspaceList, WorkspaceList>,
  true satisfies Same<client.WorkspaceEvent, WorkspaceEvent>,
  true satisfies Same<client.EgressLog, EgressLog>,
  true satisfies Same<client.StreamEvent, StreamEvent>,
  true satisfies Same<client.Admission, Admission>,
  true satisfies Same<client.PickList, z.infer<typeof PickList>>,
  true satisfies Same<client.AnswerReceipt, z.infer<typeof AnswerReceipt>>,
];

describe("the clients' generated copies", () => {
  it("are what scripts/gen-clients.ts writes now", () => {
    const stale = drifted();
    if (stale.length) throw new Error(`${stale.join(", ")} drifted: run \`npx tsx scripts/gen-clients.ts\``);
  });

  it("carry every public route of the table, in both languages, and no Harness's route", () => {
    const files = generate();
    for (const id of Object.keys(ROUTES) as RouteId[]) {
      const { method, path, auth } = ROUTES[id];
      const ts = `${id}: { method: "${method}", path: "${path}", auth: "${auth}" }`;
      const py = `"${id}": Route("${method}", "${path}", "${auth}")`;
      if (isInternal(id)) {
        // Decision 0077: a Sandbox token's routes are no Machine's.
        expect(files[GENERATED.typescript]).not.toContain(ts);
        expect(files[GENERATED.python]).not.toContain(py);
      } else {
        expect(files[GENERATED.typescript]).toContain(ts);
        expect(files[GENERATED.python]).toContain(py);
      }
    }
    for (const text of Object.values(files))
      expect(text).not.toMatch(/\/v1\/sandbox\/|\b(PickBody|PickReceipt|Delivery)\b/);
  });

  it("give the Python client one exception per code a Machine may meet, each with its status", () => {
    const errors = generate()[GENERATED.pythonErrors];
    for (const code of CLIENT_ERROR_CODES) {
      expect(errors).toContain(`class ${errorClassOf(code)}(Jr2Error):`);
      expect(errors).toContain(
        `    CODE: ClassVar[str] = "${code}"\n    STATUS: ClassVar[int] = ${ERRORS[code].status}\n`,
      );
    }
    expect(errors).not.toContain("RateLimitedError");
    expect(CLIENT_ERROR_CODES).toContain("not_found");
  });
});
