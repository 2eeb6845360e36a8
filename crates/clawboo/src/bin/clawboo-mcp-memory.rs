//! The Memory MCP server over stdio.
fn main() -> std::process::ExitCode {
    clawboo::stdio::bin_main("memory", clawboo::stdio::serve_memory)
}
