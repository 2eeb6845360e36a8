//! Serving connections with deadlines, so a slow client cannot hold one: a request's
//! headers must arrive within [`Deadlines::header`] and its body within
//! [`Deadlines::body`], else 408 and the connection closes.
//!
//! Written over hyper-util's connection builder rather than `axum::serve`, which offers
//! neither hyper's `header_read_timeout` nor a hook after a connection fails. hyper
//! enforces the header deadline but closes the socket without a word, so the socket's
//! write half is shared with the connection (`SharedTcp`) and, when the deadline cut a
//! request short, the 408 is written on it afterwards. The body deadline is our own
//! (`with_body_deadline`): tower-http's `RequestBodyTimeoutLayer` restarts its timer at
//! every frame, so a body trickled a byte at a time would never time out.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::FutureExt;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use crate::error::json_error;

/// How long a client may take to send a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// From the first byte wanted to the end of the headers (HTTP/1).
    pub header: Duration,
    /// From the end of the headers to the end of the body.
    pub body: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
        }
    }
}

/// The body of every 408.
fn timeout_text(deadlines: Deadlines) -> String {
    format!(
        "request timed out: headers must arrive within {} ms and the body within {} ms; send the whole request at once",
        deadlines.header.as_millis(),
        deadlines.body.as_millis()
    )
}

/// A 408 that closes the connection.
fn request_timeout(deadlines: Deadlines) -> Response {
    let mut response = json_error(StatusCode::REQUEST_TIMEOUT, timeout_text(deadlines));
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The raw 408 written after hyper gave up on a request's headers.
fn raw_request_timeout(deadlines: Deadlines) -> Vec<u8> {
    let body = serde_json::json!({ "error": timeout_text(deadlines) }).to_string();
    format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Accept connections on `listener` and answer each one's requests with `answer` until
/// the future is dropped. A request carries the socket's peer as `ConnectInfo<SocketAddr>`
/// and, for the MCP servers, as [`clawboo_mcp::waits::Peer`].
pub(crate) async fn serve_connections<A, Fut>(
    listener: TcpListener,
    answer: A,
    deadlines: Deadlines,
) where
    A: Fn(Request) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(deadlines.header);
    let builder = Arc::new(builder);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                if !is_connection_error(&e) {
                    // Out of file descriptors and the like: wait for some to free up
                    // rather than spin (what `axum::serve` does too).
                    tracing::error!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
        };
        // Without TCP_NODELAY a response written in pieces (SSE frames) waits on the
        // peer's delayed ACK on every call.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
        let answer = answer.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let (read, write) = tcp.into_split();
            let shared = Arc::new(SharedTcp {
                write,
                read_since_write: AtomicBool::new(false),
            });
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(ConnectInfo(peer));
                // The MCP servers count an unbound caller's waits by its address.
                req.extensions_mut()
                    .insert(clawboo_mcp::waits::Peer(peer.ip()));
                answer(req).map(Ok::<_, Infallible>)
            });
            let io = TokioIo::new(SharedIo {
                read,
                shared: shared.clone(),
            });
            let result = builder.serve_connection_with_upgrades(io, service).await;
            if let Err(e) = result {
                let header_timeout = e
                    .downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout);
                // A connection idle between requests just closes; one cut off inside a
                // request's headers is told why.
                if header_timeout && shared.read_since_write.load(Ordering::Relaxed) {
                    tracing::info!(%peer, "request headers timed out; answering 408");
                    let _ = shared.write.try_write(&raw_request_timeout(deadlines));
                } else {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
            }
        });
    }
}

/// Errors of one incoming connection, not of the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The writing side of a socket, shared by its connection and the task that may answer
/// 408 after it.
struct SharedTcp {
    write: OwnedWriteHalf,
    /// Bytes arrived since the last write: a request is under way.
    read_since_write: AtomicBool,
}

/// The connection's handle on its socket. Reads go through the read half the connection
/// owns, so tokio's readiness bookkeeping applies (a short read means the socket is drained,
/// so the next read waits without a failed `recvfrom`); writes go through `&TcpStream`
/// (readiness, then a non-blocking try), so the 408 writer's handle stays usable.
struct SharedIo {
    read: OwnedReadHalf,
    shared: Arc<SharedTcp>,
}

impl AsyncRead for SharedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.read).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.shared.read_since_write.store(true, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for SharedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let shared = &self.shared;
        let tcp: &TcpStream = shared.write.as_ref();
        loop {
            ready!(tcp.poll_write_ready(cx))?;
            match tcp.try_write(buf) {
                Ok(n) => {
                    shared.read_since_write.store(false, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let shared = &self.shared;
        let tcp: &TcpStream = shared.write.as_ref();
        loop {
            ready!(tcp.poll_write_ready(cx))?;
            match tcp.try_write_vectored(bufs) {
                Ok(n) => {
                    shared.read_since_write.store(false, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// The socket closes when its last handle drops, just after the connection ends.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The body deadline of [`crate::at_the_edge`]: a request whose body is not all in within
/// `deadlines.body` of its headers is answered 408 (whatever `inner` made of the cut-off
/// body) and its connection closed.
pub(crate) async fn with_body_deadline<F, Fut>(
    deadlines: Deadlines,
    req: Request,
    inner: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    if req.body().is_end_stream() {
        return inner(req).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let deadline = tokio::time::Instant::now() + deadlines.body;
    let flag = expired.clone();
    let req = req.map(move |inner| {
        Body::new(DeadlineBody {
            inner,
            deadline,
            sleep: None,
            expired: flag,
        })
    });
    let response = inner(req).await;
    if expired.load(Ordering::Relaxed) {
        tracing::info!("request body timed out; answering 408");
        return request_timeout(deadlines);
    }
    response
}

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

/// A request body that fails once its deadline passes.
struct DeadlineBody {
    inner: Body,
    deadline: tokio::time::Instant,
    /// Armed the first time the body is not all there: a body that came with its headers
    /// (nearly every one) costs no timer.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let deadline = self.deadline;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            self.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_408_is_one_complete_response() {
        let raw = String::from_utf8(raw_request_timeout(Deadlines::default())).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with("request timed out"),
            "{v}"
        );
    }
}
