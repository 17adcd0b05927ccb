// A call whose connection closed under it is sent again, at most CLOSED_ATTEMPTS in all; any other
// failure, and an answer, are the caller's at once (lib/closed-under.ts).
import { CLOSED_ATTEMPTS, againIfClosed, closedUnder } from "../../lib/closed-under";

const failure = (code: string) =>
  Object.assign(new Error(code === "UND_ERR_SOCKET" ? "other side closed" : code), { code });

describe("againIfClosed", () => {
  it("sends again a call whose connection closed under it, and gives its answer", async () => {
    const codes = ["UND_ERR_SOCKET", "ECONNRESET"];
    let calls = 0;
    await expect(
      againIfClosed(async () => {
        calls++;
        const code = codes.shift();
        if (code) throw failure(code);
        return "created";
      }),
    ).resolves.toBe("created");
    expect(calls).toBe(3);
  });

  it(`gives up after ${CLOSED_ATTEMPTS} attempts, with the last failure`, async () => {
    let calls = 0;
    const closing = () => {
      calls++;
      return Promise.reject(failure("EPIPE"));
    };
    await expect(againIfClosed(closing)).rejects.toMatchObject({ code: "EPIPE" });
    expect(calls).toBe(CLOSED_ATTEMPTS);
  });

  it("never sends again a call that failed otherwise: a refusal, an answer, a timeout", async () => {
    for (const err of [failure("ECONNREFUSED"), failure("UND_ERR_HEADERS_TIMEOUT"), new Error("409 AlreadyExists")]) {
      let calls = 0;
      await expect(
        againIfClosed(() => {
          calls++;
          return Promise.reject(err);
        }),
      ).rejects.toBe(err);
      expect(calls).toBe(1);
    }
  });

  it("tells a closed connection by its code alone", () => {
    expect(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"].map((c) => closedUnder(failure(c)))).toEqual([true, true, true]);
    expect([failure("ECONNREFUSED"), undefined, "text", {}].map(closedUnder)).toEqual([false, false, false, false]);
  });
});
