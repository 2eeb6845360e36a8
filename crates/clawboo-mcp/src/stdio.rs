//! Serve an MCP server over stdio: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp's own stdio transport ignores non-JSON lines silently, stops serving on a stray
//! notification before a lifecycle, and errors when stdin closes before one. This module
//! reads the lines itself and hands rmcp only what it should see, through a [`Transport`]
//! of its own: a malformed line gets a -32700 parse error; until a lifecycle is chosen
//! (an `initialize`, or a 2026-07-28 request carrying the protocol `_meta`) rmcp sees only
//! what can choose one or is answered before one (`server/discover`, `ping` with that
//! `_meta`), any other request gets a JSON-RPC error at once and notifications and
//! responses are dropped; a
//! request rmcp could not decode (params of the wrong shape, an id no `i64` holds) gets its
//! error here, with its id (rmcp would answer it without one, or stop serving after such an
//! `initialize`), and EOF always ends the process cleanly. Every line rmcp sends and every error this module
//! writes goes through one writer task, so lines never interleave; the writer joins
//! queued lines into one write and flushes only when the queue is empty.

use std::io;

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, InitializeRequestParams, JsonRpcMessage,
    ProtocolVersion, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::ServerInitializeError;
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::protocol::plain_tools_call;

/// The longest accepted JSON-RPC line (bytes); a longer one is answered with a parse error.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC code for a request sent before `initialize`.
const NOT_INITIALIZED: i64 = -32002;

/// The answer to a request sent before any lifecycle was chosen.
const NOT_INITIALIZED_TEXT: &str = "Server not initialized: send an initialize request first, or (protocol 2026-07-28) carry io.modelcontextprotocol/protocolVersion and clientCapabilities in the request's _meta";

/// The answer to a request whose id rmcp cannot hold.
const INVALID_ID: &str = "Invalid Request: id must be a string or a signed 64-bit integer";

/// Queued lines are joined into one write up to this many bytes.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Serve `handler` on this process's stdin/stdout until stdin closes.
pub async fn serve_stdio<H: ServerHandler>(handler: H) -> io::Result<()> {
    // Non-blocking pipes when stdin/stdout are FIFOs (as MCP clients launch us): reads and
    // writes then run on the reactor instead of a blocking-pool hand-off per message.
    let (input, output) = rmcp::transport::io::stdio_pipes();
    serve_lines(handler, input, output).await
}

/// Serve `handler` on any newline-delimited byte streams (stdio, pipes, duplex in tests).
pub async fn serve_lines<H, R, W>(handler: H, input: R, output: W) -> io::Result<()>
where
    H: ServerHandler,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_lines(out_rx, output));
    let out = Outbound(out_tx);
    let mut inbound = Inbound::new(input, out.clone());
    let supported = handler.supported_protocol_versions();
    // Before a lifecycle: answer everything here until a message rmcp should see.
    let first = loop {
        match inbound.next_message().await {
            None => break None,
            Some((message, kind)) => match gate(&message, &kind, &out, &supported) {
                Gate::Deliver { starts } => break Some((message, starts)),
                Gate::Held => {}
            },
        }
    };
    if let Some((first, started)) = first {
        let (give_back, given_back) = oneshot::channel();
        let transport = LineTransport {
            inbound: Some(inbound),
            first: Some(first),
            started,
            supported: supported.into_owned(),
            out: out.clone(),
            give_back: Some(give_back),
        };
        match handler.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            // A client that only probed (`server/discover`) and left.
            Err(ServerInitializeError::ConnectionClosed(_)) => {
                tracing::debug!("input ended before a lifecycle was chosen");
            }
            Err(e) => tracing::warn!(error = %e, "MCP session ended during initialize"),
        }
        // The transport hands the reader back when rmcp drops it.
        inbound = match given_back.await {
            Ok(inbound) => inbound,
            Err(_) => return Err(io::Error::other("the MCP session lost its input")),
        };
        // A session that ended before EOF (a failed handshake) leaves the rest of the
        // input unanswered, as a closed session would; malformed lines still get errors.
        while inbound.next_message().await.is_some() {
            tracing::warn!("MCP session is gone; dropping a message");
        }
    }
    let failure = inbound.failure.take();
    drop(inbound);
    drop(out);
    writer.await.map_err(io::Error::other)??;
    failure.map_or(Ok(()), Err)
}

/// The one way out: every line goes to the writer task in order.
#[derive(Clone)]
struct Outbound(mpsc::UnboundedSender<Vec<u8>>);

impl Outbound {
    fn line(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        // Fails only once the writer is gone (stdout closed): nothing left to tell.
        let _ = self.0.send(line);
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        let error =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        self.line(error.to_string().into_bytes());
    }
}

/// What one input line turned out to be, once parsed and classified.
enum Kind {
    Initialize,
    Request,
    Notification,
    Response,
}

/// Result of reading one line.
enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// The input side: bounded line reading that survives cancellation (rmcp polls
/// [`Transport::receive`] inside a `select!`), parsing and framing errors.
struct Inbound<R> {
    input: BufReader<R>,
    /// The line read so far; kept across cancelled reads.
    line: Vec<u8>,
    /// Dropping the rest of an over-long line up to its newline.
    discarding: bool,
    /// The input ended (or failed); no more reads.
    ended: bool,
    /// A read error, reported when the server returns.
    failure: Option<io::Error>,
    out: Outbound,
}

impl<R: AsyncRead + Unpin> Inbound<R> {
    fn new(input: R, out: Outbound) -> Self {
        Inbound {
            input: BufReader::new(input),
            line: Vec::new(),
            discarding: false,
            ended: false,
            failure: None,
            out,
        }
    }

    /// The next well-formed JSON-RPC message and its kind, answering malformed lines on the
    /// way; `None` at the end of input. Cancel-safe: the only await is inside
    /// [`Inbound::read_line`], which keeps a partial line in `self`.
    async fn next_message(&mut self) -> Option<(Value, Kind)> {
        loop {
            match self.read_line().await {
                LineRead::Eof => return None,
                LineRead::TooLong => {
                    self.out.error(
                        &Value::Null,
                        -32700,
                        "Parse error: line exceeds the 16 MiB limit",
                    );
                    continue;
                }
                LineRead::Line => {}
            }
            let parsed = if self.line.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(serde_json::from_slice::<Value>(&self.line))
            };
            self.line.clear();
            let message = match parsed {
                None => continue,
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    self.out
                        .error(&Value::Null, -32700, &format!("Parse error: {e}"));
                    continue;
                }
            };
            match classify(&message) {
                Ok(kind) => return Some((message, kind)),
                Err(why) => {
                    self.out.error(
                        &scalar_id(&message),
                        -32600,
                        &format!("Invalid Request: {why}"),
                    );
                }
            }
        }
    }

    /// Read one line into `self.line` without letting it grow past [`MAX_LINE_BYTES`]
    /// (plus its newline). An over-long line is reported once and dropped up to its
    /// newline. A last line without a newline still counts as a line.
    async fn read_line(&mut self) -> LineRead {
        if self.ended {
            return LineRead::Eof;
        }
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(e) => {
                    self.ended = true;
                    self.failure = Some(e);
                    return LineRead::Eof;
                }
            };
            if available.is_empty() {
                self.ended = true;
                self.discarding = false;
                return if self.line.is_empty() {
                    LineRead::Eof
                } else {
                    LineRead::Line
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let content = newline.unwrap_or(available.len());
            let take = newline.map_or(available.len(), |i| i + 1);
            let outcome = if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
                None
            } else if self.line.len() + content > MAX_LINE_BYTES {
                self.line.clear();
                self.discarding = newline.is_none();
                Some(LineRead::TooLong)
            } else {
                self.line.extend_from_slice(&available[..take]);
                newline.map(|_| LineRead::Line)
            };
            self.input.consume(take);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }
}

/// Classify a parsed JSON-RPC message by shape, or say why it is not a valid one.
fn classify(message: &Value) -> Result<Kind, &'static str> {
    let Some(object) = message.as_object() else {
        return Err(if message.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a JSON-RPC message must be an object"
        });
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("jsonrpc must be \"2.0\"");
    }
    match (object.get("method"), object.get("id")) {
        (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
            Ok(if method == "initialize" {
                Kind::Initialize
            } else {
                Kind::Request
            })
        }
        (Some(Value::String(_)), None) => Ok(Kind::Notification),
        (Some(_), _) => Err("method must be a string and id a string or number"),
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Kind::Response)
        }
        (None, _) => Err("missing method"),
    }
}

/// What to do with a message that arrives before a lifecycle is chosen.
enum Gate {
    /// Hand it to rmcp; `starts` when it chooses the lifecycle (rmcp then serves it).
    Deliver { starts: bool },
    /// Answered or dropped here.
    Held,
}

/// Decide, as rmcp's own pre-lifecycle loop would, whether `message` reaches rmcp before a
/// lifecycle exists: a decodable `initialize` (which starts one); a request whose `_meta`
/// carries the 2026-07-28 protocol fields (`server/discover` and `ping` are answered and
/// leave the choice open; any other starts a session at a supported version, an
/// unsupported one being refused by rmcp with the supported list). Other requests get an
/// error here; notifications and responses are dropped.
fn gate(message: &Value, kind: &Kind, out: &Outbound, supported: &[ProtocolVersion]) -> Gate {
    match kind {
        Kind::Initialize => match initialize_error(message) {
            None => Gate::Deliver { starts: true },
            Some((code, why)) => {
                out.error(&scalar_id(message), code, &why);
                Gate::Held
            }
        },
        Kind::Request => {
            let inline = match ClientJsonRpcMessage::deserialize(message) {
                Ok(JsonRpcMessage::Request(request)) => {
                    let meta = request.request.get_meta();
                    let complete = meta
                        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                        .is_empty();
                    meta.protocol_version().filter(|_| complete).map(|version| {
                        let probe = matches!(
                            request.request,
                            ClientRequest::DiscoverRequest(_) | ClientRequest::PingRequest(_)
                        );
                        !probe && supported.contains(&version)
                    })
                }
                _ => None,
            };
            match inline {
                Some(starts) => Gate::Deliver { starts },
                None => {
                    let id = message.get("id").cloned().unwrap_or(Value::Null);
                    out.error(&id, NOT_INITIALIZED, NOT_INITIALIZED_TEXT);
                    Gate::Held
                }
            }
        }
        Kind::Notification | Kind::Response => {
            tracing::debug!("dropping a notification or response sent before a lifecycle");
            Gate::Held
        }
    }
}

/// rmcp's view of the session: messages straight from [`Inbound`], answers straight to
/// the writer, with no copy of the stream in between.
struct LineTransport<R> {
    /// `None` only while being handed back on drop.
    inbound: Option<Inbound<R>>,
    /// The message that started rmcp, delivered first.
    first: Option<Value>,
    /// A lifecycle has been chosen; until then messages pass through [`gate`].
    started: bool,
    supported: Vec<ProtocolVersion>,
    out: Outbound,
    give_back: Option<oneshot::Sender<Inbound<R>>>,
}

impl<R> LineTransport<R> {
    /// Turn a well-formed JSON-RPC message into rmcp's type (moved, not copied). A request
    /// rmcp cannot read is answered here, with its id (rmcp would answer it without one); a
    /// notification or response it cannot read is dropped.
    fn to_rmcp(&self, message: Value) -> Option<ClientJsonRpcMessage> {
        let message = match plain_tools_call(message) {
            Ok(call) => return Some(call),
            Err(message) => message,
        };
        let is_request = message.get("method").is_some() && message.get("id").is_some();
        let id = scalar_id(&message);
        let id_decodes = message
            .get("id")
            .is_none_or(|id| RequestId::deserialize(id).is_ok());
        match serde_json::from_value::<ClientJsonRpcMessage>(message) {
            Ok(message) => Some(message),
            Err(e) if is_request => {
                if id_decodes {
                    self.out.error(&id, -32602, &format!("Invalid params: {e}"));
                } else {
                    self.out.error(&id, -32600, INVALID_ID);
                }
                None
            }
            Err(e) => {
                tracing::debug!(error = %e, "dropping an undecodable notification or response");
                None
            }
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Serialized here, so the returned future has nothing left to wait for.
        let sent = serde_json::to_vec(&item)
            .map(|line| self.out.line(line))
            .map_err(io::Error::other);
        std::future::ready(sent)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        if let Some(first) = self.first.take()
            && let Some(message) = self.to_rmcp(first)
        {
            return Some(message);
        }
        loop {
            let (message, kind) = self.inbound.as_mut()?.next_message().await?;
            if !self.started {
                match gate(&message, &kind, &self.out, &self.supported) {
                    Gate::Deliver { starts } => self.started = starts,
                    Gate::Held => continue,
                }
            }
            if let Some(message) = self.to_rmcp(message) {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl<R> Drop for LineTransport<R> {
    fn drop(&mut self) {
        if let (Some(inbound), Some(give_back)) = (self.inbound.take(), self.give_back.take()) {
            let _ = give_back.send(inbound);
        }
    }
}

/// The message's id when it is one a response may carry (a string or a number), else null.
fn scalar_id(message: &Value) -> Value {
    match message.get("id") {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => Value::Null,
    }
}

/// Why an `initialize` request cannot start a session, as a JSON-RPC code and text: an id
/// rmcp cannot hold, or params that do not decode as initialize params (rmcp would take
/// such a message as a custom request, fail the handshake and stop serving).
fn initialize_error(message: &Value) -> Option<(i64, String)> {
    if message
        .get("id")
        .is_some_and(|id| RequestId::deserialize(id).is_err())
    {
        return Some((-32600, INVALID_ID.to_owned()));
    }
    let why = match ClientJsonRpcMessage::deserialize(message) {
        Ok(JsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::InitializeRequest(_)) =>
        {
            return None;
        }
        Ok(_) => {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            InitializeRequestParams::deserialize(params)
                .err()
                .map_or_else(|| "not an initialize request".to_owned(), |e| e.to_string())
        }
        Err(e) => e.to_string(),
    };
    Some((-32602, format!("Invalid params: {why}")))
}

/// Write queued lines in order: lines already queued are joined into one write, and the
/// output is flushed only when the queue is empty.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) -> io::Result<()> {
    let mut batch = Vec::new();
    while let Some(line) = rx.recv().await {
        if rx.is_empty() {
            output.write_all(&line).await?;
        } else {
            batch.clear();
            batch.extend_from_slice(&line);
            while batch.len() < WRITE_BATCH_BYTES {
                let Ok(next) = rx.try_recv() else { break };
                batch.extend_from_slice(&next);
            }
            output.write_all(&batch).await?;
        }
        if rx.is_empty() {
            output.flush().await?;
        }
    }
    output.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_shapes() {
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":1,"method":"initialize"})),
            Ok(Kind::Initialize)
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":"a","method":"tools/list"})),
            Ok(Kind::Request)
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            Ok(Kind::Notification)
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":1,"result":{}})),
            Ok(Kind::Response)
        ));
        assert!(classify(&json!([1])).is_err());
        assert!(classify(&json!({"id":1,"method":"x"})).is_err());
        assert!(classify(&json!({"jsonrpc":"2.0","id":null,"method":"x"})).is_err());
    }

    #[test]
    fn only_a_decodable_initialize_starts_a_session() {
        let good = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"t","version":"1"}}});
        assert_eq!(initialize_error(&good), None);
        let bad_params =
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}});
        assert_eq!(
            initialize_error(&bad_params).map(|(code, _)| code),
            Some(-32602)
        );
        let huge_id = json!({"jsonrpc":"2.0","id":u64::MAX,"method":"initialize","params":{}});
        assert_eq!(
            initialize_error(&huge_id).map(|(code, _)| code),
            Some(-32600)
        );
        assert_eq!(scalar_id(&json!({"id":[1]})), Value::Null);
        assert_eq!(scalar_id(&json!({"id":"a"})), json!("a"));
    }

    /// Lines read through [`Inbound`] from `input`, with everything it answered.
    async fn read_all(input: Vec<u8>) -> (Vec<Value>, Vec<Value>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut inbound = Inbound::new(std::io::Cursor::new(input), Outbound(tx));
        let mut messages = Vec::new();
        while let Some((message, _)) = inbound.next_message().await {
            messages.push(message);
        }
        drop(inbound);
        let mut answers = Vec::new();
        while let Some(line) = rx.recv().await {
            answers.push(serde_json::from_slice(&line).unwrap());
        }
        (messages, answers)
    }

    #[tokio::test]
    async fn inbound_bounds_lines_and_answers_malformed_ones() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n  \r\n");
        input.extend_from_slice(b"{not json\n[1]\n");
        input.push(b'"');
        input.resize(input.len() + MAX_LINE_BYTES, b'x');
        input.extend_from_slice(b"\"\n");
        // The longest accepted line: exactly MAX_LINE_BYTES before its newline.
        let longest = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"b\",\"params\":{{\"pad\":\"{}\"}}}}",
            "y".repeat(MAX_LINE_BYTES - 50)
        );
        assert_eq!(longest.len(), MAX_LINE_BYTES);
        input.extend_from_slice(longest.as_bytes());
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"c\"}");
        let (messages, answers) = read_all(input).await;
        let methods: Vec<&str> = messages
            .iter()
            .map(|m| m["method"].as_str().unwrap())
            .collect();
        assert_eq!(
            methods,
            ["a", "b", "c"],
            "a last line without newline counts"
        );
        let codes: Vec<i64> = answers
            .iter()
            .map(|a| a["error"]["code"].as_i64().unwrap())
            .collect();
        assert_eq!(codes, [-32700, -32600, -32700]);
        assert!(
            answers[2]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("16 MiB")
        );
    }
}
