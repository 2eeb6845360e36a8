//! The names of the four MCP servers, as URLs, commands, attach ids and signed scopes spell
//! them. A module of its own because both the attach URLs and the signatures over them
//! name a server; parsing one from text is in [`crate::attach`].

use std::fmt;

/// One of the four MCP servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpServerName {
    Tasks,
    Memory,
    Tools,
    Teamchat,
}

impl McpServerName {
    /// Every server, in [`crate::MCP_SERVER_NAMES`] order.
    pub const ALL: [McpServerName; 4] = [
        McpServerName::Tasks,
        McpServerName::Memory,
        McpServerName::Tools,
        McpServerName::Teamchat,
    ];

    /// The short name (`tasks`, …) used in URLs and commands.
    pub fn as_str(self) -> &'static str {
        match self {
            McpServerName::Tasks => "tasks",
            McpServerName::Memory => "memory",
            McpServerName::Tools => "tools",
            McpServerName::Teamchat => "teamchat",
        }
    }

    /// The attach id, `clawboo-<server>` (also the server's `serverInfo.name`).
    pub fn attach_id(self) -> String {
        format!("clawboo-{}", self.as_str())
    }
}

impl fmt::Display for McpServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
