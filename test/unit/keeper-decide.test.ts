// The keeper's decisions (keeper/decide.ts, decision 0075): what it makes or renews when, and the
// webhook patch that writes nothing once each webhook trusts the CA and calls the API path.
import { DAY } from "../../lib/ca";
import { issueAdmissionCa, issueServing } from "../../keeper/certificates";
import {
  LIFETIMES,
  caVerdict,
  rolledOut,
  servingVerdict,
  trusts,
  trustsOnly,
  webhookPatch,
  webhookPath,
} from "../../keeper/decide";

const NOW = Date.parse("2027-01-01T00:00:00Z");
const NAMES = ["pepr-x.pepr-system.svc", "pepr-x-watcher.pepr-system.svc"];
const b64 = (s: string) => Buffer.from(s).toString("base64");
const ca = issueAdmissionCa("pepr-x admission CA", LIFETIMES.caDays, NOW);
const caEnd = NOW + LIFETIMES.caDays * DAY;
const serving = (days: number, names = NAMES, by = ca) =>
  issueServing(by, "pepr-x admission CA", names, days, NOW, caEnd).certPem;

describe("the CA", () => {
  it("is made when absent or unreadable", () => {
    expect(caVerdict(undefined, NOW).action).toBe("make");
    expect(caVerdict("not a certificate", NOW).action).toBe("make");
  });
  it("is kept with a year or more left, renewed under a year", () => {
    expect(caVerdict(ca.certPem, NOW).action).toBe("keep");
    expect(caVerdict(ca.certPem, caEnd - 366 * DAY).action).toBe("keep");
    const late = caVerdict(ca.certPem, caEnd - 364 * DAY);
    expect(late).toMatchObject({ action: "renew", why: expect.stringMatching(/ends in 36\d days/) });
  });
});

describe("the serving pair", () => {
  it("is made when absent", () => {
    expect(servingVerdict(undefined, ca.certPem, NAMES, NOW).action).toBe("make");
  });
  it("is kept with 30 days or more left, renewed under 30", () => {
    const pem = serving(365);
    expect(servingVerdict(pem, ca.certPem, NAMES, NOW).action).toBe("keep");
    expect(servingVerdict(pem, ca.certPem, NAMES, NOW + 334 * DAY).action).toBe("keep");
    expect(servingVerdict(pem, ca.certPem, NAMES, NOW + 336 * DAY)).toMatchObject({
      action: "renew",
      why: expect.stringMatching(/ends in 2\d days/),
    });
  });
  it("is renewed when another CA signed it (the CA was renewed) or when it misses a name", () => {
    const other = issueAdmissionCa("pepr-x admission CA", LIFETIMES.caDays, NOW);
    expect(servingVerdict(serving(365, NAMES, other), ca.certPem, NAMES, NOW)).toMatchObject({
      action: "renew",
      why: "the serving certificate is not signed by the CA in use",
    });
    expect(servingVerdict(serving(365, [NAMES[0]!]), ca.certPem, NAMES, NOW)).toMatchObject({
      action: "renew",
      why: `the serving certificate does not name ${NAMES[1]}`,
    });
  });
  it("never outlives its CA", () => {
    const pem = issueServing(ca, "pepr-x admission CA", NAMES, 365, caEnd - 10 * DAY, caEnd).certPem;
    expect(servingVerdict(pem, ca.certPem, NAMES, caEnd - 10 * DAY).action).toBe("renew");
  });
});

describe("the webhooks", () => {
  const path = webhookPath("ValidatingWebhookConfiguration", "abc");
  const bundle = b64(ca.certPem);
  const config = (caBundle?: string, p?: string) => ({
    webhooks: [
      { name: "a.pepr.dev", clientConfig: { caBundle, service: { path: p } } },
      { name: "b.pepr.dev", clientConfig: { url: "https://elsewhere" } },
    ],
  });
  it("are given the CA and the path, each change guarded by the webhook's name", () => {
    expect(webhookPath("MutatingWebhookConfiguration", "abc")).toBe("/mutate/abc");
    expect(webhookPatch(config(), bundle, path)).toEqual([
      { op: "test", path: "/webhooks/0/name", value: "a.pepr.dev" },
      { op: "add", path: "/webhooks/0/clientConfig/caBundle", value: bundle },
      { op: "add", path: "/webhooks/0/clientConfig/service/path", value: "/validate/abc" },
    ]);
  });
  it("need no patch once they trust the CA and call the path; cert-manager's bundle is left alone", () => {
    expect(webhookPatch(config(bundle, path), bundle, path)).toEqual([]);
    expect(webhookPatch(config("theirs", path), undefined, path)).toEqual([]);
  });
  it("tell a widened bundle from the CA alone", () => {
    const old = issueAdmissionCa("pepr-x admission CA", LIFETIMES.caDays, NOW);
    const widened = b64(old.certPem + ca.certPem);
    expect([trusts(widened, ca.certPem), trustsOnly(widened, ca.certPem)]).toEqual([true, false]);
    expect([trusts(bundle, ca.certPem), trustsOnly(bundle, ca.certPem)]).toEqual([true, true]);
    expect(trusts(undefined, ca.certPem)).toBe(false);
  });
});

it("a rollout is done when every replica is new and available", () => {
  const d = (s: object, replicas = 2) => ({ metadata: { generation: 3 }, spec: { replicas }, status: s });
  const done = { observedGeneration: 3, replicas: 2, updatedReplicas: 2, availableReplicas: 2 };
  expect(rolledOut(d(done))).toBe(true);
  expect(rolledOut(d({ ...done, observedGeneration: 2 }))).toBe(false);
  expect(rolledOut(d({ ...done, replicas: 3 }))).toBe(false);
  expect(rolledOut(d({ ...done, availableReplicas: 1 }))).toBe(false);
});
