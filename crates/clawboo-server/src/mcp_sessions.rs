//! The sessions of the Streamable HTTP endpoints: rmcp's `SessionManager` trait, implemented
//! for memory in place of rmcp's `LocalSessionManager`.
//!
//! Written by hand because the crate's own manager made sessions most of `clawboo serve`'s
//! memory under load (measured: `docs/BENCHMARKS.md`'s git history): a worker task per
//! session and four Tokio channels that carry whole JSON-RPC messages by value, and Tokio
//! allocates a channel's slots in blocks of 32, each slot a whole rmcp message, two blocks
//! per busy channel. Here a session is a small struct shared by its transport and the HTTP side:
//! inbound messages are boxed on their way to the service, and the service's messages are
//! routed to the HTTP streams as it sends them, with no task of our own in between.
//!
//! What clients see is rmcp's behaviour: a priming event (an id to resume from, a retry
//! hint) opens each request's stream, then the messages for that request (progress by its
//! token, requests a handler makes by their originating request), and the stream ends with
//! the answer; everything else goes to the standalone GET stream (a second GET while one is
//! open only gets keep-alives). A stream dropped mid-request resumes with `Last-Event-ID`
//! (the last 16 events of a stream are kept while it lives). A session with nothing in
//! flight and no traffic for the idle limit is closed. The number of sessions is capped:
//! making room for a new one closes the oldest idle session, and with none idle the new
//! one is refused ([`Sessions::make_room`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    GetExtensions, GetMeta, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, Notification,
    ProgressNotificationParam, ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerResult,
};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext};
use rmcp::transport::Transport;
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId, session_id};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// Events a stream keeps for a client that resumes it, and the depth of each channel.
const STREAM_DEPTH: usize = 16;
/// Stream number of a session's standalone (GET) stream; request streams count from 1.
const STANDALONE: u64 = 0;

/// Why a session could not take a message or open a stream.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No open session has this id.
    #[error("no open session {0}")]
    NotFound(SessionId),
    /// The session's server stopped before it answered.
    #[error("the session's server has stopped")]
    Stopped,
    /// Only requests get a stream of their own.
    #[error("only a request opens a stream of its own")]
    NotARequest,
    /// `Last-Event-ID` names no stream this session still has.
    #[error("no stream of this session to resume from event {0:?}")]
    NoSuchStream(String),
    /// Every one of the capped number of sessions has a call in flight.
    #[error("all {0} MCP sessions of this server are busy")]
    Full(usize),
}

/// A session's server, called by the HTTP side itself for the session's requests (in place
/// of rmcp's service loop, which would take each request through its channel, a task of
/// its own and back): what rmcp's loop would do for a request, without the hops.
pub trait DirectCall: Send + Sync {
    /// The session's client, as rmcp's loop hands it to every request.
    fn peer(&self) -> Peer<RoleServer>;

    /// Answer one request, as rmcp's loop would (`Service::handle_request`).
    fn call(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> BoxFuture<'static, Result<ServerResult, ErrorData>>;
}

/// A request of a session, started by [`Sessions::start_call`]: its stream, and the call,
/// which routes the answer onto that stream when it ends.
pub struct StartedCall {
    pub stream: mpsc::Receiver<ServerSseMessage>,
    pub call: BoxFuture<'static, ()>,
}

/// Every open session of one endpoint.
pub struct Sessions {
    sessions: RwLock<HashMap<SessionId, Arc<Session>>>,
    idle: Duration,
    retry: Duration,
    max: usize,
}

impl Sessions {
    /// At most `max` sessions, each closed after `idle` without traffic; request streams
    /// open with a priming event that asks a disconnected client to retry after `retry`.
    pub fn new(idle: Duration, retry: Duration, max: usize) -> Sessions {
        Sessions {
            sessions: RwLock::new(HashMap::new()),
            idle,
            retry,
            max: max.max(1),
        }
    }

    /// Make room for one more session: while the cap is reached, close the session that
    /// has been idle (nothing in flight) the longest; with none idle, refuse. Called
    /// before a new session is created; initializes racing each other may overshoot the
    /// cap by how many run at once, never more.
    pub fn make_room(&self) -> Result<(), SessionError> {
        let mut sessions = self.sessions.write();
        while sessions.len() >= self.max {
            let oldest_idle = sessions
                .iter()
                .filter(|(_, s)| s.routes.lock().requests.is_empty())
                .min_by_key(|(_, s)| *s.last_active.lock())
                .map(|(id, _)| id.clone());
            let Some(id) = oldest_idle else {
                return Err(SessionError::Full(self.max));
            };
            if let Some(session) = sessions.remove(&id) {
                tracing::info!(session = %id, max = self.max, "MCP session cap reached; closing the oldest idle session");
                session.close();
            }
        }
        Ok(())
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.read().len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.sessions.read().is_empty()
    }

    /// Have the HTTP side run this session's requests through `direct` from now on.
    pub fn attach_direct(&self, id: &SessionId, direct: Arc<dyn DirectCall>) {
        if let Ok(session) = self.get(id) {
            let _ = session.direct.set(direct);
        }
    }

    /// Start `request` of session `id` on the session's server directly, when the session
    /// has a [`DirectCall`]: its stream is opened (with the priming event) as for rmcp's
    /// path, and the returned call answers onto it when polled to its end. The request
    /// comes back when the session has none.
    pub fn start_call(
        &self,
        id: &SessionId,
        request: JsonRpcRequest<ClientRequest>,
    ) -> Result<Result<StartedCall, JsonRpcRequest<ClientRequest>>, SessionError> {
        let session = self.get(id)?;
        let Some(direct) = session.direct.get().cloned() else {
            return Ok(Err(request));
        };
        if session.closed.is_cancelled() {
            // Its server stopped (idle, or shutting down) and it is about to be removed:
            // as rmcp's path answers a session whose loop is gone.
            return Err(SessionError::Stopped);
        }
        let JsonRpcRequest {
            id: request_id,
            mut request,
            ..
        } = request;
        // As rmcp's loop: the request's `_meta` and extensions move to its context, and its
        // cancellation token ends with the session (or a `notifications/cancelled`).
        let meta = std::mem::take(request.get_meta_mut());
        let extensions = std::mem::take(request.extensions_mut());
        let cancel = session.closed.child_token();
        let progress_token = meta.get_progress_token();
        let stream = session.open_stream(
            request_id.clone(),
            progress_token,
            Some(self.retry),
            Some(cancel.clone()),
        );
        session.touch();
        let mut context = RequestContext::new(request_id.clone(), direct.peer());
        context.ct = cancel;
        context.meta = meta;
        context.extensions = extensions;
        let answer = direct.call(request, context);
        let call = Box::pin(async move {
            let message = match answer.await {
                Ok(result) => JsonRpcMessage::response(result, request_id),
                Err(error) => JsonRpcMessage::error(error, Some(request_id)),
            };
            session.touch();
            if let Some((tx, message)) = session.route_answer(message) {
                let _ = tx.send(message).await;
            }
        });
        Ok(Ok(StartedCall { stream, call }))
    }

    fn get(&self, id: &SessionId) -> Result<Arc<Session>, SessionError> {
        self.sessions
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.clone()))
    }

    /// Open a stream for `request` (registered before the request reaches the server, so
    /// the answer finds it) and hand the request to the server.
    async fn open_request_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
        priming: Option<Duration>,
    ) -> Result<mpsc::Receiver<ServerSseMessage>, SessionError> {
        let session = self.get(id)?;
        let ClientJsonRpcMessage::Request(request) = &message else {
            return Err(SessionError::NotARequest);
        };
        let request_id = request.id.clone();
        let progress_token = request.request.get_meta().get_progress_token();
        let rx = session.open_stream(request_id.clone(), progress_token, priming, None);
        if let Err(e) = session.push(message).await {
            session.routes.lock().end_request(&request_id);
            return Err(e);
        }
        Ok(rx)
    }
}

impl SessionManager for Sessions {
    type Error = SessionError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, SessionTransport), SessionError> {
        let id = session_id();
        let (inbound_tx, inbound) = mpsc::channel(STREAM_DEPTH);
        let session = Arc::new(Session {
            direct: OnceLock::new(),
            inbound: inbound_tx,
            closed: CancellationToken::new(),
            last_active: Mutex::new(Instant::now()),
            routes: Mutex::new(Routes::default()),
        });
        self.sessions.write().insert(id.clone(), session.clone());
        tracing::debug!(session = %id, "MCP session opened");
        let transport = SessionTransport {
            session,
            inbound,
            idle: self.idle,
        };
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        let mut stream = self.open_request_stream(id, message, None).await?;
        while let Some(event) = stream.recv().await {
            if let Some(message) = event.message
                && matches!(
                    *message,
                    JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
                )
            {
                return Ok(Arc::unwrap_or_clone(message));
            }
        }
        Err(SessionError::Stopped)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.sessions.read().contains_key(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        let removed = self.sessions.write().remove(id);
        if let Some(session) = removed {
            tracing::debug!(session = %id, "MCP session closed");
            session.close();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let rx = self
            .open_request_stream(id, message, Some(self.retry))
            .await?;
        Ok(ReceiverStream::new(rx))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        let session = self.get(id)?;
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ClientNotification::CancelledNotification(n),
            ..
        }) = &message
            && let Some(request_id) = &n.params.request_id
        {
            // The client gave up on the request: its stream ends now.
            session.routes.lock().end_request(request_id);
        }
        session.push(message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.get(id)?;
        session.touch();
        let mut routes = session.routes.lock();
        if let Some(open) = &routes.standalone
            && !open.tx.is_closed()
        {
            // Only one stream gets the session's messages; another (a client's second
            // EventSource) is kept open with keep-alives rather than refused, so that the
            // client does not reconnect in a loop.
            return Ok(futures::stream::pending().left_stream());
        }
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        match &mut routes.standalone {
            Some(outbox) => outbox.tx = tx,
            None => routes.standalone = Some(Outbox::new(STANDALONE, tx)),
        }
        Ok(ReceiverStream::new(rx).right_stream())
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.get(id)?;
        session.touch();
        // Our ids are `<stream>/<index>`; rmcp's own priming event of a GET stream or of an
        // `initialize` answer is a bare "0", sent before any of ours: it resumes the
        // standalone stream from the start.
        let (stream, after) = match last_event_id.split_once('/') {
            Some((stream, index)) => match (stream.parse(), index.parse()) {
                (Ok(stream), Ok(index)) => (stream, Some(index)),
                _ => return Err(SessionError::NoSuchStream(last_event_id)),
            },
            None if last_event_id == "0" => (STANDALONE, None),
            None => return Err(SessionError::NoSuchStream(last_event_id)),
        };
        let mut routes = session.routes.lock();
        let outbox = if stream == STANDALONE {
            routes.standalone.as_mut()
        } else {
            routes
                .requests
                .values_mut()
                .map(|r| &mut r.outbox)
                .find(|o| o.stream == stream)
        };
        let Some(outbox) = outbox else {
            return Err(SessionError::NoSuchStream(last_event_id));
        };
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        outbox.tx = tx;
        let missed = outbox.recent.iter();
        for event in missed.filter(|e| after.is_none_or(|after| e.index > after)) {
            if outbox.tx.try_send(event.message.clone()).is_err() {
                break;
            }
        }
        Ok(ReceiverStream::new(rx))
    }
}

/// One session, shared by its transport (the server's side) and [`Sessions`] (HTTP's).
struct Session {
    /// The server, for requests the HTTP side runs itself (set after `initialize`).
    direct: OnceLock<Arc<dyn DirectCall>>,
    /// Messages for the server, boxed: a channel allocates its slots 32 at a time.
    inbound: mpsc::Sender<Box<ClientJsonRpcMessage>>,
    closed: CancellationToken,
    last_active: Mutex<Instant>,
    routes: Mutex<Routes>,
}

impl Session {
    /// Stop the session's server and end every open stream (its sender goes with the
    /// routes).
    fn close(&self) {
        self.closed.cancel();
        *self.routes.lock() = Routes::default();
    }

    fn touch(&self) {
        *self.last_active.lock() = Instant::now();
    }

    /// Register the stream of request `id` (before the request reaches the server, so the
    /// answer finds it) and return its receiving end.
    fn open_stream(
        &self,
        id: RequestId,
        progress_token: Option<ProgressToken>,
        priming: Option<Duration>,
        cancel: Option<CancellationToken>,
    ) -> mpsc::Receiver<ServerSseMessage> {
        let (tx, rx) = mpsc::channel(STREAM_DEPTH);
        let mut routes = self.routes.lock();
        routes.next_stream += 1;
        let mut outbox = Outbox::new(routes.next_stream, tx);
        if let Some(retry) = priming {
            outbox.post(ServerSseMessage::priming(outbox.event_id(0), retry));
        }
        let stream = RequestStream {
            outbox,
            progress_token: progress_token.clone(),
            cancel,
        };
        if let Some(old) = routes.requests.insert(id.clone(), stream) {
            // A client reusing an id in flight: the older stream ends unanswered.
            routes.forget_progress(old.progress_token.as_ref());
        }
        if let Some(token) = progress_token {
            routes.progress.insert(token, id);
        }
        rx
    }

    /// Route the answer of a request run directly: as rmcp's loop does, an answer to a
    /// request no longer in flight (cancelled) is dropped.
    fn route_answer(
        &self,
        message: ServerJsonRpcMessage,
    ) -> Option<(mpsc::Sender<ServerSseMessage>, ServerSseMessage)> {
        let mut routes = self.routes.lock();
        let (Some(request), ends) = routes.request_of(&message) else {
            tracing::debug!("an answer to a cancelled request was dropped");
            return None;
        };
        let stream = routes.requests.get_mut(&request)?;
        let pending = stream.outbox.post(ServerSseMessage::from_message(message));
        if ends {
            routes.end_request(&request);
        }
        pending
    }

    async fn push(&self, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        self.touch();
        self.inbound
            .send(Box::new(message))
            .await
            .map_err(|_| SessionError::Stopped)
    }

    /// Route one of the server's messages to its stream. Done as the server sends it, so
    /// a request's messages keep their order; a full stream (a slow reader) is waited on
    /// outside the lock: the sender and the event are returned for that.
    fn route(
        &self,
        message: ServerJsonRpcMessage,
    ) -> Option<(mpsc::Sender<ServerSseMessage>, ServerSseMessage)> {
        let mut routes = self.routes.lock();
        let (request, ends) = routes.request_of(&message);
        let message = ServerSseMessage::from_message(message);
        let Some(request) = request else {
            let Some(outbox) = routes.standalone.as_mut() else {
                tracing::debug!("no standalone stream open; a server message was dropped");
                return None;
            };
            return outbox.post(message);
        };
        let stream = routes.requests.get_mut(&request)?;
        let pending = stream.outbox.post(message);
        if ends {
            routes.end_request(&request);
        }
        pending
    }
}

/// Where a session's outgoing messages go.
#[derive(Default)]
struct Routes {
    /// The last stream number given out.
    next_stream: u64,
    requests: HashMap<RequestId, RequestStream>,
    progress: HashMap<ProgressToken, RequestId>,
    standalone: Option<Outbox>,
}

impl Routes {
    /// The request whose stream `message` belongs on, if any, and whether it is the
    /// request's last message.
    fn request_of(&self, message: &ServerJsonRpcMessage) -> (Option<RequestId>, bool) {
        let in_flight = |id: &RequestId| self.requests.contains_key(id).then(|| id.clone());
        match message {
            JsonRpcMessage::Response(r) => (in_flight(&r.id), true),
            JsonRpcMessage::Error(e) => (e.id.as_ref().and_then(in_flight), true),
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification:
                    ServerNotification::ProgressNotification(Notification {
                        params: ProgressNotificationParam { progress_token, .. },
                        ..
                    }),
                ..
            }) => (self.progress.get(progress_token).cloned(), false),
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification:
                    ServerNotification::CancelledNotification(Notification {
                        params:
                            CancelledNotificationParam {
                                request_id: Some(id),
                                ..
                            },
                        ..
                    }),
                ..
            }) => (in_flight(id), false),
            JsonRpcMessage::Notification(_) => (None, false),
            // A request a handler makes rides the stream of the request it serves (SEP-2260).
            JsonRpcMessage::Request(r) => (
                r.request
                    .extensions()
                    .get::<OriginatingRequestId>()
                    .and_then(|o| in_flight(&o.0)),
                false,
            ),
        }
    }

    /// Forget a request's stream, which ends it (and, for a request run directly, cancels
    /// its context's token, as rmcp's loop does once a request is answered or cancelled).
    fn end_request(&mut self, id: &RequestId) {
        if let Some(stream) = self.requests.remove(id) {
            self.forget_progress(stream.progress_token.as_ref());
            if let Some(cancel) = stream.cancel {
                cancel.cancel();
            }
        }
    }

    fn forget_progress(&mut self, token: Option<&ProgressToken>) {
        if let Some(token) = token {
            self.progress.remove(token);
        }
    }
}

/// The stream of one request in flight.
struct RequestStream {
    outbox: Outbox,
    progress_token: Option<ProgressToken>,
    /// The context's token of a request the HTTP side runs itself (rmcp keeps its own).
    cancel: Option<CancellationToken>,
}

/// One SSE stream's sender, with its last events kept for a client that resumes it.
struct Outbox {
    stream: u64,
    tx: mpsc::Sender<ServerSseMessage>,
    next_index: u64,
    recent: VecDeque<SentEvent>,
}

struct SentEvent {
    index: u64,
    message: ServerSseMessage,
}

impl Outbox {
    fn new(stream: u64, tx: mpsc::Sender<ServerSseMessage>) -> Outbox {
        Outbox {
            stream,
            tx,
            next_index: 0,
            recent: VecDeque::new(),
        }
    }

    fn event_id(&self, index: u64) -> String {
        format!("{}/{index}", self.stream)
    }

    /// Give `message` the stream's next event id, keep it, and send it; when the reader
    /// is behind, the sender and the event are returned to be waited on.
    fn post(
        &mut self,
        mut message: ServerSseMessage,
    ) -> Option<(mpsc::Sender<ServerSseMessage>, ServerSseMessage)> {
        let index = self.next_index;
        self.next_index += 1;
        message.event_id = Some(self.event_id(index));
        if self.recent.len() == STREAM_DEPTH {
            self.recent.pop_front();
        }
        self.recent.push_back(SentEvent {
            index,
            message: message.clone(),
        });
        match self.tx.try_send(message) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(message)) => Some((self.tx.clone(), message)),
            // The client went away; the event stays kept for a resume.
            Err(mpsc::error::TrySendError::Closed(_)) => None,
        }
    }
}

/// The server's side of a session: what rmcp's service loop reads and writes.
pub struct SessionTransport {
    session: Arc<Session>,
    inbound: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
    idle: Duration,
}

impl Transport<RoleServer> for SessionTransport {
    type Error = SessionError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SessionError>> + Send + 'static {
        self.session.touch();
        let pending = self.session.route(item);
        async move {
            if let Some((tx, message)) = pending {
                // A reader that left just drops what it would have read.
                let _ = tx.send(message).await;
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let quiet_until = *self.session.last_active.lock() + self.idle;
            tokio::select! {
                message = self.inbound.recv() => return message.map(|m| *m),
                () = self.session.closed.cancelled() => return None,
                () = tokio::time::sleep_until(quiet_until) => {
                    let last_active = *self.session.last_active.lock();
                    let in_flight = !self.session.routes.lock().requests.is_empty();
                    if !in_flight && last_active.elapsed() >= self.idle {
                        tracing::info!(idle = ?self.idle, "MCP session idle; closing it");
                        return None;
                    }
                    if in_flight {
                        // A long call (an approval, a long poll) keeps its session open.
                        self.session.touch();
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), SessionError> {
        self.session.closed.cancel();
        Ok(())
    }
}
