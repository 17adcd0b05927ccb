// An Effect's secrets by reference (decision 0070): `{secret, key}` is the file the pod mounts at
// effectSecretPath; its value is read here, when the Effect runs, and goes nowhere else: not a
// log line, not the answer.
import { readFileSync } from "node:fs";
import { effectSecretPath, SecretRef } from "../api/effects";

export class SecretUnreadable extends Error {}

/** The value, one trailing newline trimmed (a Secret written with `echo` has one). */
export function readSecret(secretsDir: string, ref: unknown): string {
  const parsed = SecretRef.safeParse(ref);
  if (!parsed.success || parsed.data.key === "." || parsed.data.key === "..")
    throw new SecretUnreadable("a secret reference must be {secret, key}: a Secret's name and one of its keys");
  const file = effectSecretPath(secretsDir, parsed.data);
  try {
    return readFileSync(file, "utf8").replace(/\r?\n$/, "");
  } catch (err) {
    throw new SecretUnreadable(
      `secret ${parsed.data.secret} key ${parsed.data.key} is not mounted (${(err as NodeJS.ErrnoException).code}): ` +
        "name it in the workspace's effector secrets",
    );
  }
}

export const isSecretRef = (v: unknown): v is SecretRef => typeof v === "object" && v !== null;
