// A client of the pool's MCP server written with the official TypeScript
// SDK (@modelcontextprotocol/sdk, pinned in e2e/package-lock.json). It
// connects to the streamable-HTTP URL in argv[2] (bearer token in
// TOOLPOOL_MCP_TOKEN, if set), lists the tools, makes the calls given as
// JSON in argv[3] ([{"name":..., "arguments":...}, ...]) and prints one
// JSON object: {"tools": [names], "annotations": {name: ToolAnnotations},
// "results": [CallToolResult...], "progress": [[...], ...]}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, callsJSON] = process.argv.slice(2);
const headers = {};
if (process.env.TOOLPOOL_MCP_TOKEN) headers.Authorization = `Bearer ${process.env.TOOLPOOL_MCP_TOKEN}`;
const client = new Client({ name: "toolpool-e2e-ts", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const out = { tools: [], annotations: {}, results: [], progress: [] };
const listed = await client.listTools();
out.tools = listed.tools.map((t) => t.name);
for (const t of listed.tools) if (t.annotations) out.annotations[t.name] = t.annotations;
for (const call of JSON.parse(callsJSON || "[]")) {
  const progress = [];
  const res = await client.callTool(call, undefined, { onprogress: (p) => progress.push(p), timeout: 120000 });
  out.results.push(res);
  out.progress.push(progress);
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
