"""The Python `mcp` 2.x client at protocol 2026-07-28 against the real binaries.

Over stdio (`clawboo mcp <server>`, launched through the wire tap `stdio-tap.mjs`) and over
Streamable HTTP (`clawboo serve`, reached through a TCP relay that records what the client
sends), in both of the client's modes: pinned (`mode="2026-07-28"`, no probe at all) and
its default (`auto`, which probes `server/discover` and falls back to `initialize` only
when refused). The taps show the default mode never sends `initialize`. Then what a
2025-11-25 session can do, at 2026-07-28 on both transports: a bound identity's scope and
the inbox piggyback, tool-errors with `_meta.error`, a long-poll (`waitMs`) that announces
its wait by progress, an approval wait with progress that a person answers over REST, and
an approval answered in the client's own form through the call's multi-round-trip retry.
Prints `PASS <check>` / `FAIL <check>: <detail>` lines and exits non-zero on any failure.
Needs CLAWBOO_BIN_DIR (the folder holding the built `clawboo`).
"""

import asyncio
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

from mcp import Client, StdioServerParameters, types

VERSION = importlib.metadata.version("mcp")
MODERN = "2026-07-28"
HERE = os.path.dirname(os.path.abspath(__file__))
TAP = os.path.join(HERE, "..", "stdio-tap.mjs")
CLAWBOO = os.path.join(os.environ["CLAWBOO_BIN_DIR"], "clawboo")
INITIALIZE = re.compile(rb'"method"\s*:\s*"initialize"')
DISCOVER = re.compile(rb'"method"\s*:\s*"server/discover"')
failures = 0


def check(name, ok, detail=""):
    global failures
    label = f"mcp {VERSION}: {name}"
    if ok:
        print(f"PASS {label}", flush=True)
    else:
        failures += 1
        print(f"FAIL {label}: {detail}", flush=True)


def start_server(db):
    env = {k: v for k, v in os.environ.items() if k != "STUDIO_ACCESS_TOKEN"}
    proc = subprocess.Popen(
        [CLAWBOO, "serve", "--bind", "127.0.0.1:0", "--db", db],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    line = proc.stdout.readline().strip()
    prefix = "clawboo listening on "
    if not line.startswith(prefix):
        proc.kill()
        raise SystemExit(f"clawboo serve did not start: {line!r}")
    return proc, line[len(prefix):]


def rest(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req) as r:
        return json.load(r)


class HttpTap:
    """A TCP relay in front of `clawboo serve` that keeps every byte the client sent."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.sent = bytearray()
        self.server = None

    async def start(self):
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _relay(self, client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pump(reader, writer, record):
            try:
                while data := await reader.read(65536):
                    if record:
                        self.sent.extend(data)
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        try:
            await asyncio.gather(
                pump(client_reader, server_writer, True), pump(server_reader, client_writer, False)
            )
        except asyncio.CancelledError:
            pass  # the event loop is closing with the connection still open

    def close(self):
        self.server.close()


class Target:
    """How to reach one server over one transport, with what the client sent on the wire."""

    def __init__(self, transport, base, db, server, binding=()):
        self.transport = transport
        self.base = base
        self.db = db
        self.server = server
        self.binding = list(binding)
        self.log = None
        self.tap = None

    async def open(self, mode, **client_args):
        if self.transport == "stdio":
            fd, self.log = tempfile.mkstemp(prefix="clawboo-tap-", suffix=".log")
            os.close(fd)
            args = [TAP, self.log, CLAWBOO, "mcp", self.server, "--db", self.db, *self.binding]
            return Client(StdioServerParameters(command="node", args=args), mode=mode, **client_args)
        query = ""
        if self.binding:
            flags = dict(zip(self.binding[::2], self.binding[1::2]))
            config = rest(
                self.base,
                "GET",
                f"/api/mcp/config?server={self.server}&scopeTeamId={flags['--team']}"
                f"&scopeAgentId={flags['--agent']}",
            )
            url = config["config"]["structured"][f"clawboo-{self.server}"]["url"]
            query = url[url.index("?"):]
        port = int(self.base.rsplit(":", 1)[1])
        self.tap = HttpTap(port)
        tap_port = await self.tap.start()
        return Client(f"http://127.0.0.1:{tap_port}/api/mcp/{self.server}{query}", mode=mode, **client_args)

    def client_bytes(self):
        if self.tap is not None:
            self.tap.close()
            return bytes(self.tap.sent)
        with open(self.log, "rb") as f:
            return b"".join(line[2:] for line in f if line.startswith(b"> "))


def text_of(result):
    return json.loads(result.content[0].text)


async def modes(transport, base, db):
    """Both modes on one transport: the protocol reached, the tools, and the wire."""
    legacy = Target(transport, base, db, "tasks")
    async with await legacy.open("legacy") as client:
        legacy_tools = sorted(t.name for t in (await client.list_tools()).tools)
    for mode in (MODERN, "auto"):
        target = Target(transport, base, db, "tasks")
        label = f"{transport}, mode={mode}"
        async with await target.open(mode) as client:
            check(f"{label}: speaks {MODERN}", client.protocol_version == MODERN, client.protocol_version)
            if mode == "auto":
                name = client.server_info.name if client.server_info else None
                check(f"{label}: server/discover names clawboo-tasks", name == "clawboo-tasks", name)
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            check(f"{label}: the same tools as an initialize session", tools == legacy_tools, tools)
            created = text_of(await client.call_tool("create_task", {"title": f"{label} work", "teamId": "py26"}))
            check(f"{label}: create_task", created["task"]["status"] == "todo", created)
            bad = await client.call_tool("claim_task", {"taskId": "nope", "assigneeAgentId": "py"})
            meta = bad.meta or {}
            check(
                f"{label}: a tool-error carries its _meta.error code",
                bad.is_error and meta.get("error") == "not_found",
                bad,
            )
        sent = target.client_bytes()
        check(f"{label}: the wire carries the client's requests", b"tools/call" in sent, sent[:200])
        check(f"{label}: no initialize on the wire", not INITIALIZE.search(sent), sent[:400])
        if mode == "auto":
            check(f"{label}: the client probed server/discover", bool(DISCOVER.search(sent)), sent[:400])


async def parity(transport, base, db):
    """What a session does, at 2026-07-28: binding, piggyback, long-poll, approvals."""
    team, agent = f"team-{transport}", f"agent-{transport}"
    bound = Target(transport, base, db, "tasks", ["--team", team, "--agent", agent])
    label = f"{transport}, {MODERN}"
    async with await bound.open(MODERN) as client:
        created = text_of(await client.call_tool("create_task", {"title": "bound work", "teamId": "elsewhere"}))
        task = created["task"]
        check(f"{label}: a bound create lands in the bound team", task["teamId"] == team, task)
        claimed = text_of(await client.call_tool("claim_task", {"taskId": task["id"], "assigneeAgentId": "someone"}))
        check(f"{label}: a bound claim is the bound agent's", claimed["task"]["assigneeAgentId"] == agent, claimed)
        rest(base, "POST", f"/api/board/{task['id']}/comments", {"body": "operator says hi"})
        listed = await client.call_tool("list_tasks", {"teamId": "elsewhere"})
        teams = {t["teamId"] for t in text_of(listed)["tasks"]}
        check(f"{label}: list_tasks is forced to the bound team", teams == {team}, teams)
        piggyback = [c.text for c in listed.content[1:]]
        check(
            f"{label}: the inbox piggyback rides on the next result",
            len(piggyback) == 1 and "[team updates" in piggyback[0] and "operator says hi" in piggyback[0],
            piggyback,
        )

    room = f"room-{transport}"
    chat = Target(transport, base, db, "teamchat")
    async with await chat.open(MODERN) as client:
        posted = asyncio.Event()

        async def on_wait(progress, total, message):
            # The long-poll announces its wait: only now can a post prove it wakes.
            if not posted.is_set():
                posted.set()
                await asyncio.to_thread(
                    rest, base, "POST", "/api/team-chat", {"text": "wake up", "teamId": room}
                )

        result = await client.call_tool(
            "team_chat_subscribe",
            {"teamId": room, "authorAgentId": "listener", "waitMs": 30000},
            progress_callback=on_wait,
        )
        posts = text_of(result)["posts"]
        check(
            f"{label}: a waitMs long-poll announces its wait and wakes on a post",
            posted.is_set() and [p["wrapped"].splitlines()[-1] for p in posts] == ["| wake up"],
            posts,
        )

    tools = Target(transport, base, db, "tools")
    async with await tools.open(MODERN) as client:
        heard = []

        async def on_progress(progress, total, message):
            # The first progress says the call waits for a person: answer as one would.
            heard.append(message)
            if len(heard) == 1:
                pending = await asyncio.to_thread(rest, base, "GET", "/api/tools/approvals")
                ids = [a["id"] for a in pending["approvals"]]
                for approval in ids:
                    await asyncio.to_thread(
                        rest,
                        base,
                        "POST",
                        f"/api/tools/approvals/{approval}/resolve",
                        {"decision": "allow_once"},
                    )

        result = await client.call_tool("delete_path", {"path": f"/srv/{transport}"}, progress_callback=on_progress)
        check(
            f"{label}: an approval wait sends progress and the REST decision lets the call run",
            heard and not result.is_error,
            (heard, result),
        )

    # A client with an elicitation callback is asked in the call's own rounds: the first
    # answer carries the form, the SDK retries with the person's answer and requestState.
    asked = []

    async def answer_form(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    eliciting = Target(transport, base, db, "tools")
    async with await eliciting.open(MODERN, elicitation_callback=answer_form) as client:
        result = await client.call_tool("delete_path", {"path": f"/srv/{transport}/form"})
    approval = (result.meta or {}).get("approvalId")
    approvals = rest(base, "GET", "/api/tools/approvals?status=all")["approvals"]
    decided = [a["decidedBy"] for a in approvals if a["id"] == approval]
    audit = rest(base, "GET", "/api/tools/audit?toolName=delete_path")["audit"]
    audited = [r["decidedBy"] for r in audit if r["approvalId"] == approval and r["phase"] == "before"]
    sent = eliciting.client_bytes()
    check(
        f"{label}: an approval is answered in the client's form through the call's rounds",
        len(asked) == 1 and not result.is_error and decided == ["elicitation"] and audited == ["elicitation"],
        (asked, result, decided, audited),
    )
    check(f"{label}: the retry carried requestState", b"requestState" in sent, sent[-400:])


async def main_async(base, db):
    for transport in ("stdio", "http"):
        await modes(transport, base, db)
        await parity(transport, base, db)


def main():
    db = os.path.join(tempfile.mkdtemp(prefix="clawboo-py26-"), "clawboo.db")
    proc, base = start_server(db)
    try:
        try:
            asyncio.run(main_async(base, db))
        except Exception as e:  # a client crash is a failed check, with the reason
            check("client run completed", False, repr(e))
    finally:
        proc.kill()
        proc.wait()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
