//! Which path memory's vector search takes, as an operator learns it from `serve`'s banner
//! and `/api/mcp/status`, through the real binary: pgvector's HNSW index on a PostgreSQL
//! server with the extension (test.sh's pgvector run sets `CLAWBOO_TEST_PGVECTOR=1`), the
//! exact scan on one without, the in-process scan on SQLite.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{Server, get_json};

#[tokio::test]
async fn serve_and_status_name_the_vector_search_path() {
    let (server, banner) = Server::start_with_banner();
    let text = banner.join("\n");
    let status = get_json(&server.url("/api/mcp/status")).await;
    let memory = &status["memory"];
    let pgvector = std::env::var("CLAWBOO_TEST_PGVECTOR").is_ok_and(|v| v == "1");
    let (path, banner_says) = match (server.db.is_postgres(), pgvector) {
        (false, _) => (
            "in-process",
            "vector search by exact scan in this process (SQLite)",
        ),
        (true, true) => ("pgvector-hnsw", "HNSW index"),
        (true, false) => (
            "exact-scan",
            "vector search by exact scan (the PostgreSQL server has no pgvector",
        ),
    };
    assert_eq!(memory["vectorSearch"], path, "{status}");
    assert_eq!(
        memory["backend"],
        if server.db.is_postgres() {
            "postgres"
        } else {
            "sqlite"
        }
    );
    let line = banner
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("memory:"))
        .unwrap_or_else(|| panic!("no memory line in {text}"))
        .trim();
    assert!(line.contains(banner_says), "{text}");
    assert_eq!(
        memory["vectorSearchDetail"]
            .as_str()
            .map(|d| format!("vector search by {d}")),
        Some(line.to_owned())
    );
}
