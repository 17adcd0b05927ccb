// The webhook server's certificates (lib/serving-certificate.ts, decision 0032): an ECDSA P-256 CA
// and a serving certificate it signed, which a real TLS client accepts for the names asked and
// nothing else.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { connect, createServer, type Server } from "node:tls";
import forge from "node-forge";
import { servingCertificate } from "../../lib/serving-certificate";

const DAY = 86_400_000;
const ECDSA_WITH_SHA256 = "1.2.840.10045.4.3.2";

describe("the webhook server's certificates", () => {
  const now = Date.now();
  const made = servingCertificate({ dnsNames: ["pepr-x.pepr-system.svc", "localhost"], ips: ["127.0.0.1"] }, 30, now);
  const ca = new X509Certificate(made.caPem);
  const leaf = new X509Certificate(made.certPem);

  it("are a self-signed CA and a serving certificate it signed, not a CA", () => {
    expect(ca.ca).toBe(true);
    expect(ca.verify(ca.publicKey)).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.verify(ca.publicKey)).toBe(true);
  });

  it("use P-256 keys, the serving key the one returned", () => {
    for (const cert of [ca, leaf]) {
      expect(cert.publicKey.asymmetricKeyType).toBe("ec");
      expect(cert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
    }
    expect(leaf.checkPrivateKey(createPrivateKey(made.keyPem))).toBe(true);
  });

  it("name the DNS names and addresses asked as SANs", () => {
    expect(leaf.subjectAltName).toBe("DNS:pepr-x.pepr-system.svc, DNS:localhost, IP Address:127.0.0.1");
  });

  it("say ecdsa-with-SHA256 with no parameters, inside and outside the signed part", () => {
    const der = forge.asn1.fromDer(forge.pem.decode(made.certPem)[0]!.body);
    const [tbs, outer] = der.value as forge.asn1.Asn1[];
    const inner = (tbs!.value as forge.asn1.Asn1[])[2]!;
    for (const algorithm of [inner, outer!]) {
      const parts = algorithm.value as forge.asn1.Asn1[];
      expect(parts).toHaveLength(1);
      expect(forge.asn1.derToOid(forge.util.createBuffer(parts[0]!.value as string))).toBe(ECDSA_WITH_SHA256);
    }
  });

  it("are valid from a minute before they were made for the days asked", () => {
    for (const cert of [ca, leaf]) {
      expect(Math.abs(Date.parse(cert.validFrom) - (now - 60_000))).toBeLessThan(1_000);
      expect(Math.abs(Date.parse(cert.validTo) - (now + 30 * DAY))).toBeLessThan(1_000);
    }
  });

  describe("in a TLS handshake", () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer({ key: made.keyPem, cert: made.certPem }, (socket) => socket.end("ok"));
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      port = (server.address() as AddressInfo).port;
    });
    afterAll(() => server.close());

    const handshake = (opts: { ca: string; servername?: string }) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: "127.0.0.1", port, ...opts }, () => {
          let body = "";
          socket.on("data", (d) => (body += d));
          socket.on("end", () => resolve(body));
        });
        socket.on("error", reject);
      });

    it("are accepted by a client trusting the CA, for a DNS name and for the address", async () => {
      await expect(handshake({ ca: made.caPem, servername: "localhost" })).resolves.toBe("ok");
      await expect(handshake({ ca: made.caPem })).resolves.toBe("ok");
    });

    it("are refused for a name they do not carry", async () => {
      await expect(handshake({ ca: made.caPem, servername: "other.svc" })).rejects.toThrow(/altnames/);
    });

    it("are refused by a client trusting another CA", async () => {
      const other = servingCertificate({ dnsNames: ["localhost"] });
      await expect(handshake({ ca: other.caPem, servername: "localhost" })).rejects.toThrow(
        "unable to verify the first certificate",
      );
    });
  });
});
