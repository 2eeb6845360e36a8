// A wire tap for stdio MCP servers: `node stdio-tap.mjs <log> <command> [args…]` runs the
// command with this process's stdin and stdout passed through line by line, and appends
// every line to <log>, prefixed `> ` (client to server) or `< ` (server to client). Tests
// configure a client to launch the tap instead of the server, then read what was said.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [log, command, ...args] = process.argv.slice(2);
if (!log || !command) {
  process.stderr.write("usage: node stdio-tap.mjs <log> <command> [args…]\n");
  process.exit(2);
}
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });

createInterface({ input: process.stdin }).on("line", (line) => {
  appendFileSync(log, `> ${line}\n`);
  child.stdin.write(`${line}\n`);
}).on("close", () => child.stdin.end());

createInterface({ input: child.stdout }).on("line", (line) => {
  appendFileSync(log, `< ${line}\n`);
  process.stdout.write(`${line}\n`);
});

// A client that writes after the server has gone must not crash the tap.
child.stdin.on("error", () => {});
// "close" comes after the child's stdout has ended, so every line is relayed by then.
child.on("close", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
