// The real agent CLIs, Claude Code's (`claude`) and Codex's (`codex`), configured by the
// snippets `clawboo attach` prints, run exactly as printed, for all four servers over stdio
// and over Streamable HTTP (a real `clawboo serve` on port 0 with its own database). Then
// `claude mcp list` must find every server connected (it starts each stdio server and
// initializes, or connects over HTTP) and `codex mcp list` must list every one. Neither
// CLI needs a model, an account or the network for this; each runs in a temporary HOME
// (and CODEX_HOME) so no real configuration is read or touched.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { clawboo, cliBin, sandbox, serve } from "./cli-support.mjs";

const SERVERS = ["tasks", "memory", "tools", "teamchat"];
const tap = join(dirname(fileURLToPath(import.meta.url)), "..", "stdio-tap.mjs");

let server;
let base;
let db;

before(async () => {
  db = join(mkdtempSync(join(tmpdir(), "clawboo-clis-")), "clawboo.db");
  server = await serve(db);
  base = server.base;
});

after(async () => {
  await server?.stop();
});

/// The snippet `clawboo attach` prints for one runtime, server and transport.
function snippet(runtime, name, transport) {
  return execFileSync(
    clawboo,
    ["attach", "--runtime", runtime, "--server", name, "--transport", transport, "--db", db, "--url", base],
    { encoding: "utf8" },
  );
}

function run(command, args, box) {
  return execFileSync(command, args, { cwd: box.project, env: box.env, encoding: "utf8", timeout: 120_000 });
}

for (const transport of ["stdio", "http"]) {
  test(`claude mcp add (as clawboo attach prints it) → claude mcp list: every server Connected (${transport})`, () => {
    const box = sandbox(`claude-${transport}`);
    for (const name of SERVERS) {
      const command = snippet("claude-code", name, transport).trim();
      assert.match(command, /^claude mcp add /);
      run("bash", ["-c", command], box);
    }
    const listed = run(join(cliBin, "claude"), ["mcp", "list"], box);
    for (const name of SERVERS) {
      const line = listed.split("\n").find((l) => l.startsWith(`clawboo-${name}:`));
      assert.ok(line, `clawboo-${name} is not listed:\n${listed}`);
      assert.match(line, /Connected/, `clawboo-${name} did not connect:\n${listed}`);
    }
  });

  test(`codex config (as clawboo attach prints it) → codex mcp list: every server listed (${transport})`, () => {
    const box = sandbox(`codex-${transport}`);
    const config = join(box.codexHome, "config.toml");
    for (const name of SERVERS) {
      appendFileSync(config, `${snippet("codex", name, transport)}\n`);
    }
    const listed = JSON.parse(run(join(cliBin, "codex"), ["mcp", "list", "--json"], box));
    for (const name of SERVERS) {
      const entry = listed.find((s) => s.name === `clawboo-${name}`);
      assert.ok(entry, `clawboo-${name} is not listed: ${JSON.stringify(listed)}`);
      assert.equal(entry.enabled, true, JSON.stringify(entry));
      if (transport === "http") {
        // Every attach URL is signed (unbound ones over the server's name), so the listed
        // URL is the server's own with exactly its scopeSig.
        const url = new URL(entry.transport.url);
        assert.equal(`${url.origin}${url.pathname}`, `${base}/api/mcp/${name}`, JSON.stringify(entry));
        assert.deepEqual([...url.searchParams.keys()], ["scopeSig"], JSON.stringify(entry));
        assert.match(url.searchParams.get("scopeSig"), /^[0-9a-f]{64}$/, JSON.stringify(entry));
      } else {
        assert.equal(entry.transport.type, "stdio", JSON.stringify(entry));
        assert.equal(entry.transport.command, clawboo, JSON.stringify(entry));
        assert.deepEqual(entry.transport.args, ["mcp", name], JSON.stringify(entry));
      }
    }
  });
}

/// `clawboo attach --apply --all` for one runtime and transport, run in the sandbox.
function applyAll(runtime, transport, box, extra = []) {
  return run(
    clawboo,
    ["attach", "--apply", "--all", "--runtime", runtime, "--transport", transport, "--team", "red", "--agent", "alice", "--db", db, "--url", base, ...extra],
    box,
  );
}

for (const transport of ["stdio", "http"]) {
  test(`clawboo attach --apply --all → claude mcp list: every server Connected, the user's own kept; a second run changes nothing (${transport})`, () => {
    const box = sandbox(`claude-apply-${transport}`);
    run(join(cliBin, "claude"), ["mcp", "add", "--scope", "user", "mine", "--", process.execPath, tap, join(box.project, "mine.tap"), clawboo, "mcp", "tools", "--db", db], box);
    const config = join(box.home, ".claude.json");
    assert.match(applyAll("claude-code", transport, box), /^updated .*\.claude\.json: clawboo-tasks, clawboo-memory, clawboo-tools, clawboo-teamchat\n$/);
    const written = readFileSync(config, "utf8");
    assert.match(applyAll("claude-code", transport, box), /^unchanged /);
    assert.equal(readFileSync(config, "utf8"), written);
    const listed = run(join(cliBin, "claude"), ["mcp", "list"], box);
    for (const name of [...SERVERS.map((n) => `clawboo-${n}`), "mine"]) {
      const line = listed.split("\n").find((l) => l.startsWith(`${name}:`));
      assert.match(line ?? "", /Connected/, `${name} did not connect:\n${listed}`);
    }
  });

  test(`clawboo attach --apply --all → codex mcp list: every server listed, the user's own entry and comments kept (${transport})`, () => {
    const box = sandbox(`codex-apply-${transport}`);
    const config = join(box.codexHome, "config.toml");
    const before = '# my settings\nmodel = "o4" # the model I use\n\n[mcp_servers.mine]\ncommand = "mine" # keep me\n';
    writeFileSync(config, before);
    assert.match(applyAll("codex", transport, box), /^updated /);
    const written = readFileSync(config, "utf8");
    assert.ok(written.startsWith(before), written);
    assert.match(applyAll("codex", transport, box), /^unchanged /);
    assert.equal(readFileSync(config, "utf8"), written);
    const listed = JSON.parse(run(join(cliBin, "codex"), ["mcp", "list", "--json"], box));
    assert.deepEqual(
      listed.map((s) => s.name).sort(),
      [...SERVERS.map((n) => `clawboo-${n}`), "mine"].sort(),
      JSON.stringify(listed),
    );
    const tasks = listed.find((s) => s.name === "clawboo-tasks");
    if (transport === "http") {
      assert.match(tasks.transport.url, /\/api\/mcp\/tasks\?scopeTeamId=red&scopeAgentId=alice&scopeSig=[0-9a-f]{64}$/);
    } else {
      assert.deepEqual(tasks.transport.args, ["mcp", "tasks", "--team", "red", "--agent", "alice"]);
    }
  });
}

test("clawboo attach --apply --scope project → claude mcp list shows the project's server (awaiting the user's approval)", () => {
  const box = sandbox("claude-apply-project");
  assert.equal(applyAll("claude-code", "stdio", box, ["--scope", "project"]), "updated .mcp.json: clawboo-tasks, clawboo-memory, clawboo-tools, clawboo-teamchat\n");
  const listed = run(join(cliBin, "claude"), ["mcp", "list"], box);
  for (const name of SERVERS) {
    const line = listed.split("\n").find((l) => l.startsWith(`clawboo-${name}:`));
    assert.match(line ?? "", /Pending approval/, `clawboo-${name} is not listed:\n${listed}`);
  }
});

test("claude mcp list is answered on its first probe: server/discover at 2026-07-28, no initialize (stdio tap)", () => {
  const box = sandbox("claude-tap");
  const logs = {};
  for (const name of SERVERS) {
    logs[name] = join(box.project, `${name}.tap`);
    run(join(cliBin, "claude"), ["mcp", "add", `clawboo-${name}`, "--", process.execPath, tap, logs[name], clawboo, "mcp", name, "--db", db], box);
  }
  const listed = run(join(cliBin, "claude"), ["mcp", "list"], box);
  for (const name of SERVERS) {
    const line = listed.split("\n").find((l) => l.startsWith(`clawboo-${name}:`));
    assert.match(line ?? "", /Connected/, `clawboo-${name} did not connect:\n${listed}`);
    const wire = readFileSync(logs[name], "utf8").split("\n").filter(Boolean);
    const sent = wire.filter((l) => l.startsWith("> ")).map((l) => JSON.parse(l.slice(2)));
    const answers = wire.filter((l) => l.startsWith("< ")).map((l) => JSON.parse(l.slice(2)));
    assert.equal(sent[0]?.method, "server/discover", `${name}: ${wire.join("\n")}`);
    assert.equal(sent[0].params._meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    const answer = answers.find((a) => a.id === sent[0].id);
    assert.ok(answer?.result?.supportedVersions?.includes("2026-07-28"), `${name}: ${wire.join("\n")}`);
    assert.equal(answer.result._meta["io.modelcontextprotocol/serverInfo"].name, `clawboo-${name}`);
    assert.deepEqual(
      sent.filter((m) => m.method === "initialize"),
      [],
      `${name}: the CLI fell back to initialize:\n${wire.join("\n")}`,
    );
  }
});
