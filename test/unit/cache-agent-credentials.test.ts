// The cache agent's side of a Repo's Secret (cache-agent/credentials.ts, decision 0046): sent only
// when declared for the url, a refused read said with its fix; and its RBAC as rendered: no
// cluster-wide Secret read, no pod read, Secrets only in the listed Sandbox namespaces.
import { CredentialRefused, gitCredsOf, secretReadFailure } from "../../cache-agent/credentials";
import { CACHE_AGENT, cacheAgentManifests } from "../../cache-agent/cache-agent-manifests";
import { REPO_CREDENTIALS_ROLE } from "../../api/wire";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL } from "../../api/wire";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const secret = (data: Record<string, string>, declared = true, hosts = "https://git.example.com/team/") => ({
  metadata: {
    name: "git-token",
    ...(declared ? { labels: { [REPO_CREDENTIAL_LABEL]: "true" } } : {}),
    annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: hosts },
  },
  data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
});
const URL = "https://git.example.com/team/app.git";

describe("gitCredsOf", () => {
  it("reads a token (or password) with its username, or an ssh key with known_hosts", () => {
    expect(gitCredsOf(secret({ token: "t0k", username: "me" }), "git-token", URL)).toEqual({
      kind: "https-token",
      token: "t0k",
      username: "me",
    });
    expect(gitCredsOf(secret({ password: "pw" }), "git-token", URL)).toMatchObject({ token: "pw" });
    const ssh = secret({ "ssh-privatekey": "KEY", known_hosts: "h" }, true, "ssh://git@git.example.com/team/");
    expect(gitCredsOf(ssh, "git-token", "git@git.example.com:team/app.git")).toEqual({
      kind: "ssh-key",
      privateKey: "KEY",
      knownHosts: "h",
    });
  });

  it("refuses an undeclared Secret and a url outside its prefixes, and never says a value", () => {
    const undeclared = () => gitCredsOf(secret({ token: "t0k-value" }, false), "git-token", URL);
    expect(undeclared).toThrow(CredentialRefused);
    expect(undeclared).toThrow(/Secret "git-token" \(spec\.secretRef\.name\) is not declared a repo credential/);
    const elsewhere = () =>
      gitCredsOf(secret({ token: "t0k-value" }), "git-token", "https://git.example.com.evil/team/app");
    expect(elsewhere).toThrow(/is outside the url prefixes Secret "git-token"/);
    for (const f of [undeclared, elsewhere]) {
      try {
        f();
      } catch (err) {
        expect(String(err)).not.toContain("t0k-value");
      }
    }
  });

  it("refuses a declared Secret holding neither a token nor a key, naming the fix", () => {
    expect(() => gitCredsOf(secret({ other: "x" }), "git-token", URL)).toThrow(
      /Secret "git-token" \(spec\.secretRef\.name\) has neither "token" nor "ssh-privatekey": add one of them/,
    );
  });
});

describe("secretReadFailure", () => {
  it("says a 403 is a namespace that did not opt in, naming the namespace and the fix", () => {
    const why = secretReadFailure(403, "git-token", "team-b")!;
    expect(why).toContain('may not read Secret "git-token" (spec.secretRef.name) in namespace "team-b"');
    expect(why).toContain("has not opted in to holding Sandboxes");
    expect(why).toContain("JR2_SANDBOX_NAMESPACES");
    expect(why).toContain("jr2.dev/sandboxes=enabled");
  });

  it("says a 404 is a missing Secret; anything else is left to the caller", () => {
    expect(secretReadFailure(404, "git-token", "team-b")).toBe(
      'Secret "git-token" (spec.secretRef.name) does not exist in namespace "team-b": create it, or name another',
    );
    expect(secretReadFailure(500, "git-token", "team-b")).toBeUndefined();
  });
});

type Obj = {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  rules?: Array<{ resources: string[]; verbs: string[] }>;
  roleRef?: { kind: string; name: string };
};

describe("cacheAgentManifests: the agent's RBAC", () => {
  const objects = cacheAgentManifests({ image: "i", sandboxNamespaces: ["team-a", "team-b"] }) as Obj[];
  const of = (kind: string) => objects.filter((o) => o.kind === kind);

  it("grants cluster-wide only Repos, their status and Sandboxes: no Secret, no pod", () => {
    const bound = of("ClusterRoleBinding").map((b) => b.roleRef!.name);
    expect(bound).toEqual([CACHE_AGENT]);
    const role = of("ClusterRole").find((r) => r.metadata.name === CACHE_AGENT)!;
    expect(role.rules!.flatMap((r) => r.resources).sort()).toEqual(["repos", "repos/status", "sandboxes"]);
  });

  it("binds, in each listed Sandbox namespace alone, the Role the operator keeps there, and labels each", () => {
    // No ClusterRole grants Secrets at all: the Role's names are the operator's (credentials-role.ts).
    expect(of("ClusterRole").flatMap((r) => r.rules!.flatMap((x) => x.resources))).not.toContain("secrets");
    expect(of("RoleBinding").map((b) => [b.metadata.namespace, b.roleRef!.kind, b.roleRef!.name])).toEqual([
      ["team-a", "Role", REPO_CREDENTIALS_ROLE],
      ["team-b", "Role", REPO_CREDENTIALS_ROLE],
    ]);
    expect(
      of("Namespace")
        .filter((n) => n.metadata.labels?.["jr2.dev/sandboxes"] === "enabled")
        .map((n) => n.metadata.name),
    ).toEqual(["team-a", "team-b"]);
  });

  it("refuses the companions' namespace as a Sandbox namespace", () => {
    expect(() => cacheAgentManifests({ image: "i", sandboxNamespaces: ["jr2-system"] })).toThrow(
      /the Sandbox namespaces include the companions' namespace "jr2-system"/,
    );
  });
});
