// The latest copy of each watched object, by key. Pepr runs one watch per binding, so an object's
// update and its deletion can arrive on different watches, out of order: a copy older than the one
// held is dropped (resourceVersions compared as etcd revisions), and a deleted uid stays deleted.
type Obj = { metadata?: { uid?: string; resourceVersion?: string } };

const TOMBSTONES = 50_000;

export class ObjectCache<T extends Obj> {
  readonly #items = new Map<string, T>();
  readonly #deleted = new Set<string>();

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  /** Every object held. */
  values(): IterableIterator<T> {
    return this.#items.values();
  }

  /** Stores the object unless it is older than the copy held or was deleted; says whether it did.
   * managedFields are dropped: nothing here reads them, and they are a third of a pod's size. */
  set(key: string, obj: T): boolean {
    const meta = obj.metadata as { managedFields?: unknown } | undefined;
    if (meta?.managedFields) delete meta.managedFields;
    const uid = obj.metadata?.uid;
    if (uid && this.#deleted.has(uid)) return false;
    const held = this.#items.get(key);
    if (held && held.metadata?.uid === uid && olderThan(obj, held)) return false;
    this.#items.set(key, obj);
    return true;
  }

  /** Forgets the object if the copy held is this one (by uid), and remembers the uid as deleted. */
  delete(key: string, obj?: T): void {
    const uid = obj?.metadata?.uid;
    if (uid) {
      this.#deleted.add(uid);
      if (this.#deleted.size > TOMBSTONES) this.#deleted.delete(this.#deleted.values().next().value!);
    }
    const held = this.#items.get(key);
    if (!uid || held?.metadata?.uid === uid) this.#items.delete(key);
  }
}

function olderThan(a: Obj, b: Obj): boolean {
  const ra = a.metadata?.resourceVersion;
  const rb = b.metadata?.resourceVersion;
  if (!ra || !rb || !/^\d+$/.test(ra) || !/^\d+$/.test(rb)) return false;
  return BigInt(ra) < BigInt(rb);
}
