// The Custodian's leaves (custodian/leaf.ts, decision 0037): signed by the Sandbox's intermediate
// and served with it, so a client trusting the root alone accepts them for a bound host; never past
// the intermediate's end; made from the new intermediate once its files change; and refused, with
// the reason, once it has ended or its files no longer read.
import { X509Certificate } from "node:crypto";
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { issueCa } from "../../lib/ca";
import { caFilesIn, CaUnusable, LeafIssuer, readCa } from "../../custodian/leaf";
import { custodianCa, CUSTODIAN_CA_PERIOD_MS } from "../../orchestrator/workspaces/custodian-ca";
import { handshake } from "../support/certificates";

const DAY = 86_400_000;
const root = issueCa("jr2 Custodian CA (jr2)");
const signingKey = Buffer.alloc(32, 5);
const NOW = Date.now();
const sandboxCa = (now = NOW, hosts = ["api.anthropic.com", "127.0.0.1"]) =>
  custodianCa({ root, signingKey, sandbox: "ws-a", hosts, now });

/** A directory holding tls.crt and tls.key as a mounted Secret does; `put` swaps them whole. */
function mounted(files: { certPem: string; keyPem: string }) {
  const dir = mkdtempSync(join(tmpdir(), "jr2-leaf-"));
  const put = (f: { certPem: string; keyPem: string }) => {
    writeFileSync(join(dir, "tls.crt.new"), f.certPem);
    writeFileSync(join(dir, "tls.key.new"), f.keyPem);
    renameSync(join(dir, "tls.crt.new"), join(dir, "tls.crt"));
    renameSync(join(dir, "tls.key.new"), join(dir, "tls.key"));
  };
  put(files);
  return { dir, put };
}

describe("the Custodian's leaves from its Sandbox's CA", () => {
  it("are accepted for a bound host by a client trusting the root alone, served with the intermediate", async () => {
    const ca = sandboxCa();
    const r = await handshake(new LeafIssuer(ca).contextFor("api.anthropic.com"), root.certPem, "api.anthropic.com");
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.peer.subject.CN).toBe("api.anthropic.com");
    expect(r.peer.issuer.CN).toBe("jr2 Custodian ws-a");
    expect(r.peer.issuerCertificate?.fingerprint256).toBe(new X509Certificate(ca.certPem).fingerprint256);
    expect(r.peer.issuerCertificate?.issuerCertificate?.fingerprint256).toBe(
      new X509Certificate(root.certPem).fingerprint256,
    );
  });

  it("for a bound address too: its common name does not read as a DNS name the constraints would judge", async () => {
    const r = await handshake(new LeafIssuer(sandboxCa()).contextFor("127.0.0.1"), root.certPem, "127.0.0.1");
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.peer.subject.CN).toBe("IP 127.0.0.1");
  });

  it("never outlive their CA: one with a day left signs leaves that end with it", async () => {
    // Two days into the period's last: about a day left (CUSTODIAN_CA_LIFE 7 d, period 5 d).
    const ca = sandboxCa();
    const late = ca.notAfter - DAY;
    const context = new LeafIssuer(ca, { now: () => late }).contextFor("api.anthropic.com");
    // Read only: its times are days ahead of this clock.
    const r = await handshake(context, root.certPem, "api.anthropic.com", { verify: false });
    expect(r.ok).toBe(true);
    if (r.ok) expect(Date.parse(r.peer.valid_to)).toBe(Math.floor(ca.notAfter / 1000) * 1000);
  });

  it("are refused once the CA has ended, naming when and who mints the next", () => {
    const ca = sandboxCa();
    let now = NOW;
    const issuer = new LeafIssuer(ca, { now: () => now });
    expect(() => issuer.contextFor("api.anthropic.com")).not.toThrow();
    now = ca.notAfter + 1;
    let caught: unknown;
    try {
      issuer.contextFor("api.anthropic.com");
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CaUnusable);
    expect(caught).toMatchObject({
      code: "ca_expired",
      message: expect.stringMatching(/^the Custodian's CA expired on \d{4}-.*its Orchestrator mints the next one/),
    });
  });

  it("come from the new CA once its files change (a rotation), and the change is told", async () => {
    // Minted again for another host list: the same period, so both are valid on this clock.
    const first = sandboxCa();
    const second = sandboxCa(NOW, ["api.anthropic.com", "api.openai.com", "127.0.0.1"]);
    const { dir, put } = mounted(first);
    const changes: number[] = [];
    const issuer = new LeafIssuer(caFilesIn(dir), { onChange: (c) => changes.push(c.notAfter) });
    const issuerOf = async () => {
      const r = await handshake(issuer.contextFor("api.anthropic.com"), root.certPem, "api.anthropic.com");
      return r.ok ? r.peer.issuerCertificate?.fingerprint256 : String(r.error);
    };
    expect(await issuerOf()).toBe(new X509Certificate(first.certPem).fingerprint256);
    put(second);
    expect(await issuerOf()).toBe(new X509Certificate(second.certPem).fingerprint256);
    expect(changes).toEqual([Date.parse(new X509Certificate(second.certPem).validTo)]);
  });

  it("are refused while the CA's files do not read, and resume once they do", () => {
    const ca = sandboxCa();
    const { dir, put } = mounted(ca);
    const issuer = new LeafIssuer(caFilesIn(dir));
    put({ certPem: ca.certPem, keyPem: root.keyPem });
    expect(() => issuer.contextFor("api.anthropic.com")).toThrow(
      "the Custodian's CA cannot be read: the CA key is not the key of the CA certificate",
    );
    put(ca);
    expect(() => issuer.contextFor("api.anthropic.com")).not.toThrow();
  });

  it("caFilesIn gives the same files until either changes", () => {
    const { dir, put } = mounted(sandboxCa());
    const read = caFilesIn(dir);
    const a = read();
    expect(read()).toBe(a);
    put(sandboxCa(NOW + CUSTODIAN_CA_PERIOD_MS));
    expect(read()).not.toBe(a);
  });

  it("readCa keeps the intermediate and drops a self-signed root from what a leaf is served with", () => {
    const ca = sandboxCa();
    const read = readCa({ certPem: `${ca.certPem}${root.certPem}`, keyPem: ca.keyPem });
    expect(read.certPem.trim()).toBe(ca.certPem.trim());
    expect(read.chainPem.trim()).toBe(ca.certPem.trim());
    expect(readCa(root).chainPem).toBe("");
  });
});
