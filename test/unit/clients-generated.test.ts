// The clients' copies of the route table and body types (clients/typescript/src/api.ts,
// clients/python/jr2_orchestrator/api.py) are what scripts/gen-clients.ts writes from the API's
// OpenAPI document now (docs/decisions/0061-clients-beyond-typescript.md); and the TypeScript
// copy's types are the server's zod schemas' own, checked by the compiler: a body the client
// writes is one the server reads, an answer the server writes is one the client reads.
import type { z } from "zod";
import { GENERATED, drifted, generate } from "../../scripts/gen-clients";
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
import type { Admission, Delivery, PickBody, StreamEvent } from "../../api/agent-protocol";
import { ROUTES } from "../../api/orchestrator-routes";

/** True when each of A and B is assignable to the other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// Each line fails to compile (`npx tsc --noEmit`) when the two sides part.
export const SAME: true[] = [
  true satisfies Same<client.CreateWorkspaceBody, z.input<typeof CreateWorkspaceBody>>,
  true satisfies Same<client.SubmitTurnBody, z.input<typeof SubmitTurnBody>>,
  true satisfies Same<client.PickBody, z.input<typeof PickBody>>,
  true satisfies Same<client.WorkspaceView, WorkspaceView>,
  true satisfies Same<client.WorkspaceList, WorkspaceList>,
  true satisfies Same<client.WorkspaceEvent, WorkspaceEvent>,
  true satisfies Same<client.EgressLog, EgressLog>,
  true satisfies Same<client.StreamEvent, StreamEvent>,
  true satisfies Same<client.Admission, Admission>,
  true satisfies Same<client.Delivery, Delivery>,
  true satisfies Same<client.PickList, z.infer<typeof PickList>>,
  true satisfies Same<client.AnswerReceipt, z.infer<typeof AnswerReceipt>>,
];

describe("the clients' generated copies", () => {
  it("are what scripts/gen-clients.ts writes now", () => {
    const stale = drifted();
    if (stale.length) throw new Error(`${stale.join(", ")} drifted: run \`npx tsx scripts/gen-clients.ts\``);
  });

  it("carry every route of the table, in both languages", () => {
    const files = generate();
    for (const [id, r] of Object.entries(ROUTES)) {
      const { method, path, auth } = r;
      expect(files[GENERATED.typescript]).toContain(`${id}: { method: "${method}", path: "${path}", auth: "${auth}" }`);
      expect(files[GENERATED.python]).toContain(`"${id}": Route("${method}", "${path}", "${auth}")`);
    }
  });
});
