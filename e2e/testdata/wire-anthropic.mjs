// One agent loop with the official Anthropic TypeScript SDK
// (@anthropic-ai/sdk, pinned in e2e/package-lock.json): the model API at
// argv[3] (a fake the Go test runs), the tool pool's HTTP API at argv[2].
// The assistant message goes to the pool as the SDK returned it; the
// answer is appended to the messages as it is.
import Anthropic from "@anthropic-ai/sdk";
import { poolTools, poolToolCalls, report } from "./pool.mjs";

const [pool, modelAPI] = process.argv.slice(2);
const client = new Anthropic({ apiKey: "test-key", baseURL: modelAPI, maxRetries: 0 });
/** @type {Anthropic.Tool[]} */
const tools = (await poolTools(pool, "anthropic")).tools;
/** @type {Anthropic.MessageParam[]} */
const messages = [{ role: "user", content: "Echo a greeting, then call flaky." }];
const turns = [];
let msg;
for (let i = 0; i < 4; i++) {
  msg = await client.messages.create({ model: "claude-test", max_tokens: 1024, tools, messages });
  messages.push({ role: "assistant", content: msg.content });
  if (msg.stop_reason !== "tool_use") break;
  const { answer, format, errors } = await poolToolCalls(pool, msg, "wire-anthropic");
  turns.push({ format, errors });
  /** @type {Anthropic.MessageParam} */
  const next = answer;
  messages.push(next);
}
report({ final: msg.content.find((b) => b.type === "text")?.text, turns });
