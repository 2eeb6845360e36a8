//! The one error type of the REST API, and extractors whose rejections use it, so every
//! error body is JSON `{error}` with a fitting status.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use clawboo_store::{BackendError, BackendErrorKind, RunError, Store, StoreError};
use serde::de::DeserializeOwned;
use serde_json::json;

/// An API failure: a status and the text a caller reads.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub status: StatusCode,
    pub message: String,
    /// Add `ok: false` to the body (the claim route's shape).
    pub with_ok: bool,
}

impl AppError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> AppError {
        AppError {
            status,
            message: message.into(),
            with_ok: false,
        }
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::NOT_FOUND, message)
    }

    /// The same error, with `ok: false` in its body.
    pub fn with_ok_false(mut self) -> AppError {
        self.with_ok = true;
        self
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> AppError {
        let status = match &e {
            StoreError::NotFound(_) => StatusCode::NOT_FOUND,
            StoreError::Conflict
            | StoreError::NotReady
            | StoreError::NotAssignee { .. }
            | StoreError::StaleClaim { .. }
            | StoreError::Reserved { .. }
            | StoreError::IllegalTransition { .. }
            | StoreError::Cycle { .. }
            | StoreError::Cap { .. } => StatusCode::CONFLICT,
            StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Unavailable | BackendErrorKind::Busy,
                ..
            }) => StatusCode::SERVICE_UNAVAILABLE,
            StoreError::Backend(_) | StoreError::Io(_) | StoreError::NewerSchema { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        // What failed (SQL, constraint names, driver messages) goes to the log only; the
        // caller gets the reference that finds it there (SPEC §16).
        let reference = clawboo_store::new_id();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(%reference, "store failure: {e}");
        }
        let message = match &e {
            StoreError::Invalid(what) => format!("invalid request: {what}"),
            StoreError::Conflict => {
                "conflict: the task is no longer claimable (another agent holds it or it left todo)"
                    .into()
            }
            StoreError::NotReady => {
                "not_ready: a dependency is not done yet; claim it once its dependencies are done"
                    .into()
            }
            StoreError::Backend(_) if status == StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(%reference, "store unavailable: {e}");
                format!(
                    "the database is unavailable (reference {reference}); nothing was written, retry once it is back"
                )
            }
            StoreError::Backend(_) | StoreError::Io(_) => format!(
                "internal error (reference {reference}): nothing was written; retry, and if it fails again an operator finds the cause in the server's log under that reference"
            ),
            other => other.to_string(),
        };
        AppError::new(status, message)
    }
}

impl From<RunError> for AppError {
    fn from(e: RunError) -> AppError {
        tracing::error!("request worker failed: {e}");
        AppError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error while handling the request; retry, and check the server log if it persists",
        )
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = if self.with_ok {
            json!({ "ok": false, "error": self.message })
        } else {
            json!({ "error": self.message })
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// A JSON `{error}` response with `status`.
pub fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    AppError::new(status, message).into_response()
}

/// Run a REST request's store work through the store's own scheduling
/// ([`Store::run_off_thread`]), never on an async thread; a panic becomes a 500.
pub async fn store_call<T: Send + 'static>(
    store: Arc<Store>,
    f: impl FnOnce(&Store) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    store.run_off_thread(f).await?
}

/// A JSON body whose rejection is an [`AppError`].
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;
    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        // The body is read once (within the route's body limit) and decoded by axum's own
        // extractor, so its refusals stay as they were; then its strings are looked
        // through for a NUL, which no backend stores alike.
        let headers = req.headers().clone();
        let bytes = bytes::Bytes::from_request(req, state).await.map_err(|r| {
            AppError::new(r.status(), format!("invalid JSON body: {}", r.body_text()))
        })?;
        let mut decoded = Request::new(axum::body::Body::from(bytes.clone()));
        *decoded.headers_mut() = headers;
        let value = match axum::Json::<T>::from_request(decoded, state).await {
            Ok(axum::Json(v)) => v,
            Err(rejection) => return Err(json_rejection(rejection)),
        };
        if let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(&bytes)
            && let Some(path) = clawboo_store::normalize::nul_in_fields(&fields)
        {
            return Err(AppError::bad_request(format!(
                "invalid JSON body: {path} holds a NUL character (U+0000), which cannot be stored; remove it"
            )));
        }
        Ok(ApiJson(value))
    }
}

fn json_rejection(rejection: JsonRejection) -> AppError {
    let status = rejection.status();
    let text = rejection.body_text();
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    AppError::new(status, format!("invalid JSON body: {text}"))
}

/// A query string whose rejection is an [`AppError`].
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        if let Some(query) = parts.uri.query()
            && let Some(name) = nul_query_field(query)
        {
            return Err(AppError::bad_request(format!(
                "invalid query: {name} holds a NUL character (U+0000); remove it"
            )));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|r: QueryRejection| {
                AppError::bad_request(format!("invalid query: {}", r.body_text()))
            })
    }
}

/// A path parameter whose rejection is an [`AppError`].
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        if has_encoded_nul(parts.uri.path()) {
            return Err(AppError::bad_request(
                "invalid path: it holds a NUL character (U+0000); remove it",
            ));
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|r: PathRejection| {
                AppError::bad_request(format!("invalid path: {}", r.body_text()))
            })
    }
}

/// Whether URL text holds a percent-encoded NUL (`%00`).
fn has_encoded_nul(text: &str) -> bool {
    text.as_bytes().windows(3).any(|w| w == b"%00")
}

/// The name of the first query parameter whose value (or name) holds an encoded NUL.
fn nul_query_field(query: &str) -> Option<String> {
    query
        .split('&')
        .find(|pair| has_encoded_nul(pair))
        .map(|pair| pair.split('=').next().unwrap_or_default().to_owned())
}
