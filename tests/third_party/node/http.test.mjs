// The official TypeScript SDK client (StreamableHTTPClientTransport) against the real
// `clawboo serve` from $CLAWBOO_BIN_DIR, on port 0 with a fresh database.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const binDir = process.env.CLAWBOO_BIN_DIR;
assert.ok(binDir, "CLAWBOO_BIN_DIR must name the folder with the built binaries");

let server;
let base;

before(async () => {
  const db = join(mkdtempSync(join(tmpdir(), "clawboo-http-ts-")), "clawboo.db");
  const env = { ...process.env };
  delete env.STUDIO_ACCESS_TOKEN;
  server = spawn(join(binDir, "clawboo"), ["serve", "--bind", "127.0.0.1:0", "--db", db], {
    stdio: ["ignore", "pipe", "inherit"],
    env,
  });
  // The first stdout line is printed once the socket is bound.
  const lines = createInterface({ input: server.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    server.once("exit", (code) => reject(new Error(`clawboo serve exited with ${code}`)));
  });
  base = first.replace("clawboo listening on ", "").trim();
  assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/);
});

after(() => {
  server?.kill();
});

async function connect(url) {
  const client = new Client({ name: "ts-sdk-http-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

function json(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return JSON.parse(result.content[0].text);
}

test("TS SDK over Streamable HTTP: initialize, tools/list, tools/call on tasks", async () => {
  const { client, transport } = await connect(`${base}/api/mcp/tasks`);
  try {
    assert.deepEqual(client.getServerVersion(), { name: "clawboo-tasks", version: "0.1.0" });
    assert.ok(transport.sessionId, "a session id was issued");
    const { tools } = await client.listTools();
    assert.equal(tools.length, 13);
    const { task } = json(await client.callTool({ name: "create_task", arguments: { title: "via http", teamId: "red" } }));
    assert.equal(task.status, "todo");
    const { tasks } = json(await client.callTool({ name: "list_tasks", arguments: { teamId: "red" } }));
    assert.deepEqual(tasks.map((t) => t.id), [task.id]);
    const claimed = json(await client.callTool({ name: "claim_task", arguments: { taskId: task.id, assigneeAgentId: "ts" } }));
    assert.equal(claimed.task.assigneeAgentId, "ts");
  } finally {
    await client.close();
  }
});

test("TS SDK over Streamable HTTP: teamchat post and subscribe", async () => {
  const a = await connect(`${base}/api/mcp/teamchat`);
  const b = await connect(`${base}/api/mcp/teamchat`);
  try {
    assert.equal(a.client.getServerVersion().name, "clawboo-teamchat");
    const names = (await a.client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ["team_chat_post", "team_chat_subscribe"]);
    const posted = json(await a.client.callTool({ name: "team_chat_post", arguments: { text: "hello", authorAgentId: "ada", teamId: "red" } }));
    assert.equal(posted.posted.roomId, "team:red");
    const read = json(await b.client.callTool({ name: "team_chat_subscribe", arguments: { teamId: "red", authorAgentId: "bob" } }));
    assert.equal(read.posts.length, 1);
    assert.match(read.posts[0].wrapped, /isUser=false/);
  } finally {
    await a.client.close();
    await b.client.close();
  }
});

test("TS SDK attaches with a signed URL from /api/mcp/config and stays in its team", async () => {
  const res = await fetch(`${base}/api/mcp/config?server=tasks&scopeTeamId=blue&scopeAgentId=ada`);
  assert.equal(res.status, 200);
  const { config } = await res.json();
  const url = config.structured["clawboo-tasks"].url;
  assert.match(url, /scopeSig=[0-9a-f]{64}$/);
  const { client } = await connect(url);
  try {
    json(await client.callTool({ name: "create_task", arguments: { title: "blue work", teamId: "red" } }));
    const { tasks } = json(await client.callTool({ name: "list_tasks", arguments: { teamId: "red" } }));
    assert.ok(tasks.length >= 1);
    assert.ok(tasks.every((t) => t.teamId === "blue"), JSON.stringify(tasks));
  } finally {
    await client.close();
  }
});

test("session errors and terminateSession (DELETE) as the SDK sees them", async () => {
  const raw = await fetch(`${base}/api/mcp/tasks`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  assert.equal(raw.status, 400);
  assert.deepEqual(await raw.json(), {
    jsonrpc: "2.0",
    id: null,
    error: { code: -32000, message: "No valid session; send an initialize request first." },
  });

  const { client, transport } = await connect(`${base}/api/mcp/tasks`);
  const sessionId = transport.sessionId;
  await transport.terminateSession();
  const after = await fetch(`${base}/api/mcp/tasks`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": sessionId,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  assert.equal(after.status, 404);
  await client.close();
});
