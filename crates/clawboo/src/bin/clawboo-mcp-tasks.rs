//! The Tasks MCP server over stdio.
fn main() -> std::process::ExitCode {
    clawboo::stdio::bin_main("tasks", clawboo::stdio::serve_tasks)
}
