// A client of the pool's MCP tasks (revision 2025-11-25's shape) written
// with the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// e2e/package-lock.json, whose client.experimental.tasks speaks it). It
// connects to each streamable-HTTP URL in argv[2] (a JSON array: the
// replicas; bearer token in TOOLPOOL_MCP_TOKEN), and:
//   - on the first, reads the server's capabilities.tasks and each tool's
//     execution.taskSupport, then runs the call in argv[3] ({"name":...,
//     "arguments":...}) as a task with callToolStream: the task is created
//     there, and polled to its result;
//   - creates a second task of the same call on the first replica and reads
//     it (tasks/get, then tasks/result) from the last one, a session of its
//     own: any replica answers;
//   - creates a task of the call in argv[4] (a slow one) and cancels it on
//     the last replica.
// It prints one JSON object: {"capabilities", "taskSupport", "stream",
// "elsewhere", "cancelled", "afterCancel"}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [urlsJSON, callJSON, slowJSON] = process.argv.slice(2);
const urls = JSON.parse(urlsJSON);
const call = JSON.parse(callJSON);
const slow = JSON.parse(slowJSON);
const headers = {};
if (process.env.TOOLPOOL_MCP_TOKEN) headers.Authorization = `Bearer ${process.env.TOOLPOOL_MCP_TOKEN}`;

async function connect(url) {
  const client = new Client({ name: "toolpool-e2e-ts-tasks", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

const first = await connect(urls[0]);
const last = await connect(urls[urls.length - 1]);
const out = { capabilities: first.getServerCapabilities()?.tasks ?? null, taskSupport: {}, stream: [], elsewhere: {} };

const listed = await first.listTools();
for (const t of listed.tools) out.taskSupport[t.name] = t.execution?.taskSupport ?? null;

// The SDK's own loop: tools/call with params.task, tasks/get until the end,
// tasks/result.
for await (const m of first.experimental.tasks.callToolStream(call, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 120000 })) {
  out.stream.push(m.type === "error" ? { type: "error", error: String(m.error) } : m);
}

// Created on the first replica, answered by the last.
const created = await first.request({ method: "tools/call", params: { ...call, task: { ttl: 60000 } } }, CreateTaskResultSchema);
out.elsewhere.created = created.task;
out.elsewhere.result = await last.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema, { timeout: 120000 });
out.elsewhere.task = await last.experimental.tasks.getTask(created.task.taskId);

// Cancelled on the last replica.
const long = await first.request({ method: "tools/call", params: { ...slow, task: {} } }, CreateTaskResultSchema);
out.cancelled = await last.experimental.tasks.cancelTask(long.task.taskId);
out.afterCancel = await first.experimental.tasks.getTask(long.task.taskId);

await first.close();
await last.close();
process.stdout.write(JSON.stringify(out) + "\n");
