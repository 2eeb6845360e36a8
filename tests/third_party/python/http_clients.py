"""The Python `mcp` package against the real `clawboo serve` over Streamable HTTP.

Works with mcp 1.x (`streamablehttp_client` + `ClientSession`) and 2.x (`mcp.Client` with
`mode="legacy"`): the initialize family (2024-11-05 … 2025-11-25) and its sessions. The
2.x default, the initialize-less 2026-07-28 protocol, is protocol_2026.py's.
Prints `PASS <check>` / `FAIL <check>: <detail>` lines and exits non-zero on any failure.
Needs CLAWBOO_BIN_DIR (the folder holding the built `clawboo`).
"""

import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

VERSION = importlib.metadata.version("mcp")
MAJOR = int(VERSION.split(".")[0])
failures = 0


def check(name, ok, detail=""):
    global failures
    label = f"mcp {VERSION}: {name}"
    if ok:
        print(f"PASS {label}", flush=True)
    else:
        failures += 1
        print(f"FAIL {label}: {detail}", flush=True)


def start_server():
    db = os.path.join(tempfile.mkdtemp(prefix="clawboo-py-"), "clawboo.db")
    env = {k: v for k, v in os.environ.items() if k != "STUDIO_ACCESS_TOKEN"}
    proc = subprocess.Popen(
        [os.path.join(os.environ["CLAWBOO_BIN_DIR"], "clawboo"), "serve", "--bind", "127.0.0.1:0", "--db", db],
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


def signed_url(base, team, agent, server="tasks"):
    with urllib.request.urlopen(f"{base}/api/mcp/config?server={server}&scopeTeamId={team}&scopeAgentId={agent}") as r:
        return json.load(r)["config"]["structured"][f"clawboo-{server}"]["url"]


def rest(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def payload(result):
    return json.loads(result.content[0].text)


async def drive(session_factory, base):
    """`session_factory(url)` is an async context manager yielding an object with
    list_tools / call_tool and the negotiated server name and protocol version."""
    async with session_factory(f"{base}/api/mcp/tasks") as (client, server_name, version):
        check("serverInfo.name is clawboo-tasks", server_name == "clawboo-tasks", server_name)
        check("negotiated a supported protocol version",
              version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"), version)
        tools = (await client.list_tools()).tools
        check("tools/list returns the 13 task tools", len(tools) == 13, [t.name for t in tools])
        created = payload(await client.call_tool("create_task", {"title": "from python", "teamId": "py"}))
        check("tools/call create_task", created["task"]["status"] == "todo", created)
        listed = payload(await client.call_tool("list_tasks", {"teamId": "py"}))
        check("tools/call list_tasks sees the new task",
              [t["id"] for t in listed["tasks"]] == [created["task"]["id"]], listed)
        bad = await client.call_tool("claim_task", {"taskId": "nope", "assigneeAgentId": "py"})
        is_error = getattr(bad, "isError", None)
        if is_error is None:
            is_error = getattr(bad, "is_error", None)
        check("tool-errors arrive as isError results", is_error is True, bad)

    async with session_factory(f"{base}/api/mcp/teamchat") as (client, server_name, _):
        names = sorted(t.name for t in (await client.list_tools()).tools)
        check("teamchat lists its tools", names == ["team_chat_post", "team_chat_subscribe"], names)

    url = signed_url(base, "green", "py-agent")
    async with session_factory(url) as (client, _, _):
        payload(await client.call_tool("create_task", {"title": "green work", "teamId": "py"}))
        listed = payload(await client.call_tool("list_tasks", {}))
        teams = {t["teamId"] for t in listed["tasks"]}
        check("a signed URL binds the session to its team", teams == {"green"}, teams)


async def elicitation(session_factory, base):
    """A client that declares elicitation decides tool approvals in its own window: allow
    once, deny, cancel (the approval then waits for REST, which decides it); the form offers
    no "allow always" and an answer of it allows that call once and remembers nothing (the
    next call is asked again); the operator's list says who decided each."""
    from mcp import types

    forms = []
    answers = iter(["allow_once", "deny", None, "allow_always", "deny"])

    def allow_pending():
        for approval in rest(base, "GET", "/api/tools/approvals")["approvals"]:
            rest(base, "POST", f"/api/tools/approvals/{approval['id']}/resolve", {"decision": "allow_once"})

    async def answer(_context, params):
        forms.append(params)
        decision = next(answers)
        if decision is None:
            # Cancelled here: the approval stays pending, and an operator answers it.
            asyncio.get_running_loop().run_in_executor(None, allow_pending)
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content={"decision": decision})

    def failed(result):
        is_error = getattr(result, "isError", None)
        return getattr(result, "is_error", None) if is_error is None else is_error

    url = signed_url(base, "green", "py-asker", server="tools")
    async with session_factory(url, answer) as (client, _, _):
        outcomes = []
        for path in ("once", "denied", "cancelled", "always", "asked-again"):
            outcomes.append(failed(await client.call_tool("delete_path", {"path": f"/srv/{path}"})))
        check(
            "approvals answered by elicitation: allow once, deny, cancel, allow always (once)",
            outcomes == [False, True, False, False, True] and len(forms) == 5,
            (outcomes, len(forms)),
        )
        schema = (getattr(forms[0], "requestedSchema", None) or forms[0].requested_schema) if forms else {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True)
        choices = [c["const"] for c in schema.get("properties", {}).get("decision", {}).get("oneOf", [])]
        check("the form offers allow once and deny only", choices == ["allow_once", "deny"], schema)
    deciders = [a["decidedBy"] for a in rest(base, "GET", "/api/tools/approvals?status=all")["approvals"]]
    check(
        "each approval records who decided it",
        deciders == ["elicitation", "elicitation", "api", "elicitation", "elicitation"],
        deciders,
    )


def v1_factory():
    from contextlib import asynccontextmanager

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    @asynccontextmanager
    async def factory(url, elicitation_callback=None):
        async with streamablehttp_client(url) as (read, write, _session_id):
            async with ClientSession(read, write, elicitation_callback=elicitation_callback) as session:
                init = await session.initialize()
                yield session, init.serverInfo.name, str(init.protocolVersion)

    return factory


def v2_factory():
    from contextlib import asynccontextmanager

    from mcp import Client

    @asynccontextmanager
    async def factory(url, elicitation_callback=None):
        async with Client(url, mode="legacy", elicitation_callback=elicitation_callback) as client:
            yield client, client.server_info.name, str(client.protocol_version)

    return factory


def main():
    proc, base = start_server()
    try:
        factory = v1_factory() if MAJOR < 2 else v2_factory()
        try:
            asyncio.run(drive(factory, base))
            asyncio.run(elicitation(factory, base))
        except Exception as e:  # a client crash is a failed check, with the reason
            check("client run completed", False, repr(e))
    finally:
        proc.kill()
        proc.wait()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
