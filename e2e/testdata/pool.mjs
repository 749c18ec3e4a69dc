// The two requests an agent makes to the pool's HTTP API, shared by the
// wire-*.mjs loops: the tools in a model API's shape, and one turn's tool
// calls posted as the SDK returned them, answered in the same shape.

/** GET /v1/tools?format=… as parsed JSON. */
export async function poolTools(pool, format) {
  const res = await fetch(`${pool}/v1/tools?format=${format}`);
  if (!res.ok) throw new Error(`GET /v1/tools?format=${format}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** POST /v1/tool_calls with body (anything JSON.stringify takes); returns the parsed answer. */
export async function poolToolCalls(pool, body, session) {
  const res = await fetch(`${pool}/v1/tool_calls?timeout=60s`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Toolpool-Session": session },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`POST /v1/tool_calls: ${res.status} ${await res.text()}`);
  return { answer: await res.json(), format: res.headers.get("toolpool-format"), errors: res.headers.get("toolpool-error-indexes") };
}

/** Prints the loop's outcome for the Go test. */
export function report(out) {
  process.stdout.write(JSON.stringify(out) + "\n");
}
