// One agent loop with the official OpenAI TypeScript SDK (openai, pinned in
// e2e/package-lock.json), Responses API: the model API at argv[3] (a fake
// the Go test runs), the tool pool's HTTP API at argv[2]. The whole
// response goes to the pool as the SDK returned it; the next request's
// input is the previous input, the response's output and the pool's
// function_call_output items, as they are.
import OpenAI from "openai";
import { poolTools, poolToolCalls, report } from "./pool.mjs";

const [pool, modelAPI] = process.argv.slice(2);
const client = new OpenAI({ apiKey: "test-key", baseURL: `${modelAPI}/v1`, maxRetries: 0 });
/** @type {OpenAI.Responses.FunctionTool[]} */
const tools = await poolTools(pool, "responses");
/** @type {OpenAI.Responses.ResponseInputItem[]} */
let input = [{ role: "user", content: "Echo a greeting, then call flaky." }];
const turns = [];
let response;
for (let i = 0; i < 4; i++) {
  response = await client.responses.create({ model: "gpt-test", tools, input });
  if (!response.output.some((item) => item.type === "function_call")) break;
  const { answer, format, errors } = await poolToolCalls(pool, response, "wire-openai-responses");
  turns.push({ format, errors });
  /** @type {OpenAI.Responses.ResponseInputItem.FunctionCallOutput[]} */
  const outputs = answer;
  input = [...input, ...response.output, ...outputs];
}
report({ final: response.output_text, turns });
