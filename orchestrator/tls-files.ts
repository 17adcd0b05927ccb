// The API's TLS certificate and key (JR2_TLS_CERT_FILE, JR2_TLS_KEY_FILE), read again when either
// changes, as the API tokens file is (api-tokens-file.ts; docs/decisions/0058-operating-it.md): a
// renewed kubernetes.io/tls Secret is served to the next connection without a restart. A pair Node
// would not serve (unreadable, not PEM, a key that is not the certificate's) keeps the pair in use,
// logged once per content; the key's text is never logged.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import type { Log } from "../lib/log";
import { Polled } from "../lib/polled";
import { API_TOKENS_POLL_MS } from "./api-tokens-file";

export type TlsPair = { cert: string; key: string };

/** The pure part: why `pair` would not be served (not a PEM certificate, not its key, ended), in
 * Node's words, which never carry the key's text; undefined when it would. */
export function tlsPairProblem(pair: TlsPair, now = Date.now()): string | undefined {
  try {
    // An empty certificate is no error to createSecureContext: it would serve a key alone.
    const cert = new X509Certificate(pair.cert);
    if (!cert.checkPrivateKey(createPrivateKey(pair.key))) return "the key is not the certificate's";
    if (Date.parse(cert.validTo) <= now) return `the certificate ended at ${new Date(cert.validTo).toISOString()}`;
    createSecureContext(pair);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

export type TlsFilesOptions = {
  certFile: string;
  keyFile: string;
  /** The pair read at start (main.ts): what is served until the files change. */
  initial: TlsPair;
  /** Serves a new pair (the server's setSecureContext). */
  serve: (pair: TlsPair) => void;
  log: Log;
  onRead?: (outcome: "ok" | "refused") => void;
  pollMs?: number;
};

/** Polls the pair every `pollMs`; `close` stops it. */
export class TlsFiles {
  readonly #polled: Polled<{ pair: TlsPair; why?: string }>;

  constructor(private readonly opts: TlsFilesOptions) {
    this.#polled = new Polled({
      read: () => this.#readPair(),
      bytes: ({ pair }) => [pair.cert, pair.key],
      changed: (read) => this.#changed(read),
      initial: { pair: opts.initial },
      pollMs: opts.pollMs ?? API_TOKENS_POLL_MS,
    });
  }

  /** One comparison of the files with what was served last; a poll under way is joined. */
  poll(): Promise<void> {
    return this.#polled.poll();
  }

  close(): void {
    this.#polled.close();
  }

  async #readPair(): Promise<{ pair: TlsPair; why?: string } | undefined> {
    const { certFile, keyFile } = this.opts;
    try {
      const cert = await readFile(certFile, "utf8");
      const key = await readFile(keyFile, "utf8");
      // The kubelet swaps both files at once; a read that straddled a swap is taken at the next poll.
      if ((await readFile(certFile, "utf8")) !== cert) return undefined;
      return { pair: { cert, key } };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "an error";
      return {
        pair: { cert: `\0unreadable ${code}`, key: "" },
        why: `${certFile} or ${keyFile} cannot be read (${code})`,
      };
    }
  }

  #changed({ pair, why = tlsPairProblem(pair) }: { pair: TlsPair; why?: string }): void {
    const { certFile, keyFile, log, onRead, serve } = this.opts;
    if (why === undefined) {
      serve(pair);
      onRead?.("ok");
      log({ level: "info", message: "the API's TLS certificate changed: new connections get it", file: certFile });
      return;
    }
    onRead?.("refused");
    log({
      level: "error",
      message:
        `the API's TLS certificate and key (${certFile}, ${keyFile}) were refused: ${why}. The pair served ` +
        "before is still served: put a PEM certificate and its own key in the Secret, and it is read again " +
        `within ${(this.opts.pollMs ?? API_TOKENS_POLL_MS) / 1000} s`,
      file: certFile,
    });
  }
}
