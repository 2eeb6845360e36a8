//! Which MCP servers `clawboo serve` mounts: one entry per server, each built through
//! `clawboo-mcp`'s builder with the session's binding.

use std::sync::Arc;

use clawboo_broker::{BrokerConfig, Executor};
use clawboo_exec::Builtins;
use clawboo_mcp::attach::McpServerName;
use clawboo_mcp::memory::{MemoryConfig, MemoryServer};
use clawboo_mcp::server::McpServer;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_mcp::teamchat::TeamChatServer;
use clawboo_mcp::tools::{ToolsConfig, ToolsServer};
use clawboo_mcp::waits::WaitLimit;
use clawboo_memory::Memory;
use clawboo_store::Store;

use crate::mcp_http::McpHttpConfig;
use crate::status::McpMount;

/// Every server this build can serve over HTTP; their waits (long-polls, approval waits)
/// count against `waits` together.
pub fn default_mounts(
    store: &Arc<Store>,
    memory: &Arc<Memory>,
    signer: &ScopeSigner,
    config: McpHttpConfig,
    waits: &WaitLimit,
) -> Vec<McpMount> {
    let (tools_waits, teamchat_waits) = (waits.clone(), waits.clone());
    let tasks_store = store.clone();
    let teamchat_store = store.clone();
    let tools_store = store.clone();
    let memory = memory.clone();
    let broker = BrokerConfig::from_env();
    let executor: Arc<dyn Executor> = Arc::new(Builtins::from_env());
    vec![
        McpMount::new(
            McpServerName::Tasks,
            signer.clone(),
            config,
            move |binding| {
                let config = TasksConfig {
                    read_only: false,
                    binding,
                };
                McpServer::new(TasksServer::new(tasks_store.clone(), config))
            },
        ),
        McpMount::new(
            McpServerName::Memory,
            signer.clone(),
            config,
            move |binding| {
                McpServer::new(MemoryServer::new(memory.clone(), MemoryConfig { binding }))
            },
        ),
        McpMount::new(
            McpServerName::Tools,
            signer.clone(),
            config,
            move |binding| {
                let config = ToolsConfig {
                    binding,
                    broker: broker.clone(),
                    executor: executor.clone(),
                    waits: tools_waits.clone(),
                };
                McpServer::new(ToolsServer::new(tools_store.clone(), config))
            },
        ),
        McpMount::new(
            McpServerName::Teamchat,
            signer.clone(),
            config,
            move |binding| {
                McpServer::new(TeamChatServer::new(
                    teamchat_store.clone(),
                    binding,
                    teamchat_waits.clone(),
                ))
            },
        ),
    ]
}
