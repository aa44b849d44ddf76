// Drive `msb mcp` with the official MCP TypeScript SDK client.
//
//   node client.mjs PLAN.json MSB [ARG...]
//
// Connects over stdio (`MSB mcp ARG...`), initializes, lists the tools, then
// calls each tool of the plan ([{"tool": name, "arguments": {...}}, ...]) in
// order, and prints one JSON object: the server's info, its tools and every
// call's result (or the protocol error it raised) - the pytest suite asserts.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [planPath, msb, ...args] = process.argv.slice(2);
const plan = JSON.parse(readFileSync(planPath, "utf8"));

const transport = new StdioClientTransport({
  command: msb,
  args: ["mcp", ...args],
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "msb-e2e", version: "1.0.0" });
await client.connect(transport);

const out = {
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions(),
  tools: (await client.listTools()).tools,
  calls: [],
};
for (const step of plan) {
  try {
    out.calls.push({ result: await client.callTool({ name: step.tool, arguments: step.arguments ?? {} }) });
  } catch (e) {
    out.calls.push({ error: { code: e.code ?? null, message: String(e.message ?? e) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
