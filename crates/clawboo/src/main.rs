//! `clawboo`: run the coordination layer and operate it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use clawboo::approvals::ApprovalsCommand;
use clawboo::attach::AttachArgs;
use clawboo::board::BoardCommand;
use clawboo::db::DbCommand;
use clawboo::memory::{MemoryCommand, ModelsCommand};
use clawboo::reservations::{HooksCommand, ReservationsCommand};
use clawboo::serve::ServeArgs;
use clawboo::stdio::StdioArgs;

#[derive(Parser)]
#[command(
    name = "clawboo",
    version,
    about = "Many AI coding agents, one team: tasks, memory, tools and team chat over MCP."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API and the MCP servers over Streamable HTTP.
    Serve(ServeArgs),
    /// Print an attach snippet for an agent runtime (signed locally when scoped).
    Attach(AttachArgs),
    /// Serve one MCP server over stdio (tasks, memory, tools or teamchat).
    Mcp {
        /// Which server.
        server: String,
        #[command(flatten)]
        args: StdioArgs,
    },
    /// Operate on the board.
    Board {
        /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
        #[arg(long, global = true, value_name = "PATH_OR_URL")]
        db: Option<PathBuf>,
        #[command(subcommand)]
        command: BoardCommand,
    },
    /// Answer the tool broker's pending approvals.
    Approvals {
        /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
        #[arg(long, global = true, value_name = "PATH_OR_URL")]
        db: Option<PathBuf>,
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Maintain shared memory.
    Memory {
        /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
        #[arg(long, global = true, value_name = "PATH_OR_URL")]
        db: Option<PathBuf>,
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Check files against the agents' path reservations.
    Reservations {
        /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
        #[arg(long, global = true, value_name = "PATH_OR_URL")]
        db: Option<PathBuf>,
        #[command(subcommand)]
        command: ReservationsCommand,
    },
    /// Install git hooks in the current repository.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Move a board between databases, back it up, restore it, check it.
    Db {
        /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
        #[arg(long, global = true, value_name = "PATH_OR_URL")]
        db: Option<PathBuf>,
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Install local model files (the MiniLM sentence model for memory search).
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

fn main() -> ExitCode {
    clawboo::init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => clawboo::serve::run(args),
        Command::Attach(args) => clawboo::attach::run(args),
        Command::Mcp { server, args } => clawboo::stdio::run(&server, args),
        Command::Board { db, command } => clawboo::board::run(db, command),
        Command::Approvals { db, command } => clawboo::approvals::run(db, command),
        Command::Memory { db, command } => clawboo::memory::run(db, command),
        Command::Db { db, command } => clawboo::db::run(db, command),
        Command::Models { command } => clawboo::memory::run_models(command),
        Command::Reservations { db, command } => clawboo::reservations::run(db, command),
        Command::Hooks { command } => clawboo::reservations::run_hooks(command),
    };
    clawboo::telemetry::shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clawboo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
