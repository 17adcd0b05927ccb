// Shapes shared by the Sandbox and Repo schemas.
import { z } from "zod";

/** The API group and version of every jr2 kind (the wire contract kept from jr2, docs/decisions/0001). */
export const GROUP = "core.jr2.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;

export { GO_DURATION, goDurationMs } from "../../go-duration";
import { GO_DURATION } from "../../go-duration";

export const goDuration = (what: string) =>
  z.string().regex(GO_DURATION, { message: `${what} must be a Go duration such as "30m" or "1h30m"` });

/** metav1.Condition: the standard Kubernetes condition shape. */
export const Condition = z
  .strictObject({
    type: z.string().min(1).meta({ description: "The condition's type, in CamelCase (e.g. Ready)." }),
    status: z.enum(["True", "False", "Unknown"]).meta({ description: "True, False or Unknown." }),
    observedGeneration: z
      .number()
      .int()
      .optional()
      .meta({ format: "int64", description: "The .metadata.generation this condition was set for." }),
    lastTransitionTime: z
      .string()
      .meta({ format: "date-time", description: "When the condition last changed status (RFC 3339)." }),
    reason: z.string().meta({ description: "A CamelCase word for why the condition is in this status." }),
    message: z.string().meta({ description: "A human-readable explanation; may be empty." }),
  })
  .meta({ description: "One aspect of the object's state, in the standard Kubernetes condition shape." });
export type Condition = z.infer<typeof Condition>;

/** A reference to a Secret in the object's own namespace. */
export const SecretName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: "must be a Secret name: lower-case letters, digits, '-' and '.'",
  });
