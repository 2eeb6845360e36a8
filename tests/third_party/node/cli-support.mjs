// What the agent-CLI tests share: the built `clawboo`, the installed CLIs, a real
// `clawboo serve` on port 0, and a throwaway HOME for the CLIs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const binDir = process.env.CLAWBOO_BIN_DIR;
assert.ok(binDir, "CLAWBOO_BIN_DIR must name the folder with the built binaries");

/// The `clawboo` binary under test.
export const clawboo = join(binDir, "clawboo");

/// Where npm installed the `claude` and `codex` CLIs.
export const cliBin = join(dirname(fileURLToPath(import.meta.url)), "..", "node_modules", ".bin");

/// A real `clawboo serve` on port 0 over `db` (no access gate); resolves to
/// `{base, stop}` once the socket is bound (its first stdout line says so).
export async function serve(db) {
  const env = { ...process.env };
  delete env.STUDIO_ACCESS_TOKEN;
  const child = spawn(clawboo, ["serve", "--bind", "127.0.0.1:0", "--db", db], { stdio: ["ignore", "pipe", "inherit"], env });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const first = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`clawboo serve exited with ${code}`)));
  });
  const base = first.replace("clawboo listening on ", "").trim();
  assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/);
  const stop = async () => {
    child.kill();
    await exited;
  };
  return { base, stop };
}

/// A fresh HOME (and project folder, and CODEX_HOME) and the environment the CLIs run in:
/// the installed CLIs first on PATH, no update checks or telemetry, nothing of the
/// caller's own configuration or keys.
export function sandbox(label) {
  const root = mkdtempSync(join(tmpdir(), `clawboo-${label}-`));
  const dirs = { home: join(root, "home"), project: join(root, "project"), codexHome: join(root, "codex") };
  Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
  const env = {
    ...process.env,
    HOME: dirs.home,
    CODEX_HOME: dirs.codexHome,
    PATH: `${cliBin}:${process.env.PATH}`,
    DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  };
  for (const key of ["CLAUDE_CONFIG_DIR", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ENABLE_TOOL_SEARCH"]) {
    delete env[key];
  }
  return { ...dirs, env };
}
