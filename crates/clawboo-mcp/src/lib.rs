//! Clawboo's MCP servers (tasks, memory, tools, teamchat) over the store, built on `rmcp`.
//!
//! Each server is a [`server::ToolSet`] served by [`server::McpServer`]; the same value is
//! served over stdio ([`stdio::serve_stdio`]) or Streamable HTTP (by `clawboo-server`). Only
//! this crate knows tool wire shapes: argument structs and their JSON Schemas, result
//! envelopes, and the mapping of store errors to tool-errors with `_meta.error` /
//! `_meta.denied`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use clawboo_mcp::{binding::Binding, server::McpServer, tasks::{TasksConfig, TasksServer}};
//! # async fn run() -> std::io::Result<()> {
//! let store = Arc::new(clawboo_store::Store::open("clawboo.db".as_ref()).expect("open"));
//! let tasks = TasksServer::new(store, TasksConfig { read_only: false, binding: Binding::default() });
//! clawboo_mcp::stdio::serve_stdio(McpServer::new(tasks)).await
//! # }
//! ```

// Refusals travel as `Err(CallToolResult)` from argument decoding to the reply; they are
// built once per failed call, so their size does not matter.
#![allow(clippy::result_large_err)]

pub mod attach;
pub mod binding;
mod elicit;
pub mod envelope;
mod handlers;
pub mod memory;
pub mod metrics;
pub mod probe;
pub mod protocol;
pub mod server;
mod server_name;
pub mod signing;
pub mod stdio;
pub mod tasks;
pub mod teamchat;
pub mod tools;
pub mod waits;

/// The four servers, by the short name used in URLs and binary names.
pub const MCP_SERVER_NAMES: [&str; 4] = ["tasks", "memory", "tools", "teamchat"];

/// The version every server reports in `serverInfo.version`.
pub const MCP_SERVER_VERSION: &str = "0.1.0";
