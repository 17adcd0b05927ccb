// A throwaway CA and a server certificate it signed, for the stand-in HTTPS servers of tests (a
// private forge's): made by openssl (a Debian package of the machine) in a temp dir, one day long.
// The CA's certificate is what a client is told to trust beside the system's.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type TestTls = { caPem: string; certPem: string; keyPem: string };

/** A CA and a leaf for `names` (DNS names; IP literals become IP SANs), both ECDSA P-256. */
export function testTls(names: readonly string[]): TestTls {
  const dir = mkdtempSync(join(tmpdir(), "jr2-test-tls-"));
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "pipe", "pipe"] });
  try {
    ssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f("ca.key"));
    ssl("req", "-x509", "-new", "-key", f("ca.key"), "-subj", "/CN=jr2 test CA", "-days", "1", "-out", f("ca.crt"));
    ssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f("leaf.key"));
    ssl("req", "-new", "-key", f("leaf.key"), "-subj", `/CN=${names[0]}`, "-out", f("leaf.csr"));
    const san = names.map((n) => (/^[0-9.]+$/.test(n) || n.includes(":") ? `IP:${n}` : `DNS:${n}`)).join(",");
    writeFileSync(f("ext"), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
    ssl(
      "x509",
      "-req",
      "-in",
      f("leaf.csr"),
      "-CA",
      f("ca.crt"),
      "-CAkey",
      f("ca.key"),
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      f("ext"),
      "-out",
      f("leaf.crt"),
    );
    return {
      caPem: readFileSync(f("ca.crt"), "utf8"),
      certPem: readFileSync(f("leaf.crt"), "utf8"),
      keyPem: readFileSync(f("leaf.key"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
