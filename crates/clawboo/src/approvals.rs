//! `clawboo approvals …`: a human answers the tool broker's pending approvals while the
//! agent's call waits (from any process: the decision lands in the shared database).

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use clawboo_broker::{Approval, ApprovalError, ApprovalStatus, BrokerStore, Decision};

/// Approval operator commands.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List pending approvals (every recent one with --all).
    List {
        /// Include decided and expired approvals.
        #[arg(long)]
        all: bool,
        /// At most this many rows.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Allow one waiting call, once.
    Allow {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Allow it and do not ask again for this tool and this (bound) agent.
    Always {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Deny it: the agent's call returns `denied: approval:deny`.
    Deny {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

/// Run one approvals command, printing text for a person or JSON with `--json`.
pub fn run(db: Option<PathBuf>, command: ApprovalsCommand) -> anyhow::Result<()> {
    let store = crate::open_db(db.as_deref(), crate::STDIO_PG_POOL)?;
    let (id, decision, json) = match command {
        ApprovalsCommand::List { all, limit, json } => {
            let approvals = store
                .list_approvals(!all, limit)
                .context("cannot read approvals")?;
            if json {
                println!("{}", serde_json::json!({ "approvals": approvals }));
            } else {
                print_list(&approvals, store.now_ms(), all);
            }
            return Ok(());
        }
        ApprovalsCommand::Allow { id, json } => (id, Decision::AllowOnce, json),
        ApprovalsCommand::Always { id, json } => (id, Decision::AllowAlways, json),
        ApprovalsCommand::Deny { id, json } => (id, Decision::Deny, json),
    };
    let approval = match store.resolve_approval(&id, decision, "cli") {
        Ok(approval) => approval,
        Err(ApprovalError::Store(e)) => return Err(e).context("cannot record the decision"),
        Err(refused) => anyhow::bail!("{refused}"),
    };
    let remembered = decision == Decision::AllowAlways && approval.agent_id.is_some();
    if json {
        println!(
            "{}",
            serde_json::json!({ "approval": approval, "remembered": remembered })
        );
    } else {
        let verb = match decision {
            Decision::AllowOnce => "allowed once".to_string(),
            Decision::AllowAlways if remembered => format!(
                "allowed; {} will not ask again for agent {} in team {} and tenant {} \
                 (the same agent elsewhere still asks)",
                approval.tool_name,
                approval.agent_id.as_deref().unwrap_or_default(),
                approval.team_id.as_deref().unwrap_or("(none)"),
                approval.tenant_id.as_deref().unwrap_or("(none)")
            ),
            Decision::AllowAlways => {
                "allowed once (the caller is anonymous, so nothing is remembered)".to_string()
            }
            Decision::Deny => "denied".to_string(),
        };
        println!("{} {}: {verb}", approval.id, approval.tool_name);
    }
    Ok(())
}

fn print_list(approvals: &[Approval], now: i64, all: bool) {
    if approvals.is_empty() {
        println!(
            "{}",
            if all {
                "no approvals"
            } else {
                "no pending approvals"
            }
        );
        return;
    }
    for a in approvals {
        let who = a.agent_id.as_deref().unwrap_or("anonymous");
        let when = if a.status == ApprovalStatus::Pending {
            format!("expires in {}s", ((a.expires_at - now).max(0) + 999) / 1000)
        } else {
            a.decision
                .map(|d| d.as_str().to_string())
                .unwrap_or_default()
        };
        println!(
            "{}  {:<8} {:<12} {:<12} agent={who}  {when}",
            a.id, a.status, a.tool_name, a.risk
        );
        println!("    args: {}", a.args_json);
    }
    if !all {
        println!("decide with: clawboo approvals allow|always|deny <id>");
    }
}
