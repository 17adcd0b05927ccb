// Kubernetes quantities read and written (lib/quantity.ts) and a workspace's Size split inside its pod
// (orchestrator/workspaces/size.ts): the shares, each refusal and its fix; property: the parts sum to the pod.
import fc from "fast-check";
import { bytesOf, formatBytes, formatMilliCpu, milliCpu, quantityValue } from "../../lib/quantity";
import type { Size } from "../../api/orchestrator-schemas";
import {
  CUSTODIAN_SLICE,
  HARNESS_FLOOR,
  SizeError,
  splitSize,
  type Resources,
} from "../../orchestrator/workspaces/size";

const Mi = 2 ** 20;
const Gi = 2 ** 30;

/** The SizeError's message, or a failure when the split is accepted. */
const refusal = (size: Size | undefined, user?: Size, slice?: { cpu: string; memory: string }): string => {
  try {
    splitSize(size, user, slice);
  } catch (err) {
    expect(err).toBeInstanceOf(SizeError);
    return (err as Error).message;
  }
  throw new Error("expected a SizeError");
};

/** The quantity the refusal proposes for `field` (`raise size.cpu to 200m or more`). */
const proposed = (message: string, field: "cpu" | "memory"): string => {
  const m = new RegExp(`raise size\\.${field} to (\\S+) or more`).exec(message);
  if (!m) throw new Error(`no raise of size.${field} in: ${message}`);
  return m[1]!;
};

const equalTo = (r: Record<string, string>): Resources => ({ requests: r, limits: r });

describe("quantities", () => {
  it("reads CPU in its spellings as cores and whole millicores", () => {
    expect(quantityValue("500m")).toBe(0.5);
    expect(quantityValue("2")).toBe(2);
    expect(quantityValue("1.5")).toBe(1.5);
    expect(quantityValue(".5")).toBe(0.5);
    expect(milliCpu("500m")).toBe(500);
    expect(milliCpu("2")).toBe(2000);
    expect(milliCpu("1.5")).toBe(1500);
    expect(milliCpu("0.1")).toBe(100);
    expect(milliCpu("1.001")).toBe(1001);
  });

  it("rounds a CPU finer than a millicore up, as Kubernetes does", () => {
    expect(milliCpu("0.0005")).toBe(1);
    expect(milliCpu("1.0001")).toBe(1001);
  });

  it("reads memory in binary and decimal suffixes as whole bytes", () => {
    expect(bytesOf("192Mi")).toBe(192 * Mi);
    expect(bytesOf("4Gi")).toBe(4 * Gi);
    expect(bytesOf("1.5Gi")).toBe(1536 * Mi);
    expect(bytesOf("2Ki")).toBe(2048);
    expect(bytesOf("1k")).toBe(1000);
    expect(bytesOf("1G")).toBe(1e9);
    expect(bytesOf("3M")).toBe(3e6);
    expect(bytesOf("1024")).toBe(1024);
  });

  it("rounds a fraction of a byte up", () => {
    expect(bytesOf("0.1Gi")).toBe(Math.ceil(0.1 * Gi));
    expect(bytesOf("1.5")).toBe(2);
    expect(bytesOf("1m")).toBe(1);
  });

  it("trims surrounding space", () => {
    expect(quantityValue(" 4Gi ")).toBe(4 * Gi);
  });

  it.each(["", "abc", "-1", "1e3", "E", "4gi", "4GB", "4 Gi", "1.", "0x10", "+1", "1.5.2", "Mi"])(
    "answers undefined for a spelling it does not read: %j",
    (text) => {
      expect(quantityValue(text)).toBeUndefined();
      expect(milliCpu(text)).toBeUndefined();
      expect(bytesOf(text)).toBeUndefined();
    },
  );

  it("writes millicores as whole cores without a suffix, else with m", () => {
    expect(formatMilliCpu(2000)).toBe("2");
    expect(formatMilliCpu(1500)).toBe("1500m");
    expect(formatMilliCpu(100)).toBe("100m");
    expect(formatMilliCpu(0)).toBe("0");
  });

  it("writes bytes in the largest binary unit that divides them, else as plain bytes", () => {
    expect(formatBytes(4 * Gi)).toBe("4Gi");
    expect(formatBytes(1536 * Mi)).toBe("1536Mi");
    expect(formatBytes(192 * Mi)).toBe("192Mi");
    expect(formatBytes(2048)).toBe("2Ki");
    expect(formatBytes(2 ** 40)).toBe("1Ti");
    expect(formatBytes(1000)).toBe("1000");
    expect(formatBytes(1e9)).toBe("1000000000");
    expect(formatBytes(0)).toBe("0");
  });

  it("reads back what it writes, for millicores and bytes", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), (m) => milliCpu(formatMilliCpu(m)) === m),
      { numRuns: 1_000 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (b) => bytesOf(formatBytes(b)) === b),
      { numRuns: 1_000 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 22 }), fc.constantFrom(1, 2 ** 10, Mi, Gi), (n, unit) => {
        return bytesOf(formatBytes(n * unit)) === n * unit;
      }),
      { numRuns: 1_000 },
    );
  });
});

describe("the Size split", () => {
  // Its CPU a request alone (decision 0056): its start is not throttled; the pod's limit bounds it.
  const custodianOf = (cpu: string, memory: string) => ({ requests: { cpu, memory }, limits: { memory } });
  const custodian = custodianOf("100m", "192Mi");

  it("gives the Custodian its fixed slice alone when the request states no Size", () => {
    expect(CUSTODIAN_SLICE).toEqual({ cpu: "100m", memory: "192Mi" });
    expect(splitSize(undefined)).toEqual({ custodian });
  });

  it("takes the Custodian's slice from the pod config when given one", () => {
    const split = splitSize({ cpu: "1", memory: "1Gi" }, undefined, { cpu: "250m", memory: "256Mi" });
    expect(split.custodian).toEqual(custodianOf("250m", "256Mi"));
    expect(split.harness).toEqual(equalTo({ cpu: "750m", memory: "768Mi" }));
  });

  it("with cpu only, bounds the pod's and the Harness's CPU and nothing else", () => {
    expect(splitSize({ cpu: "2" })).toEqual({
      custodian,
      pod: equalTo({ cpu: "2" }),
      harness: equalTo({ cpu: "1900m" }),
    });
  });

  it("with memory only, bounds the pod's and the Harness's memory and sizes /dev/shm", () => {
    expect(splitSize({ memory: "4Gi" })).toEqual({
      custodian,
      pod: equalTo({ memory: "4Gi" }),
      harness: equalTo({ memory: "3904Mi" }),
      shmSize: "976Mi",
    });
  });

  it("with disk only, requests the Harness's ephemeral storage with no limit and no pod-level bound", () => {
    const split = splitSize({ disk: "20Gi" });
    expect(split).toEqual({ custodian, harness: { requests: { "ephemeral-storage": "20Gi" }, limits: {} } });
    expect(split.pod).toBeUndefined();
    expect(split.shmSize).toBeUndefined();
  });

  it("adds the disk request beside the Harness's equal cpu and memory, and never to its limits", () => {
    const split = splitSize({ cpu: "2", memory: "4Gi", disk: "20G" });
    expect(bytesOf(split.harness!.requests["ephemeral-storage"]!)).toBe(20e9);
    expect(split.harness).toEqual({
      requests: { cpu: "1900m", memory: "3904Mi", "ephemeral-storage": "19531250Ki" },
      limits: { cpu: "1900m", memory: "3904Mi" },
    });
    expect(split.pod).toEqual(equalTo({ cpu: "2", memory: "4Gi" }));
  });

  it("gives the User Container its share and the Harness the rest", () => {
    expect(splitSize({ cpu: "2", memory: "4Gi", disk: "20Gi" }, { cpu: "500m", memory: "1Gi" })).toEqual({
      custodian,
      pod: equalTo({ cpu: "2", memory: "4Gi" }),
      harness: {
        requests: { cpu: "1400m", memory: "2880Mi", "ephemeral-storage": "20Gi" },
        limits: { cpu: "1400m", memory: "2880Mi" },
      },
      user: equalTo({ cpu: "500m", memory: "1Gi" }),
      shmSize: "720Mi",
    });
  });

  it("gives the User Container only what its Size names", () => {
    const split = splitSize({ cpu: "2", memory: "4Gi" }, { memory: "1Gi" });
    expect(split.user).toEqual(equalTo({ memory: "1Gi" }));
    expect(split.harness).toEqual(equalTo({ cpu: "1900m", memory: "2880Mi" }));
  });

  it("writes the pod's Size in canonical units", () => {
    expect(splitSize({ cpu: "1.5", memory: "1.5Gi" }).pod).toEqual(equalTo({ cpu: "1500m", memory: "1536Mi" }));
    expect(splitSize({ cpu: "2000m", memory: "4096Mi" }).pod).toEqual(equalTo({ cpu: "2", memory: "4Gi" }));
  });

  describe("/dev/shm", () => {
    it("is a quarter of the Harness's memory", () => {
      expect(splitSize({ memory: "1216Mi" }).shmSize).toBe("256Mi"); // Harness 1Gi
      expect(splitSize({ memory: "8Gi" }, { memory: "2Gi" }).shmSize).toBe("1488Mi"); // Harness 5952Mi
    });

    it("is rounded down to whole Mi", () => {
      // A Harness of 1001Mi: a quarter is 250.25Mi.
      expect(splitSize({ memory: `${1001 + 192}Mi` }).shmSize).toBe("250Mi");
    });

    it("is at least 64Mi", () => {
      expect(splitSize({ memory: "320Mi" }).shmSize).toBe("64Mi"); // Harness 128Mi: a quarter is 32Mi
      expect(splitSize({ memory: `${192 + 256}Mi` }).shmSize).toBe("64Mi"); // exactly a quarter
      expect(splitSize({ memory: `${192 + 260}Mi` }).shmSize).toBe("65Mi");
    });

    it("is absent when the Size names no memory", () => {
      expect(splitSize({ cpu: "2", disk: "10Gi" }).shmSize).toBeUndefined();
    });
  });

  describe("refusals", () => {
    it("refuses a cpu that leaves the Harness under its floor, naming size.cpu and a raise that is accepted", () => {
      const message = refusal({ cpu: "150m" });
      expect(message).toContain("size.cpu 150m");
      expect(message).toContain("leaves the Harness 50m after the Custodian's 100m");
      expect(message).toContain("at least 100m");
      expect(proposed(message, "cpu")).toBe("200m");
      expect(splitSize({ cpu: proposed(message, "cpu") }).harness).toEqual(equalTo({ cpu: "100m" }));
    });

    it("refuses a memory that leaves the Harness under its floor, naming size.memory and a raise that is accepted", () => {
      const message = refusal({ memory: "256Mi" });
      expect(message).toContain("size.memory 256Mi");
      expect(message).toContain("leaves the Harness 64Mi after the Custodian's 192Mi");
      expect(message).toContain("at least 128Mi");
      expect(proposed(message, "memory")).toBe("320Mi");
      expect(splitSize({ memory: proposed(message, "memory") }).harness).toEqual(equalTo({ memory: "128Mi" }));
    });

    it("counts the User Container's share in the refusal and in the raise", () => {
      const cpu = refusal({ cpu: "1", memory: "4Gi" }, { cpu: "900m" });
      expect(cpu).toContain("size.cpu 1 leaves the Harness 0 after the Custodian's 100m and the User Container's 900m");
      expect(proposed(cpu, "cpu")).toBe("1100m");
      expect(splitSize({ cpu: "1100m", memory: "4Gi" }, { cpu: "900m" }).harness?.limits.cpu).toBe("100m");

      const memory = refusal({ memory: "1Gi" }, { memory: "1Gi" });
      expect(memory).toContain(
        "size.memory 1Gi leaves the Harness 0 after the Custodian's 192Mi and the User Container's 1Gi",
      );
      expect(proposed(memory, "memory")).toBe("1344Mi");
      expect(splitSize({ memory: proposed(memory, "memory") }, { memory: "1Gi" }).harness?.limits.memory).toBe("128Mi");
    });

    it("accepts a Harness share of exactly its floor", () => {
      expect(splitSize({ cpu: "200m", memory: "320Mi" }).harness).toEqual(equalTo({ cpu: "100m", memory: "128Mi" }));
      expect(() => splitSize({ cpu: "199m" })).toThrow(SizeError);
      expect(() => splitSize({ memory: `${320 * Mi - 1}` })).toThrow(SizeError);
    });

    it("checks the floor against the pod config's Custodian slice", () => {
      const message = refusal({ cpu: "500m" }, undefined, { cpu: "450m", memory: "192Mi" });
      expect(message).toContain("after the Custodian's 450m");
      expect(proposed(message, "cpu")).toBe("550m");
    });

    it("refuses a userSize without a size", () => {
      expect(refusal(undefined, { cpu: "1" })).toMatch(/^userSize needs size/);
    });

    it("refuses a userSize.cpu without a size.cpu", () => {
      expect(refusal({ memory: "4Gi" }, { cpu: "1" })).toMatch(/^userSize\.cpu needs size\.cpu/);
      expect(refusal({ disk: "10Gi" }, { cpu: "1" })).toMatch(/^userSize\.cpu needs size\.cpu/);
    });

    it("refuses a userSize.memory without a size.memory", () => {
      expect(refusal({ cpu: "2" }, { memory: "1Gi" })).toMatch(/^userSize\.memory needs size\.memory/);
    });

    it("is a SizeError, an Error", () => {
      expect(new SizeError("x")).toBeInstanceOf(Error);
    });
  });

  describe("property", () => {
    /** Millicores spelled as `<n>m`, whole cores, or decimal cores. */
    const cpuText = (m: number) =>
      fc.constantFrom(
        `${m}m`,
        ...(m % 1000 === 0 ? [String(m / 1000)] : []),
        ...(m % 100 === 0 ? [(m / 1000).toFixed(1)] : []),
        (m / 1000).toFixed(3),
      );
    /** Whole Mi spelled in Mi, in Gi when whole, in Ki, or in plain bytes. */
    const memText = (mi: number) =>
      fc.constantFrom(`${mi}Mi`, `${mi * 1024}Ki`, String(mi * Mi), ...(mi % 512 === 0 ? [`${mi / 1024}Gi`] : []));
    const cpuArb = fc.integer({ min: 1, max: 16_000 }).chain((m) => cpuText(m).map((text) => ({ m, text })));
    const memArb = fc.integer({ min: 1, max: 64 * 1024 }).chain((mi) => memText(mi).map((text) => ({ mi, text })));
    const sliceArb = fc.oneof(
      fc.constant({ cpu: { m: 100, text: "100m" }, mem: { mi: 192, text: "192Mi" } }),
      fc.record({
        cpu: fc.integer({ min: 1, max: 2_000 }).chain((m) => cpuText(m).map((text) => ({ m, text }))),
        mem: fc.integer({ min: 64, max: 2_048 }).chain((mi) => memText(mi).map((text) => ({ mi, text }))),
      }),
    );
    const input = fc.record({
      cpu: fc.option(cpuArb, { nil: undefined }),
      mem: fc.option(memArb, { nil: undefined }),
      disk: fc.option(fc.integer({ min: 1, max: 1024 }), { nil: undefined }),
      userCpu: fc.option(cpuArb, { nil: undefined }),
      userMem: fc.option(memArb, { nil: undefined }),
      slice: sliceArb,
    });

    it("splits the pod's cpu and memory exactly, requests equal to limits, or refuses exactly below the floor", () => {
      fc.assert(
        fc.property(input, ({ cpu, mem, disk, userCpu, userMem, slice }) => {
          const size: Size = {
            ...(cpu ? { cpu: cpu.text } : {}),
            ...(mem ? { memory: mem.text } : {}),
            ...(disk ? { disk: `${disk}Gi` } : {}),
          };
          // The schema refuses an empty Size; a userSize only names what size bounds.
          fc.pre(cpu !== undefined || mem !== undefined || disk !== undefined);
          const user: Size | undefined =
            (cpu && userCpu) || (mem && userMem)
              ? {
                  ...(cpu && userCpu ? { cpu: userCpu.text } : {}),
                  ...(mem && userMem ? { memory: userMem.text } : {}),
                }
              : undefined;
          const sliceText = { cpu: slice.cpu.text, memory: slice.mem.text };

          const cpuLeft = cpu ? cpu.m - slice.cpu.m - (user?.cpu ? userCpu!.m : 0) : undefined;
          const memLeft = mem ? (mem.mi - slice.mem.mi - (user?.memory ? userMem!.mi : 0)) * Mi : undefined;
          const cpuShort = cpuLeft !== undefined && cpuLeft < HARNESS_FLOOR.cpu;
          const memShort = memLeft !== undefined && memLeft < HARNESS_FLOOR.memory;

          if (cpuShort || memShort) {
            const message = refusal(size, user, sliceText);
            // CPU is checked first; each refusal names its field and a raise that clears the floor.
            const field = cpuShort ? "cpu" : "memory";
            expect(message).toMatch(new RegExp(`^size\\.${field} `));
            const raised: Size = { ...size, [field]: proposed(message, field) };
            if (field === "cpu") expect(milliCpu(raised.cpu!)).toBe(cpu!.m - cpuLeft! + HARNESS_FLOOR.cpu);
            else expect(bytesOf(raised.memory!)).toBe(mem!.mi * Mi - memLeft! + HARNESS_FLOOR.memory);
            // Applied, the raise clears this field's refusal (the other field may still be short).
            let after = "";
            try {
              splitSize(raised, user, sliceText);
            } catch (err) {
              after = (err as Error).message;
            }
            expect(after.startsWith(`size.${field} `)).toBe(false);
            if (field === "cpu" && !memShort) expect(after).toBe("");
            return;
          }

          const split = splitSize(size, user, sliceText);
          expect(split.custodian.limits.cpu).toBeUndefined();
          expect(split.custodian.limits.memory).toBe(split.custodian.requests.memory);
          for (const r of [split.pod, split.harness, split.user]) {
            if (!r) continue;
            expect(r.limits.cpu).toBe(r.requests.cpu);
            expect(r.limits.memory).toBe(r.requests.memory);
            expect(r.limits["ephemeral-storage"]).toBeUndefined();
          }
          const parts = [split.custodian, split.user, split.harness];
          const sum = (read: (r: Resources) => number | undefined) =>
            parts.reduce((total, r) => total + (r ? (read(r) ?? 0) : 0), 0);

          if (cpu) {
            expect(milliCpu(split.pod!.limits.cpu!)).toBe(cpu.m);
            // The requests sum to the pod; the Custodian's CPU has no limit of its own.
            expect(sum((r) => milliCpu(r.requests.cpu ?? "0"))).toBe(cpu.m);
            expect(milliCpu(split.harness!.limits.cpu!)).toBe(cpuLeft);
          } else {
            expect(split.pod?.limits.cpu).toBeUndefined();
            expect(split.harness?.limits.cpu).toBeUndefined();
          }
          if (mem) {
            expect(bytesOf(split.pod!.limits.memory!)).toBe(mem.mi * Mi);
            expect(sum((r) => bytesOf(r.limits.memory ?? "0"))).toBe(mem.mi * Mi);
            expect(bytesOf(split.harness!.limits.memory!)).toBe(memLeft);
            const shm = bytesOf(split.shmSize!)!;
            expect(shm).toBe(Math.max(64 * Mi, Math.floor(memLeft! / 4 / Mi) * Mi));
          } else {
            expect(split.pod?.limits.memory).toBeUndefined();
            expect(split.shmSize).toBeUndefined();
          }
          if (disk) expect(split.harness!.requests["ephemeral-storage"]).toBe(formatBytes(disk * Gi));
          else expect(split.harness?.requests["ephemeral-storage"]).toBeUndefined();
          if (!user) expect(split.user).toBeUndefined();
        }),
        { numRuns: 2_000 },
      );
    });
  });
});

describe("decimal suffixes read exactly (no float noise under the ceiling)", () => {
  it("reads 8.3G, 1.07G and 2.007k as Kubernetes does, and splits them to the byte", () => {
    expect(bytesOf("8.3G")).toBe(8_300_000_000);
    expect(bytesOf("1.07G")).toBe(1_070_000_000);
    expect(bytesOf("2.007k")).toBe(2007);
    expect(splitSize({ memory: "8.3G" }).pod?.limits.memory).toBe("8300000000");
  });
  it("rounds a CPU finer than a millicore up to one", () => {
    expect(milliCpu("0.0000001")).toBe(1);
    expect(milliCpu("0.0015")).toBe(2);
  });
});
