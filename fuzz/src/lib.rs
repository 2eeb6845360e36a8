//! Shared by the libFuzzer targets: one store and one runtime per fuzzing process, and a
//! session through the real stdio front that returns every line the server wrote.

use std::sync::{Arc, OnceLock};

use clawboo_embed::HashedEmbedder;
use clawboo_mcp::binding::Binding;
use clawboo_mcp::memory::{MemoryConfig, MemoryServer};
use clawboo_mcp::server::McpServer;
use clawboo_mcp::stdio::serve_lines;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_mcp::teamchat::TeamChatServer;
use clawboo_mcp::tools::{ToolsConfig, ToolsServer};
use clawboo_store::Store;
use clawboo_store::broker::BrokerConfig;
use clawboo_store::memory::Memory;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

/// The `initialize` request every session starts with.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;

struct Shared {
    runtime: Runtime,
    store: Arc<Store>,
    memory: Arc<Memory>,
    _dir: tempfile::TempDir,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(Store::open(&dir.path().join("fuzz.db")).expect("open the store"));
        let memory = Arc::new(Memory::new(
            store.clone(),
            Some(Arc::new(HashedEmbedder::default())),
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Shared {
            runtime,
            store,
            memory,
            _dir: dir,
        }
    })
}

/// The four servers, by index (modulo 4).
pub const SERVERS: [&str; 4] = ["tasks", "memory", "tools", "teamchat"];

/// Feed `input` (then EOF) to server `which` behind the stdio front; every output line,
/// checked to be a well-formed JSON-RPC message.
pub fn run_session(which: usize, input: &[u8]) -> Vec<Value> {
    let s = shared();
    let output = match SERVERS[which % SERVERS.len()] {
        "tasks" => drive(
            McpServer::new(TasksServer::new(s.store.clone(), TasksConfig::default())),
            input,
        ),
        "memory" => drive(
            McpServer::new(MemoryServer::new(
                s.memory.clone(),
                MemoryConfig::default(),
            )),
            input,
        ),
        "tools" => {
            let broker = BrokerConfig {
                approval_wait: std::time::Duration::from_millis(1),
                poll_interval: std::time::Duration::from_millis(1),
                env: |_| None,
                ..BrokerConfig::default()
            };
            let config = ToolsConfig {
                binding: Binding::default(),
                broker,
            };
            drive(
                McpServer::new(ToolsServer::new(s.store.clone(), config)),
                input,
            )
        }
        _ => drive(
            McpServer::new(TeamChatServer::new(s.store.clone(), Binding::default())),
            input,
        ),
    };
    let text = String::from_utf8(output).expect("the front writes UTF-8");
    text.lines().map(check_message).collect()
}

fn drive<H: rmcp::ServerHandler>(handler: H, input: &[u8]) -> Vec<u8> {
    shared().runtime.block_on(async move {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let served = tokio::spawn(serve_lines(handler, server_read, server_write));
        let input = input.to_vec();
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let write = async move {
            client_write.write_all(&input).await.expect("write input");
            client_write.shutdown().await.expect("close input");
        };
        let mut output = Vec::new();
        let read = client_read.read_to_end(&mut output);
        let (_, read) = tokio::join!(write, read);
        read.expect("read output");
        served
            .await
            .expect("the front did not panic")
            .expect("the front ends cleanly at EOF");
        output
    })
}

/// Parse one output line and assert it is well-formed JSON-RPC.
pub fn check_message(line: &str) -> Value {
    let message: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("non-JSON output {line:?}: {e}"));
    assert_eq!(message["jsonrpc"], json!("2.0"), "{line}");
    if message.get("method").is_none() {
        let id = &message["id"];
        assert!(
            id.is_string() || id.is_number() || id.is_null(),
            "bad id: {line}"
        );
        assert!(
            message.get("result").is_some() != message.get("error").is_some(),
            "not a response: {line}"
        );
    }
    message
}
