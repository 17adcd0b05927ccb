// The push Secrets an Effector's pushes spend (orchestrator/workspaces/fence.ts pushCredentials): each pushed slot's
// fence entry's `secret`, once each in order of first use, or a refusal naming the slot and the fix.
import { repoKey } from "../../api/repo-identity";
import type { CredentialEntry } from "../../orchestrator/workspaces/fence";
import { pushCredentials } from "../../orchestrator/workspaces/fence";
import type { PlacedRepo } from "../../orchestrator/workspaces/sandbox-gateway";

const entry = (match: string, extra?: Record<string, unknown>): CredentialEntry => ({
  match,
  prefix: match,
  ...(extra ? { extra } : {}),
});

const ACME = entry("github.com/acme", { secret: "jr2-git-push-acme" });
const TOOLS = entry("github.com/tools", { secret: "jr2-git-push-tools" });
const NO_SECRET = entry("gitlab.example.com/team", { owner: "team" });

/** A slot the fence admitted, under `admitted` (or bound by the Machine's code when absent). */
const placed = (slot: string, identity: string, admitted?: CredentialEntry): PlacedRepo => ({
  slot,
  url: `https://${identity}.git`,
  identity,
  key: repoKey(identity),
  bound: admitted === undefined,
  ...(admitted ? { entry: admitted } : {}),
});

const repos: PlacedRepo[] = [
  placed("app", "github.com/acme/app", ACME),
  placed("lib", "github.com/acme/lib", ACME),
  placed("tools", "github.com/tools/cli", TOOLS),
  placed("docs", "gitlab.example.com/team/docs", NO_SECRET),
  placed("vendored", "git.example.com/platform/vendored"),
];

const refusal = (pushes: string[], from: readonly PlacedRepo[] = repos): string => {
  const r = pushCredentials(from, pushes);
  if (r.ok) throw new Error(`expected a refusal, got ${JSON.stringify(r.secrets)}`);
  return r.message;
};

describe("push credentials", () => {
  it("needs no Secret when nothing is pushed", () => {
    expect(pushCredentials(repos, [])).toEqual({ ok: true, secrets: [] });
    expect(pushCredentials([], [])).toEqual({ ok: true, secrets: [] });
  });

  it("answers the pushed slots' Secrets in order of first use", () => {
    expect(pushCredentials(repos, ["tools", "app"])).toEqual({
      ok: true,
      secrets: ["jr2-git-push-tools", "jr2-git-push-acme"],
    });
    expect(pushCredentials(repos, ["app", "tools"])).toEqual({
      ok: true,
      secrets: ["jr2-git-push-acme", "jr2-git-push-tools"],
    });
  });

  it("names a Secret once however many pushed slots spend it", () => {
    expect(pushCredentials(repos, ["app", "tools", "lib", "app"])).toEqual({
      ok: true,
      secrets: ["jr2-git-push-acme", "jr2-git-push-tools"],
    });
  });

  it("ignores the slots that are not pushed, even those that could not be", () => {
    expect(pushCredentials(repos, ["lib"])).toEqual({ ok: true, secrets: ["jr2-git-push-acme"] });
  });

  it("refuses a push of a slot the workspace does not attach, naming the slot", () => {
    const message = refusal(["app", "website"]);
    expect(message).toBe('effector.pushes names Repo Slot "website", which repos does not attach');
  });

  it("refuses a push of a bound slot no entry admits, naming the slot, its identity and the fix", () => {
    const message = refusal(["app", "vendored"]);
    expect(message).toContain(
      'effector.pushes: Repo Slot "vendored" (git.example.com/platform/vendored) cannot be pushed',
    );
    expect(message).toContain("no git.credentials entry admits its url");
    expect(message).toContain("Add an entry with `match` and the push `secret`");
    expect(message).toContain("to the credentials file");
  });

  it("refuses a push of a slot whose entry names no secret, naming the slot, the entry and the fix", () => {
    const message = refusal(["docs"]);
    expect(message).toContain('effector.pushes: Repo Slot "docs" (gitlab.example.com/team/docs) cannot be pushed');
    expect(message).toContain('its git.credentials entry "gitlab.example.com/team" names no `secret`');
    expect(message).toContain("Add an entry with `match` and the push `secret`");
  });

  it.each([
    ["an empty", ""],
    ["a number as the", 42],
    ["a list as the", ["jr2-git-push"]],
  ])("refuses %s secret as naming none", (_, secret) => {
    const odd = [placed("app", "github.com/odd/app", entry("github.com/odd", { secret }))];
    expect(refusal(["app"], odd)).toContain('its git.credentials entry "github.com/odd" names no `secret`');
  });

  it("refuses at the first slot it cannot push, in the order of pushes", () => {
    expect(refusal(["docs", "vendored"])).toContain('Repo Slot "docs"');
    expect(refusal(["vendored", "docs"])).toContain('Repo Slot "vendored"');
  });
});
