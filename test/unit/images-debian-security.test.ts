// The check that scripts/images/debian.lock is not behind Debian's security updates
// (scripts/images/debian-security.ts, decision 0078): Debian's version ordering, held to dpkg's own
// where this machine has dpkg, the newest version of each package in a Packages index, the locked
// packages older than it named one by one, and the index's hash read from InRelease. The fetch
// itself is `npm run images -- --check-security` (no network in the unit tier).
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import {
  behindSecurity,
  compareDebianVersions,
  packagesIndex,
  releaseSha256,
} from "../../scripts/images/debian-security";

const sign = (n: number) => Math.sign(n);

describe("Debian's version ordering", () => {
  test.each([
    ["1.0", "1.0", 0],
    ["1.0", "1.1", -1],
    ["1.0~rc1", "1.0", -1],
    ["1.0", "1.0+deb13u1", -1],
    ["20250419~deb12u2", "20250419+deb13u1", -1],
    ["1:2.38.1-5+deb12u3", "1:2.41.5-0+deb13u1", -1],
    ["1:1.0", "2.0", 1],
    ["2.41-12+deb13u5", "2.41-12+deb13u4", 1],
    ["3.5.10-1~deb13u1", "3.5.10-1", -1],
    ["1.0-1", "1.0-1.1", -1],
    ["1.01", "1.1", 0],
    ["1.0a", "1.0+", -1],
    ["0.19.0-3+b8", "0.19.0-3", 1],
  ])("%s against %s is %i", (a, b, want) => {
    expect(sign(compareDebianVersions(a, b))).toBe(want);
    expect(sign(compareDebianVersions(b, a))).toBe(want === 0 ? 0 : -want);
  });

  const dpkg = spawnSync("dpkg", ["--version"]).status === 0;
  (dpkg ? test : test.skip)("agrees with dpkg --compare-versions on generated versions", () => {
    const piece = fc.stringMatching(/^[0-9][0-9a-z.+~]{0,6}$/);
    const version = fc
      .tuple(fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }), piece, fc.option(piece, { nil: undefined }))
      .map(([e, u, r]) => `${e === undefined ? "" : `${e}:`}${u}${r === undefined ? "" : `-${r}`}`);
    fc.assert(
      fc.property(version, version, (a, b) => {
        const lt = spawnSync("dpkg", ["--compare-versions", a, "lt", b]).status === 0;
        const eq = spawnSync("dpkg", ["--compare-versions", a, "eq", b]).status === 0;
        expect(sign(compareDebianVersions(a, b))).toBe(lt ? -1 : eq ? 0 : 1);
      }),
      { numRuns: 150 },
    );
  });
});

describe("the lock against the security suite", () => {
  const index = packagesIndex(
    [
      "Package: openssl\nVersion: 3.5.10-1~deb13u1\nArchitecture: amd64\n",
      "Package: openssl\nVersion: 3.5.11-1~deb13u1\nArchitecture: amd64\n",
      "Package: ca-certificates\nVersion: 20250419+deb13u1\nArchitecture: all\n",
      "Package: git\nVersion: 1:9.0-1\nArchitecture: arm64\n",
    ].join("\n"),
  );

  test("the index keeps each package's newest version, of this architecture or all", () => {
    expect([...index]).toEqual([
      ["openssl", "3.5.11-1~deb13u1"],
      ["ca-certificates", "20250419+deb13u1"],
    ]);
  });

  test("names each locked package older than the security suite's, and no other", () => {
    const lock = [
      { name: "openssl", version: "3.5.10-1~deb13u1", arch: "amd64" },
      { name: "ca-certificates", version: "20250419+deb13u1", arch: "all" },
      { name: "git", version: "1:2.47.3-0+deb13u1", arch: "amd64" },
    ];
    expect(behindSecurity(lock, index, "trixie")).toEqual([
      "openssl: locked 3.5.10-1~deb13u1, trixie-security has 3.5.11-1~deb13u1",
    ]);
    expect(behindSecurity(lock.slice(1), index, "trixie")).toEqual([]);
  });

  test("reads an index's SHA256 from InRelease", () => {
    const release = [
      "Suite: trixie-security",
      "MD5Sum:",
      " 0123 10 main/binary-amd64/Packages.xz",
      "SHA256:",
      " aaaa 10 main/binary-all/Packages.xz",
      " bbbb 12 main/binary-amd64/Packages.xz",
      "",
    ].join("\n");
    expect(releaseSha256(release, "main/binary-amd64/Packages.xz")).toBe("bbbb");
    expect(releaseSha256(release, "contrib/binary-amd64/Packages.xz")).toBeUndefined();
  });
});
