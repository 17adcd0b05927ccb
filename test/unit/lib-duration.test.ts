import { envDuration, parseGoDuration } from "../../lib/duration";

describe("parseGoDuration", () => {
  it.each([
    ["30m", 30 * 60_000],
    ["1h30m", 90 * 60_000],
    ["1.5h", 90 * 60_000],
    ["90s", 90_000],
    ["500ms", 500],
  ])("reads %s as %d ms", (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms);
  });

  it.each(["", "5", "1d", "m"])("rejects %j as not a Go duration", (text) => {
    expect(parseGoDuration(text)).toBeUndefined();
  });
});

describe("envDuration", () => {
  it("reads a Go duration, or falls back when the variable is unset or empty", () => {
    expect(envDuration("X", 7, { X: "90s" })).toBe(90_000);
    expect(envDuration("X", 7, {})).toBe(7);
    expect(envDuration("X", 7, { X: "" })).toBe(7);
  });
  it("refuses what is not a positive Go duration, naming the variable and a good value", () => {
    expect(() => envDuration("JR2_LEASE_INTERVAL", 7, { JR2_LEASE_INTERVAL: "5 minutes" })).toThrow(
      'JR2_LEASE_INTERVAL="5 minutes" is not a positive Go duration (say 90s, 5m or 1h)',
    );
    expect(() => envDuration("X", 7, { X: "0s" })).toThrow(/not a positive Go duration/);
  });
});
