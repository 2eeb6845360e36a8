//! REST routes, one module (and one `routes()` fn) per area; the live feed and the web board.

pub mod board;
pub mod chat;
pub mod events;
pub mod mcp;
pub mod memory;
pub mod reservations;
pub mod teams;
pub mod tools;
pub mod web;
