// One agent loop with the official Google Gen AI TypeScript SDK
// (@google/genai, pinned in e2e/package-lock.json): the Gemini API at
// argv[3] (a fake the Go test runs), the tool pool's HTTP API at argv[2].
// The whole GenerateContentResponse goes to the pool as the SDK returned
// it; the model's content and the pool's answer (a Content of
// functionResponse parts) are appended to the contents as they are.
import { GoogleGenAI } from "@google/genai";
import { poolTools, poolToolCalls, report } from "./pool.mjs";

const [pool, modelAPI] = process.argv.slice(2);
const ai = new GoogleGenAI({ apiKey: "test-key", httpOptions: { baseUrl: modelAPI } });
/** @type {import("@google/genai").Tool[]} */
const tools = await poolTools(pool, "gemini");
/** @type {import("@google/genai").Content[]} */
const contents = [{ role: "user", parts: [{ text: "Echo a greeting, then call flaky." }] }];
const turns = [];
let response;
for (let i = 0; i < 4; i++) {
  response = await ai.models.generateContent({ model: "gemini-test", contents, config: { tools } });
  if (!response.functionCalls?.length) break;
  const { answer, format, errors } = await poolToolCalls(pool, response, "wire-gemini");
  turns.push({ format, errors });
  /** @type {import("@google/genai").Content} */
  const functionResponses = answer;
  contents.push(response.candidates[0].content, functionResponses);
}
report({ final: response.text, turns });
