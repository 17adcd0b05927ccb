// Each Sandbox's Custodian CA (decision 0037): an intermediate the installation root signs, P-256,
// whose nameConstraints permit that Sandbox's bound hosts alone, for 7 days. A stolen key signs for
// those hosts, for days; the root's key never leaves the Orchestrator.
//
// Derived, like the Sandbox's other secrets (decision 0011): its key and serial are HMACs of the
// Sandbox's name and its period under the signing key, its times the period's. So a re-provision,
// a restored Orchestrator or a second one writes the same bytes, and nothing is read to know
// whether a rotation is due. A period is 5 days, offset per Sandbox so that rotations spread:
// while the lease is renewed (kube-gateway.ts renew), the Custodian holds one with 2 to 7 days left.
// Pure.
import { createECDH, createHash, createHmac, createPrivateKey, type KeyObject } from "node:crypto";
import { CA_CERT_KEY, CA_KEY_KEY, CA_ROOT_KEY } from "../../api/custodian-config";
import { sandboxOwnerReference } from "../../api/crd";
import { SANDBOX_LABEL, custodianCaSecretName } from "../../api/wire";
import { type CaPem, DAY, issueIntermediate } from "../../lib/ca";

/** How long an intermediate is valid, and how often the next one starts. */
export const CUSTODIAN_CA_LIFE_MS = 7 * DAY;
export const CUSTODIAN_CA_PERIOD_MS = 5 * DAY;
/** Valid from this long before its period starts: a node's clock a little behind still accepts it. */
const SKEW_MS = 3_600_000;

const KEY_PURPOSE = "jr2/custodian-ca-key/v1";
const SERIAL_PURPOSE = "jr2/custodian-ca-serial/v1";

/** Where `sandbox`'s rotations fall within a period: a digest of its name, so they spread; whole
 * seconds, as a certificate's times are. */
const offsetOf = (sandbox: string) =>
  (createHash("sha256").update(sandbox, "utf8").digest().readUIntBE(0, 6) % (CUSTODIAN_CA_PERIOD_MS / 1000)) * 1000;

/** The start of the period `now` falls in, for `sandbox`. */
export function periodStart(sandbox: string, now: number): number {
  const offset = offsetOf(sandbox);
  return Math.floor((now - offset) / CUSTODIAN_CA_PERIOD_MS) * CUSTODIAN_CA_PERIOD_MS + offset;
}

/** A P-256 private key from `seed` (32 bytes; hashed again in the rare case it is no scalar). */
function p256From(seed: Buffer): KeyObject {
  for (let d = seed; ; d = createHash("sha256").update(d).digest()) {
    const ecdh = createECDH("prime256v1");
    try {
      ecdh.setPrivateKey(d);
    } catch {
      continue;
    }
    const point = ecdh.getPublicKey(); // 0x04, x, y
    const b64 = (b: Buffer) => b.toString("base64url");
    const jwk = { kty: "EC", crv: "P-256", d: b64(d), x: b64(point.subarray(1, 33)), y: b64(point.subarray(33)) };
    return createPrivateKey({ key: jwk, format: "jwk" });
  }
}

export type CustodianCaInput = {
  /** The installation root, with its key. */
  root: CaPem;
  signingKey: Buffer;
  sandbox: string;
  /** The Sandbox's bound hosts (api/custodian-config.ts boundHosts), at least one. */
  hosts: readonly string[];
  now: number;
};

export type CustodianCa = CaPem & { notBefore: number; notAfter: number };

/** The intermediate for `sandbox` in the period of `now`: the same bytes for the same input. */
export function custodianCa(input: CustodianCaInput): CustodianCa {
  const start = periodStart(input.sandbox, input.now);
  const hmac = (purpose: string, ...parts: string[]) =>
    createHmac("sha256", input.signingKey).update([purpose, input.sandbox, String(start), ...parts].join("\0"), "utf8");
  const serial = hmac(SERIAL_PURPOSE, input.hosts.join(",")).digest().subarray(0, 16);
  serial[0]! &= 0x7f;
  const notBefore = start - SKEW_MS;
  const notAfter = start + CUSTODIAN_CA_LIFE_MS;
  const pem = issueIntermediate(input.root, {
    name: `jr2 Custodian ${input.sandbox}`,
    hosts: input.hosts,
    key: p256From(hmac(KEY_PURPOSE).digest()),
    serial: serial.toString("hex"),
    notBefore,
    notAfter,
  });
  return { ...pem, notBefore, notAfter };
}

/** The Secret `<sandbox>-custodian-ca`, owned by the Sandbox: the intermediate, its key, and the
 * root above it (not mounted: what a reader checks the chain with). */
export function custodianCaSecret(input: CustodianCaInput & { namespace: string; uid: string }) {
  const ca = custodianCa(input);
  const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: custodianCaSecretName(input.sandbox),
      namespace: input.namespace,
      labels: { [SANDBOX_LABEL]: input.sandbox },
      ownerReferences: [sandboxOwnerReference(input.sandbox, input.uid)],
    },
    type: "kubernetes.io/tls",
    data: { [CA_CERT_KEY]: b64(ca.certPem), [CA_KEY_KEY]: b64(ca.keyPem), [CA_ROOT_KEY]: b64(input.root.certPem) },
  };
}
