//! Serve an MCP server over stdio: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp's own stdio transport ignores non-JSON lines silently, answers requests sent
//! before `initialize` as if they used the initialize-less 2026 protocol, and errors when
//! stdin closes before `initialize`. This front filters the stream before rmcp sees it:
//! a malformed line gets a -32700 parse error, anything before `initialize` gets a
//! JSON-RPC error at once, a request rmcp could not decode (params of the wrong shape, an
//! id no `i64` holds) gets its error here, with its id (rmcp would answer it without one,
//! or stop serving after such an `initialize`), and EOF always ends the process cleanly.
//! Every line rmcp writes and every error this front writes goes through one writer, so
//! lines never interleave.

use std::io;

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, InitializeRequestParams, JsonRpcMessage, RequestId,
};
use rmcp::{ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::mpsc;

/// The longest accepted JSON-RPC line (bytes); a longer one is answered with a parse error.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC code for a request sent before `initialize`.
const NOT_INITIALIZED: i64 = -32002;

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
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_lines(out_rx, output));
    let mut input = BufReader::new(input);
    // The handler moves into rmcp's service when `initialize` arrives.
    let mut handler = Some(handler);
    let mut session: Option<Session> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        let too_long = match read_bounded_line(&mut input, &mut line).await? {
            LineRead::Eof => break,
            LineRead::Line => false,
            LineRead::TooLong => true,
        };
        if too_long {
            let _ = out_tx.send(error_line(
                &Value::Null,
                -32700,
                "Parse error: line exceeds the 16 MiB limit",
            ));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = out_tx.send(error_line(
                    &Value::Null,
                    -32700,
                    &format!("Parse error: {e}"),
                ));
                continue;
            }
        };
        let kind = classify(&message);
        let forwarded = session.is_some() || matches!(kind, Kind::Initialize);
        if forwarded
            && !matches!(kind, Kind::Invalid(_))
            && let Some((code, why)) = undecodable(&message, &kind)
        {
            // rmcp would answer such a request without its id (or, for an initialize, stop
            // serving): answer it here, with its id, and forward nothing.
            if matches!(kind, Kind::Initialize | Kind::Request { .. }) {
                let _ = out_tx.send(error_line(&scalar_id(&message), code, &why));
            } else {
                tracing::debug!("dropping an undecodable notification or response: {why}");
            }
            continue;
        }
        match kind {
            Kind::Invalid(why) => {
                let _ = out_tx.send(error_line(
                    &scalar_id(&message),
                    -32600,
                    &format!("Invalid Request: {why}"),
                ));
            }
            Kind::Initialize if session.is_none() => {
                if let Some(h) = handler.take() {
                    let mut started = Session::start(h, out_tx.clone());
                    started.forward(&line).await;
                    session = Some(started);
                }
            }
            Kind::Request { id } if session.is_none() => {
                let _ = out_tx.send(error_line(
                    &id,
                    NOT_INITIALIZED,
                    "Server not initialized: send an initialize request first",
                ));
            }
            Kind::Notification | Kind::Response if session.is_none() => {
                tracing::debug!("dropping a notification or response sent before initialize");
            }
            _ => {
                if let Some(s) = session.as_mut() {
                    s.forward(&line).await;
                }
            }
        }
    }
    if let Some(s) = session {
        s.finish().await;
    }
    drop(out_tx);
    writer.await.map_err(io::Error::other)?
}

struct Session {
    to_server: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    service: tokio::task::JoinHandle<()>,
    pump: tokio::task::JoinHandle<()>,
}

impl Session {
    fn start<H: ServerHandler>(handler: H, out: mpsc::UnboundedSender<Vec<u8>>) -> Session {
        let (front, back) = tokio::io::duplex(1 << 20);
        let (back_read, back_write) = tokio::io::split(back);
        let (front_read, front_write) = tokio::io::split(front);
        let service = tokio::spawn(async move {
            match handler.serve((back_read, back_write)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!(error = %e, "MCP session ended during initialize"),
            }
        });
        let pump = tokio::spawn(async move {
            let mut lines = BufReader::new(front_read);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match lines.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if !buf.ends_with(b"\n") {
                            buf.push(b'\n');
                        }
                        if out.send(buf.clone()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Session {
            to_server: front_write,
            service,
            pump,
        }
    }

    async fn forward(&mut self, line: &[u8]) {
        let mut framed = line.to_vec();
        if !framed.ends_with(b"\n") {
            framed.push(b'\n');
        }
        if let Err(e) = self.to_server.write_all(&framed).await {
            tracing::warn!(error = %e, "MCP session is gone; dropping a message");
        }
    }

    async fn finish(mut self) {
        let _ = self.to_server.shutdown().await;
        drop(self.to_server);
        let _ = self.service.await;
        let _ = self.pump.await;
    }
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Read one line into `buf` (without growing past [`MAX_LINE_BYTES`]); an over-long line is
/// consumed up to its newline and reported as `TooLong`.
async fn read_bounded_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<LineRead> {
    let n = (&mut *input)
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)
        .await?;
    if n == 0 {
        return Ok(LineRead::Eof);
    }
    if buf.len() > MAX_LINE_BYTES && !buf.ends_with(b"\n") {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            let m = (&mut *input)
                .take(64 * 1024)
                .read_until(b'\n', &mut rest)
                .await?;
            if m == 0 || rest.ends_with(b"\n") {
                break;
            }
        }
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Line)
}

enum Kind {
    Initialize,
    Request { id: Value },
    Notification,
    Response,
    Invalid(&'static str),
}

/// Classify a parsed JSON-RPC message by shape.
fn classify(message: &Value) -> Kind {
    let Some(object) = message.as_object() else {
        return Kind::Invalid(if message.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a JSON-RPC message must be an object"
        });
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Kind::Invalid("jsonrpc must be \"2.0\"");
    }
    match (object.get("method"), object.get("id")) {
        (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
            if method == "initialize" {
                Kind::Initialize
            } else {
                Kind::Request { id: id.clone() }
            }
        }
        (Some(Value::String(_)), None) => Kind::Notification,
        (Some(_), _) => Kind::Invalid("method must be a string and id a string or number"),
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Kind::Response
        }
        (None, _) => Kind::Invalid("missing method"),
    }
}

/// The message's id when it is one a response may carry (a string or a number), else null.
fn scalar_id(message: &Value) -> Value {
    match message.get("id") {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => Value::Null,
    }
}

/// Why rmcp cannot decode a well-shaped message, as a JSON-RPC error code and text: an id
/// that is not a string or an `i64` (`-32600`), or params of the wrong shape (`-32602`).
/// An `initialize` must decode as one: rmcp takes anything else as a custom request.
fn undecodable(message: &Value, kind: &Kind) -> Option<(i64, String)> {
    if let Some(id) = message.get("id")
        && RequestId::deserialize(id).is_err()
    {
        return Some((
            -32600,
            "Invalid Request: id must be a string or a signed 64-bit integer".to_owned(),
        ));
    }
    let decoded = ClientJsonRpcMessage::deserialize(message);
    let error = match (decoded, kind) {
        (Err(e), _) => e.to_string(),
        (Ok(JsonRpcMessage::Request(r)), Kind::Initialize)
            if !matches!(r.request, ClientRequest::InitializeRequest(_)) =>
        {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            match InitializeRequestParams::deserialize(params) {
                Err(e) => e.to_string(),
                Ok(_) => "not an initialize request".to_owned(),
            }
        }
        (Ok(_), _) => return None,
    };
    Some((-32602, format!("Invalid params: {error}")))
}

fn error_line(id: &Value, code: i64, message: &str) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string();
    line.push('\n');
    line.into_bytes()
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) -> io::Result<()> {
    while let Some(line) = rx.recv().await {
        output.write_all(&line).await?;
        // Flush only when no more lines are queued, so pipelined answers share a write.
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
            Kind::Initialize
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":"a","method":"tools/list"})),
            Kind::Request { .. }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            Kind::Notification
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":1,"result":{}})),
            Kind::Response
        ));
        assert!(matches!(classify(&json!([1])), Kind::Invalid(_)));
        assert!(matches!(
            classify(&json!({"id":1,"method":"x"})),
            Kind::Invalid(_)
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":null,"method":"x"})),
            Kind::Invalid(_)
        ));
    }
}
