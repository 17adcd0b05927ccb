// Each released image's SBOM (decision 0073): an SPDX 2.3 JSON document listing what the image
// holds, from the same inputs the image is built from: every Debian package of the shared base
// (scripts/images/debian.lock), the npm packages that ship in it (for the companions and the Sandbox
// image, the packages their bundles' source maps name; for the controller, the closure
// scripts/images/controller-deps.ts copies), each at the version and integrity package-lock.json
// pins, the Go modules of the companions' jr2-confine (effector/confine/go.mod), and the project's
// own code. Pure: the caller reads the files and writes the document.
import { createHash } from "node:crypto";

type LockEntry = { version?: string; integrity?: string; license?: string; dev?: boolean; link?: boolean };
export type Lock = { packages: Record<string, LockEntry> };
export type DebPackage = { name: string; version: string; arch: string };

/** The lock path (`node_modules/a/node_modules/@s/b`) of every package a bundle's source map names. */
export function bundledPackages(sources: string[]): string[] {
  const found = new Set<string>();
  for (const s of sources) {
    const m = /(?:^|\/)(node_modules\/(?:@[^/]+\/)?[^/]+(?:\/node_modules\/(?:@[^/]+\/)?[^/]+)*)\//.exec(s);
    if (m) found.add(m[1]);
  }
  return [...found].sort();
}

/** The modules a go.mod requires (direct and indirect: what the binary may link). */
export function goModRequires(text: string): Array<{ module: string; version: string }> {
  const out: Array<{ module: string; version: string }> = [];
  const line = (l: string) => {
    const m = /^\s*([^\s/()]+\/\S+|[a-z0-9.-]+\.[a-z]+\/\S+)\s+(v\S+)/.exec(l.replace(/\/\/.*$/, ""));
    if (m) out.push({ module: m[1], version: m[2] });
  };
  for (const block of text.matchAll(/^require\s*\(([\s\S]*?)^\)/gm)) block[1].split("\n").forEach(line);
  for (const single of text.matchAll(/^require\s+([^(\s].*)$/gm)) line(single[1]);
  return out.sort((a, b) => a.module.localeCompare(b.module));
}

/** The package name a lock path ends in. */
export const packageName = (lockPath: string) => lockPath.slice(lockPath.lastIndexOf("node_modules/") + 13);

/** `sha512-<base64>` as SPDX wants it: lower-case hex. */
export function integrityHex(integrity: string | undefined): { algorithm: string; checksumValue: string }[] {
  const m = /^(sha512|sha256|sha1)-([A-Za-z0-9+/=]+)$/.exec(integrity ?? "");
  if (!m) return [];
  return [{ algorithm: m[1].toUpperCase(), checksumValue: Buffer.from(m[2], "base64").toString("hex") }];
}

/** A license the lock states, when it is an SPDX expression; else NOASSERTION ("SEE LICENSE IN ..."). */
export function spdxLicense(license: string | undefined): string {
  if (!license) return "NOASSERTION";
  return /^[()A-Za-z0-9.+\- ]+$/.test(license) && !/\bSEE\b|\bLICENSE\b/.test(license) ? license : "NOASSERTION";
}

const purlName = (name: string) => (name.startsWith("@") ? `%40${name.slice(1)}` : name);
/** SPDXIDs allow letters, digits, `.` and `-`. */
const spdxId = (kind: string, name: string, n: number) =>
  `SPDXRef-${kind}-${name.replace(/[^A-Za-z0-9.-]/g, "-")}-${n}`;

export type SbomInput = {
  /** The image's short name (companions, sandbox, controller). */
  image: string;
  /** Where it is pushed, without tag or digest (HOST/jr2/<name>). */
  repository: string;
  digest: string;
  version: string;
  /** The project's license (package.json's). */
  license: string;
  debian: { suite: string; packages: DebPackage[] };
  lock: Lock;
  /** Lock paths of the npm packages the image holds. */
  npm: string[];
  /** Go modules linked into a binary the image holds. */
  go?: Array<{ module: string; version: string }>;
  /** The document's creation time: the release's SOURCE_DATE_EPOCH, so a release made again is the same. */
  created: Date;
};

type SpdxPackage = Record<string, unknown> & { SPDXID: string };

/** The SPDX 2.3 JSON document of one image. Throws when a package the image holds is not in the lock. */
export function spdxDocument(i: SbomInput): Record<string, unknown> {
  const hex = i.digest.replace(/^sha256:/, "");
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`sbom: ${i.image}'s digest ${i.digest} is not sha256:<64 hex>`);
  const root: SpdxPackage = {
    SPDXID: "SPDXRef-Image",
    name: `jr2-${i.image}`,
    versionInfo: i.version,
    supplier: "Organization: jr2",
    downloadLocation: "NOASSERTION",
    filesAnalyzed: false,
    primaryPackagePurpose: "CONTAINER",
    checksums: [{ algorithm: "SHA256", checksumValue: hex }],
    licenseDeclared: i.license,
    externalRefs: [
      {
        referenceCategory: "PACKAGE-MANAGER",
        referenceType: "purl",
        referenceLocator: `pkg:oci/${i.image}@sha256%3A${hex}?repository_url=${encodeURIComponent(i.repository)}&tag=${encodeURIComponent(i.version)}`,
      },
    ],
  };
  const own: SpdxPackage = {
    SPDXID: "SPDXRef-jr2-operator",
    name: "jr2-operator",
    versionInfo: i.version,
    supplier: "Organization: jr2",
    downloadLocation: "NOASSERTION",
    filesAnalyzed: false,
    primaryPackagePurpose: "APPLICATION",
    licenseDeclared: i.license,
  };
  let n = 0;
  const debs: SpdxPackage[] = i.debian.packages.map((p) => ({
    SPDXID: spdxId("deb", p.name, n++),
    name: p.name,
    versionInfo: p.version,
    supplier: "Organization: Debian",
    downloadLocation: "NOASSERTION",
    filesAnalyzed: false,
    primaryPackagePurpose: "LIBRARY",
    externalRefs: [
      {
        referenceCategory: "PACKAGE-MANAGER",
        referenceType: "purl",
        referenceLocator: `pkg:deb/debian/${encodeURIComponent(p.name)}@${encodeURIComponent(p.version)}?arch=${p.arch}&distro=${i.debian.suite}`,
      },
    ],
  }));
  const npm: SpdxPackage[] = [...new Set(i.npm)].sort().map((path) => {
    const e = i.lock.packages[path];
    if (!e?.version)
      throw new Error(
        `sbom: ${i.image} holds ${path}, which package-lock.json does not pin: run npm ci, then npm run build`,
      );
    const name = packageName(path);
    return {
      SPDXID: spdxId("npm", name, n++),
      name,
      versionInfo: e.version,
      downloadLocation: "NOASSERTION",
      filesAnalyzed: false,
      primaryPackagePurpose: "LIBRARY",
      checksums: integrityHex(e.integrity),
      licenseDeclared: spdxLicense(e.license),
      externalRefs: [
        {
          referenceCategory: "PACKAGE-MANAGER",
          referenceType: "purl",
          referenceLocator: `pkg:npm/${purlName(name)}@${e.version}`,
        },
      ],
    };
  });
  const go: SpdxPackage[] = (i.go ?? []).map((g) => ({
    SPDXID: spdxId("go", g.module, n++),
    name: g.module,
    versionInfo: g.version,
    downloadLocation: "NOASSERTION",
    filesAnalyzed: false,
    primaryPackagePurpose: "LIBRARY",
    externalRefs: [
      {
        referenceCategory: "PACKAGE-MANAGER",
        referenceType: "purl",
        referenceLocator: `pkg:golang/${g.module}@${g.version}`,
      },
    ],
  }));
  const packages = [root, own, ...debs, ...npm, ...go];
  const body = {
    spdxVersion: "SPDX-2.3",
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name: `jr2-${i.image}-${i.version}`,
    documentNamespace: "",
    creationInfo: { created: i.created.toISOString().replace(/\.\d{3}Z$/, "Z"), creators: ["Tool: jr2-release"] },
    packages,
    relationships: [
      { spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES", relatedSpdxElement: "SPDXRef-Image" },
      ...packages
        .slice(1)
        .map((p) => ({ spdxElementId: "SPDXRef-Image", relationshipType: "CONTAINS", relatedSpdxElement: p.SPDXID })),
    ],
  };
  // Unique per document and stable for the same content: the image's digest and the packages.
  const hash = createHash("sha256").update(JSON.stringify(body)).digest("hex").slice(0, 16);
  body.documentNamespace = `https://jr2.dev/spdx/${i.image}/${encodeURIComponent(i.version)}/${hex}-${hash}`;
  return body;
}
