// jest's resolver, with one addition: pi's packages (@earendil-works/pi-*, decision 0024) export
// only an `import` entry, which jest's CommonJS resolution never picks, so they and their subpaths
// (`pi-ai/api/<api>`) are resolved with the `import` condition too. Resolved from the file that
// asks, as Node does: pi-ai's own copy of pi-schema (1.6.1, under pi-ai) for pi-ai, the top-level one
// (1.6.0) for pi-agent-core, which no mapping of a name to one path could tell apart. jest.config.js
// transforms what this finds (its `esm` list).
const PI = /^@earendil-works\/pi-[^/]+(\/|$)/;

module.exports = (path, options) =>
  options.defaultResolver(
    path,
    PI.test(path)
      ? { ...options, conditions: [...(options.conditions ?? ["require", "node", "default"]), "import"] }
      : options,
  );
