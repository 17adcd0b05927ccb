// A value made on first use and kept. The companions load what an idle process never uses this
// way (docs/decisions/0044-the-custodian-starts-small.md): a module required inside `make` is
// bundled as usual, but evaluated only when first asked for.
export function once<T>(make: () => T): () => T {
  let made = false;
  let value: T;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value;
  };
}
