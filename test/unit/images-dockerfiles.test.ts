// The Dockerfiles document the images `npm run images` builds with no engine (decision 0041): each
// states the same user, working directory, entrypoint and command, ports, Debian packages, run user,
// owned directories and copied files as scripts/images/spec.ts, which the build follows. And the
// names `npm run build` writes into the manifests are the names `npm run images` gives the images.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import cfg from "../../package.json";
import { aptInstalls, dockerfileFacts, instructions } from "../../scripts/images/dockerfile";
import { SUITE } from "../../scripts/images/debian";
import {
  APP_COPY,
  BASE_PACKAGES,
  CONFINE_PATH,
  DOCKERFILE,
  IMAGES,
  IMAGE_ENV,
  NODE_RUNTIME,
  RUN_CONFIG,
  RUN_USER,
  RUN_USER_DIRS,
  imageRef,
} from "../../scripts/images/spec";

const ROOT = join(__dirname, "..", "..");
const facts = (name: (typeof IMAGES)[number]) => dockerfileFacts(readFileSync(join(ROOT, DOCKERFILE[name]), "utf8"));

describe.each(IMAGES)("the %s Dockerfile", (name) => {
  const f = facts(name);
  const run = RUN_CONFIG[name];

  test("runs as the image does: user, working directory, entrypoint, command, ports", () => {
    expect(f.user).toBe(run.User);
    expect(f.workdir).toBe(run.WorkingDir);
    // An empty ENTRYPOINT clears the base image's, as the built image has none.
    expect(f.entrypoint?.length ? f.entrypoint : undefined).toEqual(run.Entrypoint);
    expect(f.cmd).toEqual(run.Cmd);
    expect(f.expose.sort()).toEqual(Object.keys(run.ExposedPorts ?? {}).sort());
    // Nothing the built image does not set: its Env is PATH alone, which the node base sets alike.
    expect(f.env).toEqual({});
  });

  test("starts from the Node major the images carry, and installs the base's Debian packages", () => {
    // The same Debian release as the built images' base (scripts/images/debian.ts SUITE).
    expect(f.from).toBe(`node:${NODE_RUNTIME.version.split(".")[0]}-${SUITE}-slim`);
    expect([...f.aptPackages].sort()).toEqual([...BASE_PACKAGES].sort());
  });

  test("removes the package managers the node base carries, as the built image has none", () => {
    const removed = f.runs.join(" ");
    for (const p of [
      "/var/lib/apt/lists/*",
      "/usr/local/lib/node_modules",
      "/usr/local/bin/npm",
      "/usr/local/bin/npx",
      "/usr/local/bin/corepack",
      "/opt/yarn-*",
    ])
      expect(removed).toContain(p);
  });

  test("adds the run user with the base's uid, gid and home, and gives it the same directories", () => {
    const run = f.runs.join(" && ");
    expect(run).toContain(`groupadd -g ${RUN_USER.gid} ${RUN_USER.name}`);
    expect(run).toContain(
      `useradd -u ${RUN_USER.uid} -g ${RUN_USER.gid} -d ${RUN_USER.home} -m -s ${RUN_USER.shell} ${RUN_USER.name}`,
    );
    const chowned = [...run.matchAll(/chown (\d+):(\d+) ([^&;]+)/g)].flatMap((m) => {
      expect([Number(m[1]), Number(m[2])]).toEqual([RUN_USER.uid, RUN_USER.gid]);
      return m[3].trim().split(/\s+/);
    });
    expect(chowned.sort()).toEqual([...RUN_USER_DIRS[name]].sort());
  });

  test("copies what the build adds, from where the build takes it", () => {
    // The companions also carry jr2-confine, from the build stage that compiles it (decision 0070).
    const confine =
      name === "companions" ? [{ from: ["/jr2-confine"], to: CONFINE_PATH, options: ["--from=confine"] }] : [];
    expect(f.copies).toEqual([...confine, { from: [APP_COPY[name].from], to: APP_COPY[name].to, options: [] }]);
  });
});

test("the companions Dockerfile builds jr2-confine as scripts/confine-binary.sh does, with the module's Go", () => {
  const text = readFileSync(join(ROOT, DOCKERFILE.companions), "utf8");
  const stage = instructions(text.slice(0, text.search(/^FROM node:/m)));
  expect(stage[0]).toEqual({
    op: "FROM",
    args: expect.stringMatching(new RegExp(`^golang:[0-9.]+-${SUITE} AS confine$`)),
  });
  const goMod = readFileSync(join(ROOT, "effector", "confine", "go.mod"), "utf8");
  const goVersion = /^go (\d+\.\d+)/m.exec(goMod)![1];
  expect(stage[0].args).toBe(`golang:${goVersion}-${SUITE} AS confine`);
  expect(stage).toContainEqual({ op: "COPY", args: "effector/confine/ ./" });
  // The same flags, so the same sources give the same bytes in either build.
  const script = readFileSync(join(ROOT, "scripts", "confine-binary.sh"), "utf8");
  const build = /CGO_ENABLED=0 GOWORK=off go build ([^)]*) -o "\$tmp" \./.exec(script);
  expect(build).not.toBeNull();
  expect(stage).toContainEqual({ op: "RUN", args: `CGO_ENABLED=0 GOWORK=off go build ${build![1]} -o /jr2-confine .` });
  // The build context holds the module.
  expect(readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n")).toContain("!effector/confine/");
});

test("the reader knows continuations, comments, exec forms and what an ENTRYPOINT clears", () => {
  const text = [
    "# a comment",
    "FROM base AS build",
    "USER 1",
    "FROM node:24 AS final",
    "RUN apt-get update \\",
    "  # inside a continuation",
    " && apt-get install -y --no-install-recommends a b \\",
    " && rm -rf x",
    'CMD ["x"]',
    'ENTRYPOINT ["/bin/e"]',
    'ENV A=1 B="two words"',
    "EXPOSE 80 53/udp",
  ].join("\n");
  expect(instructions(text).map((i) => i.op)).toEqual([
    "FROM",
    "USER",
    "FROM",
    "RUN",
    "CMD",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
  ]);
  const f = dockerfileFacts(text);
  expect(f).toMatchObject({ from: "node:24", entrypoint: ["/bin/e"], cmd: undefined, env: { A: "1", B: "two words" } });
  expect(f.user).toBeUndefined();
  expect(f.expose).toEqual(["80/tcp", "53/udp"]);
  expect(f.aptPackages).toEqual(["a", "b"]);
  expect(aptInstalls("apt-get update; apt install -y c")).toEqual(["c"]);
  expect(() => dockerfileFacts("FROM x\nCMD node app.js")).toThrow(/exec \(JSON\) form/);
});

test("`npm run build` names the controller image as `npm run images` does, from the same variable", () => {
  const script = cfg.scripts.build;
  const m = /--custom-image "([^"]+)"/.exec(script);
  expect(m).not.toBeNull();
  // The script's own shell expansion, with and without the variable.
  const expand = (env: Record<string, string>) =>
    execFileSync("sh", ["-c", `printf %s "${m![1]}"`], { encoding: "utf8", env: { PATH: process.env.PATH, ...env } });
  expect(expand({ npm_package_version: cfg.version })).toBe(imageRef("controller", { env: {} }));
  expect(expand({ npm_package_version: cfg.version, [IMAGE_ENV.controller]: "127.0.0.1:5000/jr2/controller:9" })).toBe(
    imageRef("controller", { env: { [IMAGE_ENV.controller]: "127.0.0.1:5000/jr2/controller:9" } }),
  );
});

test("post-build names the companions image as `npm run images` does, from the same variable", () => {
  const source = readFileSync(join(ROOT, "scripts", "post-build.ts"), "utf8");
  expect(source).toContain(`process.env.${IMAGE_ENV.companions} || \`jr2/companions:\${cfg.version}\``);
  expect(imageRef("companions", { env: {} })).toBe(`jr2/companions:${cfg.version}`);
  expect(imageRef("companions", { env: {}, registry: "127.0.0.1:5000" })).toBe(
    `127.0.0.1:5000/jr2/companions:${cfg.version}`,
  );
  expect(imageRef("sandbox", { env: { [IMAGE_ENV.sandbox]: "r/x:1" }, registry: "127.0.0.1:5000" })).toBe("r/x:1");
});
