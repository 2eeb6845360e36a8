//! REST routes, one module (and one `routes()` fn) per area.

pub mod board;
pub mod chat;
pub mod mcp;
pub mod memory;
pub mod teams;
pub mod tools;
