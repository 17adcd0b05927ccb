// The one way an integration test calls an Orchestrator's HTTP API as a client would: a bearer
// (the test's API token unless another is given: a Sandbox token, a wrong one, none), a JSON body,
// and the answer's status and parsed body.
export type Answer<T> = { status: number; body: T };

/** `api(method, path, body?, token?)` against the Orchestrator at `url()`, as `token()` by default.
 * Both are read at each call, so a test may start its Orchestrator after making the helper. */
export function orchestratorApi(url: () => string, token: () => string) {
  return async function api<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    as: string | undefined = token(),
  ): Promise<Answer<T>> {
    const res = await fetch(url() + path, {
      method,
      headers: {
        ...(as ? { authorization: `Bearer ${as}` } : {}),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  };
}
