// A scripted model on loopback for the real agent CLIs: the streamed Messages API Claude Code
// sends (`POST /v1/messages`, SSE) and the streamed Responses API Codex sends
// (`POST /v1/responses`, SSE). It plays what a model does in one agent turn on the Tasks
// server: (optionally find the tools through Claude Code's ToolSearch,) try to claim a task
// another agent holds, read the refusal, claim the next ready task, comment on it (and find
// the team update the test caused meanwhile on that result), move it to done, and answer
// with a final text.
//
// It is stateless per request, as a model is: each answer is chosen from the conversation
// the CLI sends (the tool calls made so far and their results), and every result is read
// and checked before the next call (ids and the claim token come from those results, never
// from the test). Whatever is not as expected ends the turn with a final text naming it,
// and is kept in `failures` for the test to assert on.
import { appendFileSync } from "node:fs";
import http from "node:http";

/// The tool names, as the CLIs name an MCP server's tools (`mcp__<server>__<tool>`).
export const TOOL = (tool) => `mcp__clawboo-tasks__${tool}`;

/// The Tasks tools the turn calls, by their MCP names.
export const WORK_TOOLS = ["claim_task", "claim_next", "add_comment", "update_task_status"];

/// The keyword searches a model makes through Claude Code's ToolSearch, and the Tasks tools
/// each must find.
const SEARCHES = [
  ["claim a task", ["claim_task", "claim_next"]],
  ["comment on a task", ["add_comment"]],
  ["set task status done", ["update_task_status"]],
];

/// What the model comments on the task it finished.
export const COMMENT = "Scripted model: done, the steps are in the log.";

/// The final text of a turn that went as scripted.
export const FINAL = "All done: one task finished.";

/// Start the model. `toolSearch`: find the Tasks tools through Claude Code's ToolSearch
/// first (only when the CLI defers them). `beforeComment(task)`: run before the comment is
/// sent; the text it resolves to must come back piggybacked on the comment's result
/// (the inbox's team updates). Resolves to `{url, requests, steps, failures,
/// close}`: every request body, the tool results read at each step, and what went wrong.
export function startScriptedModel({ toolSearch = false, beforeComment } = {}) {
  const state = { requests: [], steps: [], failures: [] };
  // Before the comment, the test's move on the board (awaited, so no race): what it
  // returns is the update the model must then find piggybacked on add_comment's result.
  const answer = async (turn) => {
    const move = turn();
    if (move.tool?.endsWith("add_comment") && beforeComment && state.expectUpdate === undefined) {
      try {
        state.expectUpdate = await beforeComment(state.claimed);
      } catch (e) {
        state.failures.push(`beforeComment: ${e.message}`);
        return { text: `SCRIPT FAILURE: beforeComment: ${e.message}` };
      }
    }
    return move;
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch (e) {
        state.failures.push(`${req.method} ${req.url}: not JSON (${e.message})`);
        res.writeHead(400, { "content-type": "application/json" }).end("{}");
        return;
      }
      state.requests.push({ url: req.url, body });
      // Every request, one JSON line each, when asked: what a CLI sends, to read by hand.
      if (process.env.CLAWBOO_SCRIPTED_MODEL_LOG) {
        appendFileSync(process.env.CLAWBOO_SCRIPTED_MODEL_LOG, `${JSON.stringify({ url: req.url, body })}\n`);
      }
      const path = req.url.split("?")[0];
      if (req.method === "POST" && path === "/v1/messages") {
        answer(() => anthropicTurn(body, toolSearch, state)).then((move) => streamMessages(res, move));
      } else if (req.method === "POST" && path === "/v1/responses") {
        answer(() => responsesTurn(body, state)).then((move) => streamResponses(res, move));
      } else {
        state.failures.push(`unexpected request ${req.method} ${req.url}`);
        res.writeHead(404, { "content-type": "application/json" }).end("{}");
      }
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve(
        Object.assign(state, {
          url: `http://127.0.0.1:${server.address().port}`,
          close: () => new Promise((done) => server.close(done)),
        }),
      );
    });
  });
}

/// Keep a tool result on its call: its text blocks apart (our answer is the first, the
/// piggybacked team updates a second) and all its text together.
function setResult(call, content) {
  const blocks = typeof content === "string" ? [content] : Array.isArray(content) ? content : [content ?? ""];
  call.blocks = blocks.map((b) => resultText([b]));
  call.text = call.blocks.join("\n");
}

/// The text of a tool result's content (a string, or text blocks), for either API.
function resultText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return JSON.stringify(content ?? "");
  return content
    .map((b) => (typeof b === "string" ? b : b.text ?? JSON.stringify(b)))
    .join("\n");
}

/// The task id the user's prompt names as the one to try first (`task <id>`).
function promptTaskId(text) {
  return /try task ([0-9a-zA-Z_-]+) first/.exec(text)?.[1];
}

/// The next move of the scripted turn, given the calls made so far (each with its result
/// text and error flag) and what the CLI offers. Returns `{tool, input}` or `{text}`.
function nextMove({ calls, prompt, offered, deferred, toolSearch, state }) {
  const fail = (why) => {
    state.failures.push(why);
    return { text: `SCRIPT FAILURE: ${why}` };
  };
  const wanted = WORK_TOOLS;
  const searches = calls.filter((c) => c.tool === "ToolSearch");
  const work = calls.filter((c) => c.tool !== "ToolSearch");
  // Find the tools first when the CLI has deferred them (named in its text, not offered):
  // by keywords, as a model searches for what it wants to do, so our names and
  // descriptions must rank.
  if (toolSearch && work.length === 0) {
    if (searches.length === 0 && !deferred(TOOL("claim_next"))) return fail("the Tasks tools are not among the deferred tools");
    const done = searches.length;
    if (done > 0) {
      const [query, expected] = SEARCHES[done - 1];
      const found = searches[done - 1].text;
      state.steps.push({ step: `ToolSearch "${query}"`, result: found });
      const missing = expected.filter((t) => !found.includes(TOOL(t)));
      if (missing.length > 0) return fail(`ToolSearch "${query}" did not find ${missing.join(", ")}: ${found}`);
    }
    if (done < SEARCHES.length) return { tool: "ToolSearch", input: { query: SEARCHES[done][0] } };
  }
  for (const name of wanted) {
    if (!offered(name)) return fail(`${name} is not offered with its schema (offered: ${offered.names.join(", ")})`);
  }
  const last = work.at(-1);
  switch (work.length) {
    case 0: {
      const taskId = promptTaskId(prompt);
      if (!taskId) return fail("the prompt names no task to try first");
      return { tool: "claim_task", input: { taskId, assigneeAgentId: "whoever" } };
    }
    case 1: {
      state.steps.push({ step: "claim_task", isError: last.isError, result: last.text });
      if (!last.isError) return fail(`claiming a held task succeeded: ${last.text}`);
      if (!/do not retry/.test(last.text)) return fail(`the refusal does not say not to retry: ${last.text}`);
      return { tool: "claim_next", input: {} };
    }
    case 2: {
      state.steps.push({ step: "claim_next", isError: last.isError, result: last.text });
      if (last.isError) return fail(`claim_next failed: ${last.text}`);
      let task;
      try {
        task = JSON.parse(last.blocks[0]).task;
      } catch {
        return fail(`claim_next's result is not JSON: ${last.text}`);
      }
      if (!task?.id || typeof task.claimToken !== "number") return fail(`claim_next gave no task with a claimToken: ${last.text}`);
      state.claimed = task;
      return { tool: "add_comment", input: { taskId: task.id, body: COMMENT, claimToken: task.claimToken } };
    }
    case 3: {
      state.steps.push({ step: "add_comment", isError: last.isError, result: last.text });
      if (last.isError) return fail(`add_comment failed: ${last.text}`);
      const task = claimedTask(work);
      return { tool: "update_task_status", input: { taskId: task.id, status: "done", claimToken: task.claimToken } };
    }
    case 4: {
      state.steps.push({ step: "update_task_status", isError: last.isError, result: last.text });
      if (state.expectUpdate !== undefined) {
        const commented = work[2].text;
        if (!commented.includes("[team updates — delivered with this tool result]") || !commented.includes(state.expectUpdate)) {
          return fail(`add_comment's result carries no team update naming ${JSON.stringify(state.expectUpdate)}: ${commented}`);
        }
      }
      if (last.isError) return fail(`update_task_status failed: ${last.text}`);
      const status = safeJson(last.blocks[0])?.task?.status;
      if (status !== "done") return fail(`the task is not done after update_task_status: ${last.text}`);
      return { text: FINAL };
    }
    default:
      return fail(`the CLI asked again after the turn ended (${work.length} calls)`);
  }
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/// The task claim_next returned, read back from the conversation (the model is stateless).
function claimedTask(work) {
  return safeJson(work[1].blocks[0])?.task;
}

// --- Claude Code: the Messages API ------------------------------------------------------

function anthropicTurn(body, toolSearch, state) {
  const calls = [];
  const byId = new Map();
  const found = new Set();
  let prompt = "";
  const short = (name) => (name.startsWith(TOOL("")) ? name.slice(TOOL("").length) : name);
  for (const message of body.messages ?? []) {
    const blocks = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content ?? [];
    for (const block of blocks) {
      if (message.role === "assistant" && block.type === "tool_use") {
        const call = { id: block.id, tool: short(block.name), input: block.input };
        calls.push(call);
        byId.set(block.id, call);
      } else if (message.role === "user" && block.type === "tool_result") {
        const call = byId.get(block.tool_use_id);
        if (call) {
          setResult(call, block.content);
          call.isError = block.is_error === true;
        }
        // What ToolSearch found: the API loads these deferred schemas.
        for (const ref of Array.isArray(block.content) ? block.content : []) {
          if (ref.type === "tool_reference") found.add(ref.tool_name);
        }
      } else if (message.role === "user" && block.type === "text") {
        prompt += `${block.text}\n`;
      }
    }
  }
  // Callable: offered with a schema, and when deferred, found by a ToolSearch already.
  const tools = (body.tools ?? []).filter((t) => t.input_schema && (!t.defer_loading || found.has(t.name)));
  const offered = (name) => tools.some((t) => t.name === TOOL(name));
  offered.names = tools.map((t) => t.name);
  const text = JSON.stringify(body.system ?? "") + JSON.stringify(body.messages ?? []);
  const deferred = (name) => text.includes(name);
  const move = nextMove({ calls, prompt, offered, deferred, toolSearch, state });
  if (move.tool && move.tool !== "ToolSearch") move.tool = TOOL(move.tool);
  return move;
}

let ids = 0;

function streamMessages(res, move) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const usage = { input_tokens: 1, output_tokens: 1 };
  send("message_start", {
    message: { id: `msg_${++ids}`, type: "message", role: "assistant", model: "scripted", content: [], stop_reason: null, stop_sequence: null, usage },
  });
  if (move.tool) {
    send("content_block_start", { index: 0, content_block: { type: "tool_use", id: `toolu_${++ids}`, name: move.tool, input: {} } });
    send("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(move.input) } });
  } else {
    send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    send("content_block_delta", { index: 0, delta: { type: "text_delta", text: move.text } });
  }
  send("content_block_stop", { index: 0 });
  send("message_delta", { delta: { stop_reason: move.tool ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } });
  send("message_stop", {});
  res.end();
}

// --- Codex: the Responses API ------------------------------------------------------------

/// Codex offers an MCP server's tools as a namespace of functions (`mcp__clawboo_tasks`).
export const CODEX_NAMESPACE = "mcp__clawboo_tasks";

function responsesTurn(body, state) {
  const calls = [];
  const byId = new Map();
  let prompt = "";
  for (const item of body.input ?? []) {
    if (item.type === "function_call") {
      const tool = item.namespace === CODEX_NAMESPACE ? item.name : `${item.namespace ?? ""}/${item.name}`;
      const call = { id: item.call_id, tool, input: safeJson(item.arguments) };
      calls.push(call);
      byId.set(item.call_id, call);
    } else if (item.type === "function_call_output") {
      const call = byId.get(item.call_id);
      if (call) {
        // Codex sends a tool's text blocks after a "Wall time: …\nOutput:" block, and no
        // error flag: as a model would, a result that is not our JSON answer is a refusal.
        const blocks = Array.isArray(item.output) ? item.output : [{ text: String(item.output) }];
        setResult(call, blocks.filter((b) => !/^Wall time: .*\nOutput:$/s.test(b.text ?? "")));
        call.isError = safeJson(call.blocks[0]) === undefined;
      }
    } else if (item.type === "message" && item.role === "user") {
      prompt += `${resultText(item.content)}\n`;
    }
  }
  const namespace = (body.tools ?? []).find((t) => t.type === "namespace" && t.name === CODEX_NAMESPACE);
  const names = (namespace?.tools ?? []).filter((t) => t.type === "function" && t.parameters).map((t) => t.name);
  const offered = (name) => names.includes(name);
  offered.names = (body.tools ?? []).map((t) => t.name ?? t.type);
  return nextMove({ calls, prompt, offered, deferred: () => true, toolSearch: false, state });
}

function streamResponses(res, move) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const id = `resp_${++ids}`;
  send("response.created", { response: { id } });
  const item = move.tool
    ? { type: "function_call", id: `fc_${++ids}`, call_id: `call_${ids}`, namespace: CODEX_NAMESPACE, name: move.tool, arguments: JSON.stringify(move.input) }
    : { type: "message", role: "assistant", id: `msg_${++ids}`, content: [{ type: "output_text", text: move.text, annotations: [] }] };
  send("response.output_item.done", { output_index: 0, item });
  send("response.completed", {
    response: { id, usage: { input_tokens: 1, input_tokens_details: null, output_tokens: 1, output_tokens_details: null, total_tokens: 2 } },
  });
  res.end();
}
