// The Vercel AI SDK's default path against the proxy: openai(model) + streamText on /v1/responses.
// Usage: node ai_sdk_probe.mjs BASE_URL MODEL PROMPT_FILE   (run from .npm-clients, where `ai` is installed)
// Prints one JSON line: the text streamed, and every error the SDK reported (name, status, code, message).
import { readFileSync } from "node:fs";
import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai";

const [baseURL, model, promptFile] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey: process.env.GATEWAY_KEY ?? "sk-default" });
const errors = [];
const describe = (error) => ({
  name: error?.name ?? null,
  status: error?.statusCode ?? null,
  code: error?.data?.error?.code ?? error?.data?.response?.error?.code ?? error?.code ?? null,
  message: String(error?.message ?? error).slice(0, 2000),
});
let text = "";
try {
  const result = streamText({
    model: openai(model),
    prompt: readFileSync(promptFile, "utf8"),
    maxRetries: 0,
    onError: ({ error }) => errors.push(describe(error)),
  });
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") text += part.text ?? part.delta ?? "";
    if (part.type === "error") errors.push(describe(part.error));
  }
} catch (error) {
  errors.push(describe(error));
}
process.stdout.write(JSON.stringify({ text, errors }) + "\n");
