// The official TypeScript SDK client against the real clawboo-mcp-tasks binary over stdio.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const binDir = process.env.CLAWBOO_BIN_DIR;
assert.ok(binDir, "CLAWBOO_BIN_DIR must name the folder with the built binaries");

async function connect(args = []) {
  const db = join(mkdtempSync(join(tmpdir(), "clawboo-ts-")), "clawboo.db");
  const transport = new StdioClientTransport({
    command: join(binDir, "clawboo-mcp-tasks"),
    args: ["--db", db, ...args],
    stderr: "inherit",
  });
  const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

test("TS SDK lists the 13 task tools and drives a task through the board", async () => {
  const client = await connect();
  try {
    assert.deepEqual(client.getServerVersion(), { name: "clawboo-tasks", version: "0.1.0" });
    const { tools } = await client.listTools();
    assert.equal(tools.length, 13);
    const create = tools.find((t) => t.name === "create_task");
    assert.deepEqual(create.inputSchema.required, ["title"]);

    const created = await client.callTool({ name: "create_task", arguments: { title: "from the TS SDK", priority: 3 } });
    assert.notEqual(created.isError, true);
    const { task } = JSON.parse(created.content[0].text);
    assert.equal(task.status, "todo");

    const claimed = await client.callTool({ name: "claim_task", arguments: { taskId: task.id, assigneeAgentId: "ts" } });
    assert.equal(JSON.parse(claimed.content[0].text).task.assigneeAgentId, "ts");

    const again = await client.callTool({ name: "claim_task", arguments: { taskId: task.id, assigneeAgentId: "other" } });
    assert.equal(again.isError, true);
    assert.match(again.content[0].text, /^claim failed: conflict: .*do not retry it/);
    assert.equal(again._meta.error, "conflict");
  } finally {
    await client.close();
  }
});

test("TS SDK sees a bound, read-only session", async () => {
  const client = await connect(["--read-only", "--team", "red"]);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["list_tasks", "get_task"]);
    const listed = await client.callTool({ name: "list_tasks", arguments: { teamId: "blue" } });
    assert.deepEqual(JSON.parse(listed.content[0].text), { tasks: [] });
  } finally {
    await client.close();
  }
});
