//! The Tools MCP server (the tool broker) over stdio.
fn main() -> std::process::ExitCode {
    clawboo::stdio::bin_main("tools", clawboo::stdio::serve_tools)
}
