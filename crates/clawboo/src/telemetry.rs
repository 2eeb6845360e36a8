//! Logs and traces of every binary (SPEC §17): log lines to stderr (stdout is JSON-RPC on
//! stdio), as text or, with `CLAWBOO_LOG_FORMAT=json`, one JSON object a line carrying the
//! fields of the spans it happened in; with `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the spans of tool calls and REST requests
//! exported over OTLP/HTTP by the OpenTelemetry SDK, which reads the other standard
//! `OTEL_*` variables itself. Without those variables no exporter exists, the call spans
//! are disabled and cost one cached check.

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::filter::{EnvFilter, FilterExt, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// `json` makes log lines JSON objects; anything else (or unset) plain text.
pub const LOG_FORMAT_ENV: &str = "CLAWBOO_LOG_FORMAT";

/// The trace exporter of this process, kept to flush it on the way out.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The crates whose spans trace a call: its edge (`mcp.call`, `http.request`) and, as its
/// children, the store's trips to the database (`store.read`, `store.write`, …).
fn edge_spans() -> Targets {
    Targets::new()
        .with_target("clawboo_mcp", Level::INFO)
        .with_target("clawboo_server", Level::INFO)
        .with_target("clawboo_store", Level::INFO)
}

/// Whether an OTLP endpoint for traces is configured.
fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()))
}

/// The exporter's provider: batches spans on its own thread and posts them as protobuf.
fn otlp_provider() -> Result<SdkTracerProvider, String> {
    // The exporter's reqwest client comes without a crypto provider (see the workspace
    // manifest); a second install is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| e.to_string())?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("clawboo");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Set up logging (and tracing when configured) for this process, filtered by `RUST_LOG`
/// (default `warn`); reads `CLAWBOO_METRICS` too. Call once, first thing in `main`.
pub fn init() {
    clawboo_mcp::metrics::init_from_env();
    let env_filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let json = std::env::var(LOG_FORMAT_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("json"));
    let fmt = if json {
        // The edge spans stay enabled for the log layer, so a line logged inside a call
        // carries the call's fields (server, tool, team, agent, …).
        let spans = filter_fn(|meta: &Metadata<'_>| {
            meta.is_span() && edge_spans().would_enable(meta.target(), meta.level())
        });
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_filter(env_filter().or(spans))
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_filter(env_filter())
            .boxed()
    };
    let mut otel_error = None;
    let otel = if otlp_configured() {
        match otlp_provider() {
            Ok(provider) => {
                let tracer = provider.tracer("clawboo");
                let _ = PROVIDER.set(provider);
                Some(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        .with_filter(edge_spans()),
                )
            }
            Err(error) => {
                otel_error = Some(error);
                None
            }
        }
    } else {
        None
    };
    let _ = Registry::default().with(fmt).with(otel).try_init();
    if let Some(error) = otel_error {
        tracing::error!(
            "cannot export traces over OTLP ({error}); check OTEL_EXPORTER_OTLP_ENDPOINT. Running without traces"
        );
    }
}

/// Send the spans still batched (a stdio server exits when its client leaves; `serve`
/// on Ctrl-C). Nothing to do without an exporter.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.shutdown()
    {
        tracing::warn!(%error, "flushing traces at exit failed");
    }
}
