//! REST routes, one module (and one `routes()` fn) per area.

pub mod board;
pub mod mcp;
pub mod teams;
