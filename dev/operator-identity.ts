// The local operator's own identity (decision 0029). Deployed, the operator writes as its service
// account, and the pod webhook skips that account's pod creates, since the reconcile checks each
// pod it builds itself. A local run on the local control plane does the same: its processes get a
// client certificate from the cluster's CA naming that service account (in system:masters, as
// the developer's own identity is), so the deployed webhook configuration applies unchanged and
// the developer's own pod creates are judged as anyone's. On any other cluster (KUBECONFIG set,
// no CA key at hand) the operator runs as the kubeconfig's user, and the webhook names that user.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import forge from "node-forge";
import { parse, stringify } from "yaml";

type Kubeconfig = {
  "current-context"?: string;
  contexts?: { name: string; context: { cluster: string; user: string } }[];
  clusters?: { name: string; cluster: { server: string; "certificate-authority"?: string } }[];
};

/** The cluster's CA (certificate and key files) when the kubeconfig's cluster names one with its key beside it. */
function clusterCa(config: Kubeconfig, base: string): { crt: string; key: string; server: string } | undefined {
  const context = config.contexts?.find((c) => c.name === config["current-context"])?.context;
  const cluster = config.clusters?.find((c) => c.name === context?.cluster)?.cluster;
  const named = cluster?.["certificate-authority"];
  if (!cluster || !named) return undefined;
  // A relative path is the kubeconfig's own directory's, as kubectl reads it.
  const crt = resolve(base, named);
  const key = join(dirname(crt), "ca.key");
  return existsSync(crt) && existsSync(key) ? { crt, key, server: cluster.server } : undefined;
}

/** A client certificate for `username` in `groups`, signed by the CA, valid for a year. */
function clientCertificate(caCrtPem: string, caKeyPem: string, username: string, groups: string[]) {
  const ca = forge.pki.certificateFromPem(caCrtPem);
  const keys = forge.pki.rsa.generateKeyPair(2048);
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  // A leading 01 keeps the DER integer positive: Go's x509 (the API server) refuses a negative serial.
  cert.serialNumber = `01${createHash("sha256").update(`${username}${Date.now()}`).digest("hex").slice(0, 16)}`;
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 365 * 24 * 3600 * 1000);
  cert.setSubject([
    { name: "commonName", value: username },
    ...groups.map((g) => ({ name: "organizationName", value: g })),
  ]);
  cert.setIssuer(ca.subject.attributes);
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
    { name: "extKeyUsage", clientAuth: true },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(caKeyPem), forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}

/**
 * The kubeconfig the local operator's processes run with: on a cluster whose CA key is at hand, one
 * of their own naming `username` (kept in `stateDir` while the CA stays the same); else `kubeconfig`.
 */
export function operatorKubeconfig(kubeconfig: string, stateDir: string, username: string): string {
  const ca = clusterCa(parse(readFileSync(kubeconfig, "utf8")) as Kubeconfig, dirname(kubeconfig));
  if (!ca) return kubeconfig;
  const caPem = readFileSync(ca.crt, "utf8");
  const file = join(stateDir, "operator.kubeconfig");
  const stamp = join(stateDir, "operator.kubeconfig.ca");
  const issuedFor = `${createHash("sha256").update(caPem).digest("hex")} ${username}`;
  if (existsSync(file) && existsSync(stamp) && readFileSync(stamp, "utf8") === issuedFor) return file;
  const { certPem, keyPem } = clientCertificate(caPem, readFileSync(ca.key, "utf8"), username, ["system:masters"]);
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "local", cluster: { server: ca.server, "certificate-authority-data": b64(caPem) } }],
    users: [
      { name: "jr2-operator", user: { "client-certificate-data": b64(certPem), "client-key-data": b64(keyPem) } },
    ],
    contexts: [{ name: "jr2-operator", context: { cluster: "local", user: "jr2-operator" } }],
    "current-context": "jr2-operator",
  };
  writeFileSync(file, stringify(config), { mode: 0o600 });
  writeFileSync(stamp, issuedFor);
  return file;
}
