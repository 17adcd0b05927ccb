// A Machine's Effect resolved into the order the Effector runs (decision 0070), pure. Every
// path, url and secret name comes from what jr2 recorded of the workspace (the Sandbox's attach
// annotation and spec.gitCredentials, the fence, the pod config), never from the Sandbox's own
// words: a push goes to the slot's url with its fence entry's secret, never to a remote the Agent
// configured; an http request goes only under a fence entry the tenant may use, an origin the pod
// config holds a secret for, or an origin of a secret the Effect names; a secret is spent only if
// the workspace declared it, and a header's secret only at one of that secret's origins. A refusal
// names the field and the fix. The Effector checks the order again.
import { EFFECT_LIMITS, type EffectBody, type SecretRef, type ValueOrSecret } from "../../api/effects";
import type { EffectorOrder } from "../../api/effector-wire";
import { WORK_ROOT } from "../../api/wire";
import { fieldPath } from "../../api/field-path";
import { matchCredential, usableBy, type CredentialEntry } from "../workspaces/fence";

/** What jr2 recorded of a workspace, as the resolution reads it. */
export type WorkspaceFacts = {
  name: string;
  /** The Machine's branch: each slot's worktree is /work/<slot>/<branch>. */
  branch: string;
  /** The attached Repo Slots (the Sandbox's attach annotation). */
  slots: ReadonlyArray<{ slot: string; url: string; identity: string }>;
  /** The push Secrets the Sandbox's Effector holds (spec.gitCredentials). */
  gitCredentials: readonly string[];
  /** The tenant that created it (undefined: an admin). */
  tenant: string | undefined;
};

/** A secret the workspace's Effector mounts and may spend, with the origins its value may go to. */
export type DeclaredSecret = { secret: string; key: string; origins: readonly string[] };

export type ResolveContext = {
  /** The fence's entries (fence.ts). */
  credentials: readonly CredentialEntry[];
  /** Origins the pod config's custodian.held entries are bound to: an installation's word that
   * those hosts are where its secrets go. */
  heldOrigins?: readonly string[];
  declared: readonly DeclaredSecret[];
  /** Where worktrees are (default /work). */
  workRoot?: string;
};

export type Resolution = { ok: true; order: EffectorOrder } | { ok: false; message: string };

const refuse = (path: PropertyKey[], message: string): Resolution => ({
  ok: false,
  message: `${fieldPath(path)}: ${message}`,
});

/** An origin in one spelling: scheme, lower-case host, the port only when not the scheme's own. */
export function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.origin === "null" ? undefined : u.origin;
  } catch {
    return undefined;
  }
}

const isRef = (v: ValueOrSecret): v is SecretRef => typeof v === "object";
const refName = (r: SecretRef) => `${r.secret}/${r.key}`;

/** The identity of an https url as a fence entry reads it: the host, then the path's segments. */
function urlIdentity(url: URL): string {
  const path = url.pathname.replace(/\/+$/, "");
  const port = url.port ? `:${url.port}` : "";
  return `${url.hostname.toLowerCase()}${port}${path}`;
}

export function resolveEffect(body: EffectBody, ws: WorkspaceFacts, ctx: ResolveContext): Resolution {
  const root = ctx.workRoot ?? WORK_ROOT;
  const worktree = (slot: string) => `${root}/${slot}/${ws.branch}`;
  const slotOf = (slot: string) => ws.slots.find((s) => s.slot === slot);
  const attached = ws.slots.map((s) => s.slot).join(", ") || "none";
  const declared = (ref: SecretRef) => ctx.declared.find((d) => d.secret === ref.secret && d.key === ref.key);
  const undeclared = (path: PropertyKey[], ref: SecretRef) =>
    refuse(
      path,
      `secret ${refName(ref)} is not one the workspace declared (declared: ${
        ctx.declared.map(refName).join(", ") || "none"
      }); name it in the create body's effector.secrets, and the pod config's effector.secrets must hold it`,
    );
  const base = { id: body.id, idempotent: body.idempotent };

  switch (body.kind) {
    case "push": {
      const slot = slotOf(body.slot);
      if (!slot) return refuse(["slot"], `the workspace attaches no Repo Slot "${body.slot}" (slots: ${attached})`);
      // The slot's fence entry, as the create's fence chose it (the longest match the tenant may use).
      const best = matchCredential(slot.identity, ctx.credentials);
      const entry = best && usableBy(best, ws.tenant) ? best : undefined;
      const secret = typeof entry?.extra?.secret === "string" ? entry.extra.secret : undefined;
      if (!entry || !secret)
        return refuse(
          ["slot"],
          `Repo Slot "${body.slot}" (${slot.identity}) has ${entry ? `a fence entry "${entry.match}" naming no push secret` : "no fence entry"}: it cannot be pushed`,
        );
      if (!ws.gitCredentials.includes(secret))
        return refuse(
          ["slot"],
          `Repo Slot "${body.slot}" is not among the slots the workspace's Effector pushes: create the workspace ` +
            `with effector.pushes naming it`,
        );
      const branch = body.branch ?? ws.branch;
      return {
        ok: true,
        order: {
          ...base,
          effect: {
            kind: "push",
            worktree: worktree(body.slot),
            source: body.commit ? { commit: body.commit } : { branch },
            url: slot.url,
            credential: secret,
            ref: `refs/heads/${body.to ?? branch}`,
            ...(body.expect ? { expect: body.expect } : {}),
            timeoutSeconds: EFFECT_LIMITS.maxPushSeconds,
          },
        },
      };
    }
    case "http": {
      const url = new URL(body.url);
      const origin = url.origin;
      const refs = Object.entries(body.headers).filter((e): e is [string, SecretRef] => isRef(e[1]));
      for (const [name, ref] of refs) {
        const d = declared(ref);
        if (!d) return undeclared(["headers", name], ref);
        if (!d.origins.some((o) => originOf(o) === origin))
          return refuse(
            ["headers", name],
            `secret ${refName(ref)} may go only to ${d.origins.join(", ") || "no origin"}; add the origin ` +
              `${origin} to the pod config's effector.secrets entry`,
          );
      }
      // Where an http Effect may go: under a fence entry the tenant may use (https only: the
      // entry's host and whole path segments; the longest match decides, as for a Repo, so an entry
      // set apart for other tenants lends nothing, decision 0048), at an origin the installation
      // holds a secret for, or at the origin of a secret the Effect itself names (checked above).
      const best = url.protocol === "https:" ? matchCredential(urlIdentity(url), ctx.credentials) : undefined;
      const fenced = best !== undefined && usableBy(best, ws.tenant);
      const held = (ctx.heldOrigins ?? []).some((o) => originOf(o) === origin);
      if (!fenced && !held && refs.length === 0)
        return refuse(
          ["url"],
          `${origin}${url.pathname} is under no fence entry this workspace may use, no held origin and no origin of ` +
            `a secret the Effect names: ask the installation's operators for a git.credentials entry or an ` +
            `effector.secrets origin covering it`,
        );
      let reqBody: Extract<EffectorOrder["effect"], { kind: "http" }>["body"];
      if (body.body && "file" in body.body) {
        if (!slotOf(body.body.file.slot))
          return refuse(
            ["body", "file", "slot"],
            `the workspace attaches no Repo Slot "${body.body.file.slot}" (slots: ${attached})`,
          );
        reqBody = { file: { root: worktree(body.body.file.slot), path: body.body.file.path } };
      } else if (body.body) reqBody = { json: body.body.json };
      return {
        ok: true,
        order: {
          ...base,
          effect: {
            kind: "http",
            method: body.method,
            url: body.url,
            headers: body.headers,
            ...(reqBody ? { body: reqBody } : {}),
            maxResponseBytes: body.maxResponseBytes,
            timeoutSeconds: body.timeoutSeconds,
          },
        },
      };
    }
    case "command": {
      if (!slotOf(body.cwd.slot))
        return refuse(["cwd", "slot"], `the workspace attaches no Repo Slot "${body.cwd.slot}" (slots: ${attached})`);
      for (const [name, value] of Object.entries(body.env))
        if (isRef(value) && !declared(value)) return undeclared(["env", name], value);
      return {
        ok: true,
        order: {
          ...base,
          effect: {
            kind: "command",
            argv: body.argv,
            root: worktree(body.cwd.slot),
            cwd: body.cwd.path ?? ".",
            env: body.env,
            timeoutSeconds: body.timeoutSeconds,
            maxOutputBytes: body.maxOutputBytes,
          },
        },
      };
    }
  }
}
