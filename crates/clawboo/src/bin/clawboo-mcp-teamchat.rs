//! The TeamChat MCP server over stdio.
fn main() -> std::process::ExitCode {
    clawboo::stdio::bin_main("teamchat", clawboo::stdio::serve_teamchat)
}
