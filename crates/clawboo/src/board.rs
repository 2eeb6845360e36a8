//! `clawboo board …`: operator commands on the board.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use clawboo_store::board::{Scope, Status, TaskFilter};

/// Board operator commands.
#[derive(Debug, Subcommand)]
pub enum BoardCommand {
    /// List tasks (dropped ones are hidden unless --include-dropped).
    List {
        #[arg(long)]
        team: Option<String>,
        #[arg(long)]
        status: Option<String>,
        /// Only claimable work.
        #[arg(long)]
        ready: bool,
        #[arg(long)]
        include_dropped: bool,
        #[arg(long)]
        json: bool,
    },
    /// Soft-delete a task: hidden from lists, claims and ready; frees a child-cap slot.
    Drop {
        /// The task's id or short id (RED-12).
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Undo a drop.
    Restore {
        /// The task's id or short id (RED-12).
        id: String,
        #[arg(long)]
        json: bool,
    },
}

/// Run one board command, printing text for a person or JSON with `--json`.
pub fn run(db: Option<PathBuf>, command: BoardCommand) -> anyhow::Result<()> {
    let store = crate::open_db(db.as_deref(), crate::STDIO_PG_POOL)?;
    match command {
        BoardCommand::List {
            team,
            status,
            ready,
            include_dropped,
            json,
        } => {
            let status = match status {
                Some(s) => Some(s.parse::<Status>().map_err(|_| {
                    anyhow::anyhow!("unknown status {s:?}; use one of backlog, todo, in_progress, in_review, blocked, done, cancelled")
                })?),
                None => None,
            };
            let tasks = store.list_tasks(&TaskFilter {
                team_id: team,
                status,
                ready,
                include_dropped,
                scoped: false,
            })?;
            if json {
                println!("{}", serde_json::json!({ "tasks": tasks }));
            } else if tasks.is_empty() {
                println!("no tasks");
            } else {
                let now = store.now_ms();
                for t in tasks {
                    let who = t.assignee_agent_id.as_deref().unwrap_or("-");
                    let lease = t
                        .lease_expires_at
                        .map_or_else(|| "-".to_owned(), |at| lease_left(at - now));
                    let dropped = if t.dropped { " (dropped)" } else { "" };
                    println!(
                        "{:<9} {}  {:<11}  p{:<3} {:<16} {:<12} {}{}",
                        t.short_id.as_deref().unwrap_or("-"),
                        t.id,
                        t.status,
                        t.priority,
                        who,
                        lease,
                        t.title,
                        dropped
                    );
                }
            }
        }
        BoardCommand::Drop { id, json } => set_dropped(&store, &id, true, json)?,
        BoardCommand::Restore { id, json } => set_dropped(&store, &id, false, json)?,
    }
    Ok(())
}

fn set_dropped(
    store: &clawboo_store::Store,
    id: &str,
    dropped: bool,
    json: bool,
) -> anyhow::Result<()> {
    let task = match store.set_dropped(id, dropped, Scope::operator("cli")) {
        Ok(t) => t,
        Err(clawboo_store::StoreError::NotFound(_)) => {
            bail!(
                "no task {id}; `clawboo board list --include-dropped` shows every id and short id"
            )
        }
        Err(e) => return Err(e).context("cannot update the task"),
    };
    if json {
        println!("{}", serde_json::json!({ "task": task }));
    } else {
        println!(
            "{} {} ({}): {}",
            if dropped { "dropped" } else { "restored" },
            task.short_id.as_deref().unwrap_or("-"),
            task.id,
            task.title
        );
    }
    Ok(())
}

/// A lease's time left as `lease 12m05s` (`lease expired` once it ran out).
fn lease_left(ms: i64) -> String {
    if ms <= 0 {
        return "lease expired".to_owned();
    }
    let secs = (ms + 999) / 1000;
    match (secs / 3600, secs / 60 % 60, secs % 60) {
        (0, 0, s) => format!("lease {s}s"),
        (0, m, s) => format!("lease {m}m{s:02}s"),
        (h, m, _) => format!("lease {h}h{m:02}m"),
    }
}
