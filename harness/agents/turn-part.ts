// The Turn part (decision 0025): what a turn tells the model of its Allowed
// picks, pure. The first time it follows the turn's message; when something other than the Agent's
// own pick changes them (a Gate's answer, an outside event), the Harness reads the new list at a
// step boundary (decision 0025) and appends it restated. Only fixed text and Menu names are ever said:
// nothing the Machine writes reaches the model by this path.
import type { MenuTool } from "../../api/agent-protocol";

/** The Allowed picks that are in the Menu, in the Menu's order (a name outside it is no tool). */
export function allowedInMenu(menu: MenuTool[], allowed: readonly string[]): string[] {
  const set = new Set(allowed);
  return menu.map((m) => m.name).filter((n) => set.has(n));
}

/** The same set of picks, whatever the order or repeats. */
export function sameAllowed(a: readonly string[], b: readonly string[]): boolean {
  const x = new Set(a);
  const y = new Set(b);
  return x.size === y.size && [...x].every((n) => y.has(n));
}

const list = (names: string[]) => names.map((n) => `\`${n}\``).join(", ");

/** The Turn part: the Allowed picks now; undefined when the conversation has no Menu. */
export function turnPart(menu: MenuTool[], allowed: readonly string[]): string | undefined {
  if (menu.length === 0) return undefined;
  const names = allowedInMenu(menu, allowed);
  return names.length > 0
    ? `The picks allowed in this turn: ${list(names)}. The other Menu tools are not allowed now.`
    : "No pick is allowed in this turn now: do not call a Menu tool until you are told it is allowed.";
}

/** The Turn part restated after the Allowed picks changed mid-turn. */
export function restatedTurnPart(menu: MenuTool[], allowed: readonly string[]): string {
  return `The allowed picks changed while you worked. ${turnPart(menu, allowed) ?? ""}`.trimEnd();
}
