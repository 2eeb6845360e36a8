// Real agents do a task through our servers: the real Claude Code CLI (`claude -p`) and the
// real Codex CLI (`codex exec`), each attached to the Tasks server with the snippet
// `clawboo attach` prints (over Streamable HTTP to a real `clawboo serve` on port 0, and
// over stdio), their model endpoint pointed at a scripted model on loopback
// (scripted-model.mjs). The model tries a task another agent holds and must read our
// refusal ("do not retry"), then claims the next ready task, comments and finishes it; an
// operator comments on that task meanwhile, and the model must find the note piggybacked
// on its next tool result (the inbox's team updates). The board is then read back over
// REST: the task done by that agent, its comment, its lease released, and the names the CLI
// gave our tools.
//
// Claude Code runs twice per transport: with its ToolSearch (the Tasks tools deferred, found
// by keyword searches, as a real model finds them) and with ENABLE_TOOL_SEARCH=false (every
// schema offered up front). All of it runs on SQLite and, when CLAWBOO_TEST_POSTGRES_URL is
// set (test.sh's PostgreSQL pass), again on PostgreSQL, in a fresh database (psql).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { clawboo, cliBin, sandbox, serve } from "./cli-support.mjs";
import { CODEX_NAMESPACE, COMMENT, FINAL, TOOL, WORK_TOOLS, startScriptedModel } from "./scripted-model.mjs";

// Generous: a slow 2-core machine starts a CLI, a stdio server and several model turns.
const CLI_TIMEOUT_MS = 300_000;

/// The backends to run on: SQLite always, PostgreSQL when the suite has a server.
const BACKENDS = ["sqlite", ...(process.env.CLAWBOO_TEST_POSTGRES_URL ? ["postgres"] : [])];

const cleanups = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/// psql: on PATH, else beside the PostgreSQL binaries the test cluster script finds.
function psql() {
  try {
    execFileSync("psql", ["--version"], { stdio: "ignore" });
    return "psql";
  } catch {
    const script = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "scripts", "pg-test-cluster.sh");
    return join(execFileSync(script, ["bindir"], { encoding: "utf8" }).trim(), "psql");
  }
}

/// A fresh database on `backend`: a SQLite file, or a new PostgreSQL database (dropped
/// after the run) on the suite's server.
function freshDb(backend) {
  if (backend === "sqlite") {
    return join(mkdtempSync(join(tmpdir(), "clawboo-agent-")), "clawboo.db");
  }
  const server = new URL(process.env.CLAWBOO_TEST_POSTGRES_URL);
  const name = `clawboo_agent_${process.pid}_${Math.random().toString(16).slice(2, 10)}`;
  const client = psql();
  execFileSync(client, [server.href, "-q", "-v", "ON_ERROR_STOP=1", "-c", `CREATE DATABASE ${name}`]);
  cleanups.push(() => {
    execFileSync(client, [server.href, "-q", "-c", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]);
  });
  const url = new URL(server.href);
  url.pathname = `/${name}`;
  return url.href;
}

async function api(base, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/// A team with two ready tasks, the first already held by another agent.
async function board(base, label) {
  const team = `team-${label}`;
  await api(base, "POST", "/api/teams", { id: team, name: team });
  const held = (await api(base, "POST", "/api/board", { title: "Held by someone else", teamId: team, priority: 9 })).task;
  await api(base, "POST", `/api/board/${held.id}/claim`, { assigneeAgentId: "agent-other" });
  const free = (await api(base, "POST", "/api/board", { title: "Write the release note", teamId: team, priority: 5 })).task;
  return { team, held, free, agent: `agent-${label}` };
}

/// The snippet `clawboo attach` prints for the Tasks server, bound to `team` and `agent`.
function snippet(runtime, transport, db, base, { team, agent }) {
  return execFileSync(
    clawboo,
    ["attach", "--runtime", runtime, "--server", "tasks", "--transport", transport, "--team", team, "--agent", agent, "--db", db, "--url", base],
    // (Its stderr is the PostgreSQL password note, for an operator.)
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
}

/// Run a CLI to its end (stdin closed); its output, or an error with everything it said.
function runCli(command, args, box, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: box.project, env: { ...box.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), CLI_TIMEOUT_MS);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${command} ${args.join(" ")} exited with ${code ?? signal}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    });
  });
}

/// The operator's comment on the task the agent holds, made while the model thinks: the
/// agent must get it as a team update on its next tool result (the inbox piggyback).
function operatorComments(base, work) {
  return async (task) => {
    await api(base, "POST", `/api/board/${task.id}/comments`, { body: "Please mention the date.", authorAgentId: "lead" });
    return `on your task "${work.free.title}" (${work.free.id})`;
  };
}

/// The prompt both CLIs get: it names the task to try first, as a user or a list would.
function prompt(work) {
  return `Work the Clawboo board: try task ${work.held.id} first; if you cannot have it, take the next ready task, comment on it and mark it done.`;
}

/// The board after the turn: the free task done by the agent, with its comment and no
/// lease; the held one untouched; the agent holding nothing.
async function assertBoard(base, work, model) {
  assert.deepEqual(model.failures, [], `the scripted model saw:\n${JSON.stringify(model.steps, null, 2)}`);
  const refusal = model.steps.find((s) => s.step === "claim_task");
  assert.ok(refusal?.isError, JSON.stringify(model.steps));
  assert.match(refusal.result, /do not retry/);
  assert.ok(model.expectUpdate, "the operator's comment was not made");
  const { task, comments } = await api(base, "GET", `/api/board/${work.free.id}`);
  assert.equal(task.status, "done", JSON.stringify(task));
  assert.equal(task.assigneeAgentId, work.agent, JSON.stringify(task));
  assert.equal(task.leaseExpiresAt ?? null, null, JSON.stringify(task));
  assert.deepEqual(
    comments.filter((c) => c.authorAgentId === "lead").map((c) => c.body),
    ["Please mention the date."],
    JSON.stringify(comments),
  );
  const mine = comments.filter((c) => c.body === COMMENT);
  assert.equal(mine.length, 1, JSON.stringify(comments));
  assert.equal(mine[0].authorAgentId, work.agent, JSON.stringify(mine[0]));
  assert.equal(mine[0].authorType, "agent", JSON.stringify(mine[0]));
  const held = (await api(base, "GET", `/api/board/${work.held.id}`)).task;
  assert.equal(held.assigneeAgentId, "agent-other", JSON.stringify(held));
  assert.equal(held.status, "in_progress", JSON.stringify(held));
  // Seen on the team, holding nothing: its lease is released (the other agent keeps its own).
  const { agents } = await api(base, "GET", `/api/agents?teamId=${work.team}`);
  const byId = (id) => agents.find((a) => a.id === id);
  assert.ok(byId(work.agent), `the agent is not seen: ${JSON.stringify(agents)}`);
  assert.deepEqual(byId(work.agent).held, [], JSON.stringify(agents));
  assert.equal(byId("agent-other")?.held?.length, 1, JSON.stringify(agents));
}

for (const backend of BACKENDS) {
  const setup = (async () => {
    const db = freshDb(backend);
    const { base, stop } = await serve(db);
    cleanups.push(stop);
    return { db, base };
  })();
  setup.catch(() => {});

  for (const transport of ["http", "stdio"]) {
    for (const toolSearch of [true, false]) {
      const mode = toolSearch ? "ToolSearch" : "ENABLE_TOOL_SEARCH=false";
      test(`claude -p claims, comments and finishes a task through the Tasks server (${transport}, ${mode}, ${backend})`, async () => {
        const { db, base } = await setup;
        const label = `claude-${transport}-${toolSearch ? "search" : "eager"}`;
        const work = await board(base, label);
        const box = sandbox(`agent-${label}`);
        const add = snippet("claude-code", transport, db, base, work).trim();
        assert.match(add, /^claude mcp add /);
        await runCli("bash", ["-c", add], box);
        const model = await startScriptedModel({ toolSearch, beforeComment: operatorComments(base, work) });
        try {
          const tools = WORK_TOOLS.map(TOOL);
          const out = await runCli(
            join(cliBin, "claude"),
            ["-p", prompt(work), "--output-format", "json", "--allowedTools", tools.join(",")],
            box,
            {
              ANTHROPIC_BASE_URL: model.url,
              ANTHROPIC_API_KEY: "scripted-model-key",
              ENABLE_TOOL_SEARCH: toolSearch ? "true" : "false",
            },
          );
          const result = JSON.parse(out);
          assert.equal(result.result, FINAL, out);
          assert.equal(result.is_error, false, out);
          // The names the CLI gave our tools, as it sent back what it ran.
          const used = model.requests.at(-1).body.messages
            .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
            .filter((b) => b.type === "tool_use")
            .map((b) => b.name);
          const expected = [...(toolSearch ? ["ToolSearch", "ToolSearch", "ToolSearch"] : []), ...tools];
          assert.deepEqual(used, expected);
          await assertBoard(base, work, model);
        } finally {
          await model.close();
        }
      });
    }

    test(`codex exec claims, comments and finishes a task through the Tasks server (${transport}, ${backend})`, async () => {
      const { db, base } = await setup;
      const label = `codex-${transport}`;
      const work = await board(base, label);
      const box = sandbox(`agent-${label}`);
      const model = await startScriptedModel({ beforeComment: operatorComments(base, work) });
      try {
        // The attach snippet, then a custom model provider: the scripted Responses API.
        const config = [
          'model = "scripted-model"',
          'model_provider = "scripted"',
          "",
          snippet("codex", transport, db, base, work),
          "[model_providers.scripted]",
          'name = "scripted"',
          `base_url = "${model.url}/v1"`,
          'wire_api = "responses"',
          "",
        ].join("\n");
        writeFileSync(join(box.codexHome, "config.toml"), config);
        const out = await runCli(join(cliBin, "codex"), ["exec", "--skip-git-repo-check", prompt(work)], box);
        assert.match(out, new RegExp(FINAL), out);
        // The names Codex gave our tools, as it sent back what it ran.
        const used = model.requests.at(-1).body.input.filter((i) => i.type === "function_call").map((i) => `${i.namespace}/${i.name}`);
        assert.deepEqual(used, WORK_TOOLS.map((t) => `${CODEX_NAMESPACE}/${t}`));
        await assertBoard(base, work, model);
      } finally {
        await model.close();
      }
    });
  }
}
