// Each Sandbox's Custodian CA (orchestrator/workspaces/custodian-ca.ts, lib/ca.ts, decision 0037):
// an intermediate of the installation root whose nameConstraints, critical, permit exactly the
// Sandbox's bound hosts; a CA for leaves only (pathlen 0); a week long with 2 to 7 days left at any
// moment of its period; derived, so the same bytes for the same Sandbox and period; and the
// Secret it is written as. What counts as a bound host (api/custodian-config.ts boundHosts).
import { createPrivateKey, X509Certificate } from "node:crypto";
import { boundHosts } from "../../api/custodian-config";
import { issueCa, issueIntermediate, nameConstraintsFor } from "../../lib/ca";
import {
  CUSTODIAN_CA_LIFE_MS,
  CUSTODIAN_CA_PERIOD_MS,
  custodianCa,
  custodianCaSecret,
  periodStart,
} from "../../orchestrator/workspaces/custodian-ca";
import { extensionOf, nameConstraintsOf, OID } from "../support/certificates";

const DAY = 86_400_000;
const HOUR = 3_600_000;
const root = issueCa("jr2 Custodian CA (jr2)");
const signingKey = Buffer.alloc(32, 3);
const NOW = Date.parse("2026-12-04T12:00:00Z");
const HOSTS = ["api.anthropic.com", "api.openai.com"];
const mint = (over: Partial<Parameters<typeof custodianCa>[0]> = {}) =>
  custodianCa({ root, signingKey, sandbox: "ws-a", hosts: HOSTS, now: NOW, ...over });

describe("a Sandbox's Custodian CA", () => {
  const ca = mint();
  const cert = new X509Certificate(ca.certPem);
  const rootCert = new X509Certificate(root.certPem);

  it("permits exactly the Sandbox's bound hosts by nameConstraints, critical; no subdomain, no address", () => {
    expect(nameConstraintsOf(ca.certPem)).toEqual({
      critical: true,
      permitted: ["DNS:api.anthropic.com", "DNS:api.openai.com"],
      excluded: [
        "DNS:.api.anthropic.com",
        "DNS:.api.openai.com",
        "IP:0.0.0.0/0.0.0.0",
        "IP:0000:0000:0000:0000:0000:0000:0000:0000/0000:0000:0000:0000:0000:0000:0000:0000",
      ],
    });
  });

  it("is a CA for leaves alone: CA:TRUE with pathlen 0, and keyCertSign only, both critical", () => {
    expect(cert.ca).toBe(true);
    const basic = extensionOf(ca.certPem, OID.basicConstraints)!;
    expect(basic.critical).toBe(true);
    const [isCa, pathLen] = basic.value.value as Array<{ value: string }>;
    expect(isCa!.value).toBe("\xff");
    expect(pathLen!.value).toBe("\x00");
    const usage = extensionOf(ca.certPem, OID.keyUsage)!;
    expect(usage.critical).toBe(true);
    // BIT STRING: 2 unused bits, then keyCertSign (bit 5) alone.
    expect(Buffer.from(usage.value.value as string, "binary")).toEqual(Buffer.from([0x02, 0x04]));
  });

  it("is issued by the installation root, which verifies it, and names the root's key", () => {
    expect(cert.issuer).toBe(rootCert.subject);
    expect(cert.checkIssued(rootCert)).toBe(true);
    expect(cert.verify(rootCert.publicKey)).toBe(true);
    const aki = extensionOf(ca.certPem, OID.authorityKeyIdentifier)!.value.value as Array<{ value: string }>;
    const ski = extensionOf(root.certPem, OID.subjectKeyIdentifier)!.value.value as string;
    expect(aki[0]!.value).toBe(ski);
    expect(cert.subject).toBe("CN=jr2 Custodian ws-a");
  });

  it("has a P-256 key, the one it comes with", () => {
    expect(cert.publicKey.asymmetricKeyType).toBe("ec");
    expect(cert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
    expect(cert.checkPrivateKey(createPrivateKey(ca.keyPem))).toBe(true);
  });

  it("is valid for 7 days from its period's start (an hour before, for clocks behind)", () => {
    const start = periodStart("ws-a", NOW);
    expect(Date.parse(cert.validFrom)).toBe(start - HOUR);
    expect(Date.parse(cert.validTo)).toBe(start + CUSTODIAN_CA_LIFE_MS);
    expect({ notBefore: ca.notBefore, notAfter: ca.notAfter }).toEqual({
      notBefore: start - HOUR,
      notAfter: start + 7 * DAY,
    });
  });

  it("always has 2 to 7 days left: a new one every 5 days, so renewing keeps one valid", () => {
    expect(CUSTODIAN_CA_PERIOD_MS).toBe(5 * DAY);
    for (let now = NOW; now < NOW + 12 * DAY; now += 7 * HOUR) {
      const { notBefore, notAfter } = mint({ now });
      expect(notBefore).toBeLessThanOrEqual(now);
      expect(notAfter - now).toBeGreaterThan(2 * DAY);
      expect(notAfter - now).toBeLessThanOrEqual(7 * DAY);
    }
  });

  it("is the same bytes for the same Sandbox, hosts and period: a re-provision or a restart writes no change", () => {
    expect(mint({ now: NOW + 1_000 })).toEqual(ca);
    const start = periodStart("ws-a", NOW);
    expect(mint({ now: start })).toEqual(ca);
    expect(mint({ now: start + CUSTODIAN_CA_PERIOD_MS - 1 })).toEqual(ca);
  });

  it("changes key and serial with the period and the Sandbox; its serial with the hosts", () => {
    const next = new X509Certificate(mint({ now: periodStart("ws-a", NOW) + CUSTODIAN_CA_PERIOD_MS }).certPem);
    const other = new X509Certificate(mint({ sandbox: "ws-b" }).certPem);
    const hosts = new X509Certificate(mint({ hosts: ["api.anthropic.com"] }).certPem);
    const key = (c: X509Certificate) => c.publicKey.export({ type: "spki", format: "der" }).toString("hex");
    for (const c of [next, other]) {
      expect(key(c)).not.toBe(key(cert));
      expect(c.serialNumber).not.toBe(cert.serialNumber);
    }
    expect(key(hosts)).toBe(key(cert));
    expect(hosts.serialNumber).not.toBe(cert.serialNumber);
    expect(parseInt(cert.serialNumber.padStart(32, "0").slice(0, 2), 16)).toBeLessThan(0x80);
  });

  it("rotates each Sandbox at its own moment, so a thousand do not rotate at once", () => {
    const starts = new Set(Array.from({ length: 50 }, (_, i) => periodStart(`ws-${i}`, NOW)));
    expect(starts.size).toBe(50);
  });

  it("is written as `<sandbox>-custodian-ca`, a tls Secret the Sandbox owns: the CA, its key, the root", () => {
    const secret = custodianCaSecret({
      root,
      signingKey,
      sandbox: "ws-a",
      hosts: HOSTS,
      now: NOW,
      namespace: "jr2",
      uid: "u-1",
    });
    expect(secret.metadata).toEqual({
      name: "ws-a-custodian-ca",
      namespace: "jr2",
      labels: { "jr2.dev/sandbox": "ws-a" },
      ownerReferences: [expect.objectContaining({ kind: "Sandbox", name: "ws-a", uid: "u-1", controller: true })],
    });
    expect(secret.type).toBe("kubernetes.io/tls");
    const text = (k: string) => Buffer.from(secret.data[k as keyof typeof secret.data], "base64").toString();
    expect(text("tls.crt")).toBe(ca.certPem);
    expect(text("tls.key")).toBe(ca.keyPem);
    expect(text("ca.crt")).toBe(root.certPem);
    expect(text("tls.key")).not.toContain(root.keyPem.split("\n")[1]);
  });
});

describe("nameConstraints for a list of hosts", () => {
  const constraints = (hosts: string[]) =>
    nameConstraintsOf(issueIntermediate(root, { name: "t", hosts, notBefore: NOW, notAfter: NOW + DAY }).certPem);

  it("keeps a bound host's subdomain open when it is bound too", () => {
    expect(constraints(["example.com", "api.example.com"])).toMatchObject({
      permitted: ["DNS:example.com", "DNS:api.example.com"],
      excluded: expect.arrayContaining(["DNS:.api.example.com"]),
    });
    expect(constraints(["example.com", "api.example.com"])!.excluded).not.toContain("DNS:.example.com");
  });

  it("permits a bound address as itself, and then every other address is outside", () => {
    expect(constraints(["api.example.com", "10.0.0.7", "::1"])).toEqual({
      critical: true,
      permitted: [
        "DNS:api.example.com",
        "IP:10.0.0.7/255.255.255.255",
        "IP:0000:0000:0000:0000:0000:0000:0000:0001/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      ],
      excluded: ["DNS:.api.example.com"],
    });
  });

  it("excludes every DNS name when only addresses are bound (an unconstrained type would be open)", () => {
    expect(constraints(["10.0.0.7"])).toEqual({
      critical: true,
      permitted: ["IP:10.0.0.7/255.255.255.255"],
      excluded: ["DNS:"],
    });
  });

  it("refuses no host at all: no constraint is no limit", () => {
    expect(() => nameConstraintsFor([])).toThrow("at least one host");
  });
});

describe("a Sandbox's bound hosts", () => {
  it("are the hosts of the https origins its held values are bound to, once each, sorted, without a port", () => {
    expect(
      boundHosts([
        { origins: ["https://api.openai.com", "https://api.anthropic.com:8443"] },
        { origins: ["https://api.anthropic.com", "http://models.jr2.svc:8080", "https://[::1]:9443"] },
      ]),
    ).toEqual(["::1", "api.anthropic.com", "api.openai.com"]);
  });

  it("are none with no held value, or only http origins (a CONNECT is always https)", () => {
    expect(boundHosts([])).toEqual([]);
    expect(boundHosts([{ origins: ["http://models.jr2.svc:8080"] }])).toEqual([]);
  });
});
