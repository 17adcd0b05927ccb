// jest's resolver for pi (decisions 0024, 0054): pi's packages export only an `import` entry, which
// jest's CommonJS resolution (conditions require/node/default) never picks, so their specifiers,
// subpaths included, resolve with `import`; swc then transforms the file (jest.config.js `esm`).
module.exports = (request, options) =>
  request.startsWith("@earendil-works/")
    ? options.defaultResolver(request, { ...options, conditions: ["import", "node", "default"] })
    : options.defaultResolver(request, options);
