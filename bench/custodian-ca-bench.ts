// Benchmark: what a Sandbox's Custodian CA costs (decision 0037). In this process, no cluster: the
// Orchestrator's mint of one Sandbox's intermediate as it writes it (a P-256 key derived from the
// signing key, signed by an RSA-2048 root), beside what an RSA-2048 intermediate would cost (its
// key generation alone); and the Custodian's mint of one leaf (a P-256 certificate signed by the
// intermediate, with its TLS context), beside the RSA leaf node-forge signed before. Figures: p50
// and p99 wall time, and CPU per mint (user + system over the whole run).
//   BENCH_CA_MINTS=300 (default; a tenth of that for the RSA figures)
import { generateKeyPairSync } from "node:crypto";
import { performance } from "node:perf_hooks";
import forge from "node-forge";
import { LeafIssuer } from "../custodian/leaf";
import { issueCa, positiveSerial } from "../lib/ca";
import { custodianCa } from "../orchestrator/workspaces/custodian-ca";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sorted } from "./stats";

const B = "custodian-ca";
const HOSTS = ["api.anthropic.com", "api.openai.com"];

/** p50, p99 and CPU per call of `fn` over `n` calls (after 5 to warm up). */
function measure(name: string, n: number, fn: (i: number) => void): Result[] {
  for (let i = 0; i < 5; i++) fn(-1 - i);
  const ms: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    fn(i);
    ms.push(performance.now() - t);
  }
  const cpu = process.cpuUsage(cpu0);
  const s = sorted(ms);
  return [
    { bench: B, metric: `${name}_p50`, value: round(percentile(s, 50)), unit: "ms" },
    { bench: B, metric: `${name}_p99`, value: round(percentile(s, 99)), unit: "ms" },
    { bench: B, metric: `${name}_cpu`, value: round((cpu.user + cpu.system) / 1000 / n), unit: "ms" },
  ];
}

export async function custodianCaBench(): Promise<Result[]> {
  const n = Number(process.env.BENCH_CA_MINTS ?? 300);
  const root = issueCa("jr2 Custodian CA (bench)");
  const signingKey = Buffer.alloc(32, 9);
  const now = Date.now();
  const ca = custodianCa({ root, signingKey, sandbox: "ws-bench", hosts: HOSTS, now });
  const leaves = new LeafIssuer(ca);
  // The leaf before decision 0037: an RSA key per process, node-forge signing with the RSA root.
  const rootKey = forge.pki.privateKeyFromPem(root.keyPem) as forge.pki.rsa.PrivateKey;
  const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const rsaLeafKey = forge.pki.publicKeyFromPem(pair.publicKey.export({ type: "spki", format: "pem" }).toString());
  const rsaLeaf = (host: string) => {
    const cert = forge.pki.createCertificate();
    cert.publicKey = rsaLeafKey;
    cert.serialNumber = positiveSerial();
    cert.validity.notBefore = new Date(now);
    cert.validity.notAfter = new Date(now + 86_400_000);
    cert.setSubject([{ name: "commonName", value: host }]);
    cert.setIssuer(forge.pki.certificateFromPem(root.certPem).subject.attributes);
    cert.setExtensions([{ name: "subjectAltName", altNames: [{ type: 2, value: host }] }]);
    cert.sign(rootKey, forge.md.sha256.create());
  };
  return [
    ...measure("intermediate_p256", n, (i) => custodianCa({ root, signingKey, sandbox: `ws-${i}`, hosts: HOSTS, now })),
    ...measure("rsa2048_keygen", Math.max(10, Math.round(n / 10)), () =>
      generateKeyPairSync("rsa", { modulusLength: 2048 }),
    ),
    ...measure("leaf_p256", n, (i) => leaves.contextFor(`h${i}.example`)),
    ...measure("leaf_rsa_forge", Math.max(10, Math.round(n / 10)), (i) => rsaLeaf(`h${i}.example`)),
  ];
}
