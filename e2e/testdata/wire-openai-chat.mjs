// One agent loop with the official OpenAI TypeScript SDK (openai, pinned in
// e2e/package-lock.json), Chat Completions: the model API at argv[3] (a
// fake the Go test runs), the tool pool's HTTP API at argv[2]. The
// assistant message goes to the pool as the SDK returned it; the answer's
// tool messages are appended as they are.
import OpenAI from "openai";
import { poolTools, poolToolCalls, report } from "./pool.mjs";

const [pool, modelAPI] = process.argv.slice(2);
const client = new OpenAI({ apiKey: "test-key", baseURL: `${modelAPI}/v1`, maxRetries: 0 });
/** @type {OpenAI.Chat.ChatCompletionTool[]} */
const tools = await poolTools(pool, "openai");
/** @type {OpenAI.Chat.ChatCompletionMessageParam[]} */
const messages = [{ role: "user", content: "Echo a greeting, then call flaky." }];
const turns = [];
let message;
for (let i = 0; i < 4; i++) {
  const completion = await client.chat.completions.create({ model: "gpt-test", tools, messages });
  message = completion.choices[0].message;
  messages.push(message);
  if (!message.tool_calls?.length) break;
  const { answer, format, errors } = await poolToolCalls(pool, message, "wire-openai-chat");
  turns.push({ format, errors });
  /** @type {OpenAI.Chat.ChatCompletionToolMessageParam[]} */
  const toolMessages = answer;
  messages.push(...toolMessages);
}
report({ final: message.content, turns });
