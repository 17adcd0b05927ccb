import { parseGoDuration } from "../../capabilities/shared/duration";

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
