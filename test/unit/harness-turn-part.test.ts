// The Turn part (harness/agents/turn-part.ts): what a turn tells the model of its Allowed picks,
// first and restated after they changed mid-turn (decision 0025). Only fixed text and
// Menu names: a name the Machine allows that the Menu lacks is never said.
import { allowedInMenu, restatedTurnPart, sameAllowed, turnPart } from "../../harness/agents/turn-part";

const MENU = [
  { name: "propose", description: "Propose the change." },
  { name: "abandon", description: "Give up." },
];

describe("the Turn part", () => {
  it("names the allowed picks in the Menu's order, and nothing outside the Menu", () => {
    expect(allowedInMenu(MENU, ["abandon", "not-a-tool", "propose"])).toEqual(["propose", "abandon"]);
    expect(turnPart(MENU, ["abandon", "<script>"])).toBe(
      "The picks allowed in this turn: `abandon`. The other Menu tools are not allowed now.",
    );
  });

  it("says when no pick is allowed, and says nothing for a conversation with no Menu", () => {
    expect(turnPart(MENU, [])).toBe(
      "No pick is allowed in this turn now: do not call a Menu tool until you are told it is allowed.",
    );
    expect(turnPart([], ["propose"])).toBeUndefined();
  });

  it("restates the new list after a change", () => {
    expect(restatedTurnPart(MENU, ["propose", "abandon"])).toBe(
      "The allowed picks changed while you worked. The picks allowed in this turn: `propose`, `abandon`. " +
        "The other Menu tools are not allowed now.",
    );
  });

  it("compares lists as sets", () => {
    expect(sameAllowed(["a", "b"], ["b", "a", "a"])).toBe(true);
    expect(sameAllowed(["a"], ["a", "b"])).toBe(false);
    expect(sameAllowed([], [])).toBe(true);
  });
});
