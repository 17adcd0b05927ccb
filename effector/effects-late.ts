// What the Effector runs only once an order comes (decision 0070), loaded with the first one from
// a file beside its own, effector-effects.js (docs/decisions/0044-the-custodian-starts-small.md):
// the order's schema (zod) and the push, http and command Effects. An idle Effector holds none of
// it; undici is later still, in effector-undici.js, loaded with the first http Effect.
import { EffectorOrder } from "../api/effector-wire";
import { runCommand, type CommandContext } from "./command";
import type { Egress } from "./egress";
import { runHttp } from "./http";
import type { Runner } from "./memory";
import { runPush } from "./push";

export { EffectorOrder };

/** What the Effects run with, decided at start (effector/main.ts). */
export type EffectsContext = CommandContext & {
  git: string;
  egress: Egress;
  ca: string[];
  caBundleFile: string | undefined;
  connectCommand: string[];
};

/** Runs one order's Effect. */
export async function runEffect(order: Parameters<Runner>[0], c: EffectsContext): ReturnType<Runner> {
  const e = order.effect;
  if (e.kind === "push")
    return runPush(e, {
      work: c.work,
      repos: c.repos,
      git: c.git,
      scratch: c.scratch,
      egress: c.egress,
      caBundleFile: c.caBundleFile,
      connectCommand: c.connectCommand,
    });
  if (e.kind === "http") return runHttp(e, { work: c.work, secrets: c.secrets, egress: c.egress, ca: c.ca });
  return runCommand(order.id, e, {
    work: c.work,
    repos: c.repos,
    secrets: c.secrets,
    scratch: c.scratch,
    confine: c.confine,
    confinement: c.confinement,
    node: c.node,
  });
}
