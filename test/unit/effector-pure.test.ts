// The Effector's pure parts (decision 0070): NO_PROXY as curl reads it, a push's remote and how git
// said it failed, the nonce memory's bound, an order's digest, bodies as text or base64, and the
// argv handed to jr2-confine, ssh and git (paths only: no secret can be in them).
import { SIGNATURE_WINDOW_MS } from "../../api/effector-wire";
import { confineArgs, executablePaths, SYSTEM_RX } from "../../effector/command";
import { noProxyMatcher } from "../../effector/egress";
import { NonceMemory } from "../../effector/guard";
import { encodeBody } from "../../effector/http";
import { canonicalJson } from "../../effector/memory";
import { credentialHelper, gitConfigArgs, pushFailureCode, remoteOf, sshCommand } from "../../effector/push";

describe("the Effector's pure parts", () => {
  it("reads NO_PROXY: names and their subdomains, host:port, IPs and CIDR ranges, *", () => {
    const skip = noProxyMatcher("127.0.0.1,localhost,.svc,example.com:8443,10.0.0.0/8,::1");
    expect(skip("127.0.0.1", "443")).toBe(true);
    expect(skip("api.svc", "443")).toBe(true);
    expect(skip("example.com", "8443")).toBe(true);
    expect(skip("example.com", "443")).toBe(false);
    expect(skip("10.3.4.5", "80")).toBe(true);
    expect(skip("[::1]", "80")).toBe(true);
    expect(skip("github.com", "443")).toBe(false);
    expect(noProxyMatcher("*")("anything", "1")).toBe(true);
  });

  it("knows a push's remote; refuses what git would read as an option or another transport", () => {
    expect(remoteOf("https://forge.example/o/r.git")).toEqual({ scheme: "https", host: "forge.example", port: "443" });
    expect(remoteOf("git@forge.example:o/r.git")).toEqual({ scheme: "ssh", host: "forge.example", port: "22" });
    expect(remoteOf("ssh://git@forge.example:2222/o/r")).toEqual({
      scheme: "ssh",
      host: "forge.example",
      port: "2222",
    });
    for (const bad of ["-uhttps://x/", "ext::sh -c touch% /tmp/x", "file:///etc", "/local/path", "https://x/ y"])
      expect(remoteOf(bad)).toBeUndefined();
  });

  it("names how a push failed from git's words", () => {
    expect(pushFailureCode(" ! [rejected]        abc -> main (non-fast-forward)")).toBe("push_rejected");
    expect(pushFailureCode("!\tabc:refs/heads/x\t[rejected] (stale info)")).toBe("lease_broken");
    expect(pushFailureCode("fatal: Authentication failed for 'https://x/'")).toBe("auth_failed");
    expect(pushFailureCode("git@x: Permission denied (publickey).")).toBe("auth_failed");
    expect(pushFailureCode("fatal: unable to access: Could not resolve host")).toBe("push_failed");
  });

  it("keeps nonces for twice the window and refuses when full rather than forget one", () => {
    const m = new NonceMemory(2);
    expect(m.seen("a", 0)).toBe(false);
    expect(m.seen("a", 1)).toBe(true);
    expect(m.seen("b", 2)).toBe(false);
    expect(m.full(3)).toBe(true);
    expect(m.seen("a", 2 * SIGNATURE_WINDOW_MS - 1)).toBe(true);
    expect(m.full(2 * SIGNATURE_WINDOW_MS + 3)).toBe(false);
  });

  it("digests an order by its content, not its key order", () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: undefined }] })).toBe('{"a":[{"d":2}],"b":1}');
  });

  it("carries a body as text when it is UTF-8, as base64 when not; a character cut by the bound is dropped", () => {
    expect(encodeBody(Buffer.from("héllo"), false)).toEqual({ body: "héllo", bodyEncoding: "utf8" });
    expect(encodeBody(Buffer.from("hé").subarray(0, 2), true)).toEqual({ body: "h", bodyEncoding: "utf8" });
    expect(encodeBody(Buffer.from([0xff, 0xfe, 0, 1]), false)).toEqual({ body: "//4AAQ==", bodyEncoding: "base64" });
  });

  it("builds jr2-confine's argv, ssh's command and git's settings from paths alone", () => {
    expect(
      confineArgs({
        rx: ["/usr"],
        ro: ["/work"],
        rw: ["/s/e/1"],
        cwd: "/work/a",
        timeoutSeconds: 5,
        report: "/s/r",
        argv: ["make", "x"],
      }),
    ).toEqual([
      "--rx",
      "/usr",
      "--ro",
      "/work",
      "--rw",
      "/s/e/1",
      "--cwd",
      "/work/a",
      "--timeout",
      "5",
      "--report",
      "/s/r",
      "--",
      "make",
      "x",
    ]);
    expect(executablePaths("/usr/bin/node")).toEqual(SYSTEM_RX);
    expect(executablePaths("/app/node/bin/node")).toEqual([...SYSTEM_RX, "/app/node"]);
    const ssh = sshCommand("/s/id", "/g/known_hosts", ["/usr/bin/node", "/app/effector.js", "connect", "%h", "%p"]);
    expect(ssh).toContain("'StrictHostKeyChecking=yes'");
    expect(ssh).toContain("'IdentitiesOnly=yes'");
    expect(ssh).toContain("ProxyCommand=");
    const args = gitConfigArgs({
      scheme: "https",
      proxy: "http://egress:3128",
      credentialHelper: credentialHelper("/g/forge", "/g/forge/token"),
    });
    expect(args).toContain("core.hooksPath=/dev/null");
    expect(args).toContain("protocol.allow=never");
    expect(args).not.toContain("protocol.http.allow=always");
    expect(args).toContain("http.followRedirects=false");
    expect(args).toContain("http.proxy=http://egress:3128");
    expect(args.indexOf("credential.helper=")).toBeLessThan(args.findIndex((a) => a.startsWith("credential.helper=!")));
  });
});
