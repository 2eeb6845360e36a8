//! `clawboo reservations check` and `clawboo hooks install` (SPEC §19): a commit that
//! touches a file another agent has reserved is refused before it lands.
//!
//! The check reads the database directly, as every other operator command does, rather
//! than the REST API of a running `clawboo serve`: agents attached over stdio have no
//! server to ask, a hook must answer in milliseconds without a token, and the database the
//! agent's own MCP servers use is already in its environment (`CLAWBOO_DB_PATH`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::Subcommand;

/// The environment variable naming the agent a check runs as (its own reservations pass).
pub const AGENT_ENV: &str = "CLAWBOO_AGENT_ID";
/// The environment variable naming the team whose reservations a check reads.
pub const TEAM_ENV: &str = "CLAWBOO_TEAM_ID";

/// The first line of every hook `clawboo hooks install` writes, so a second install
/// rewrites its own hook instead of keeping it as "the existing hook".
const HOOK_MARK: &str = "# clawboo pre-commit hook (clawboo hooks install)";

/// What an existing pre-commit hook is renamed to; ours runs it first.
const PREVIOUS_HOOK: &str = "pre-commit.before-clawboo";

/// Reservation commands.
#[derive(Debug, Subcommand)]
pub enum ReservationsCommand {
    /// Exit non-zero, naming holder and task, when a file is reserved by another agent.
    Check {
        /// The team whose reservations count (default: every team).
        #[arg(long, env = TEAM_ENV)]
        team: Option<String>,
        /// Who is committing: this agent's own reservations pass.
        #[arg(long, env = AGENT_ENV)]
        agent: Option<String>,
        /// Paths relative to the repository root (default: the staged files of the
        /// current git repository).
        files: Vec<String>,
    },
}

/// Git hook commands.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Write `clawboo reservations check` as this repository's pre-commit hook, keeping
    /// an existing hook (it runs first).
    Install,
}

/// Run a reservations command.
pub fn run(db: Option<PathBuf>, command: ReservationsCommand) -> anyhow::Result<()> {
    let ReservationsCommand::Check { team, agent, files } = command;
    let files = if files.is_empty() {
        staged_files()?
    } else {
        files
    };
    if files.is_empty() {
        return Ok(());
    }
    let store = crate::open_db(db.as_deref(), crate::STDIO_PG_POOL)?;
    let reserved = store.reserved_files(team.as_deref(), agent.as_deref(), &files)?;
    if reserved.is_empty() {
        return Ok(());
    }
    for hit in &reserved {
        let r = &hit.reservation;
        eprintln!(
            "{}: reserved by {} for task {} (\"{}\") through {}",
            hit.file, r.holder, r.task_id, r.title, hit.pattern
        );
    }
    let who = agent.map_or_else(
        || format!("(no agent set: export {AGENT_ENV} to commit your own reservations)"),
        |a| format!("as {a}"),
    );
    bail!(
        "{} file(s) are reserved by other agents {who}: unstage them (git restore --staged FILE) or ask the holder in team chat; they are free once the task is released, done or blocked, or its lease runs out",
        reserved.len()
    )
}

/// The staged files of the git repository around the current directory, relative to its
/// root (added, copied, modified, renamed or deleted).
fn staged_files() -> anyhow::Result<Vec<String>> {
    let out = git(&[
        "diff",
        "--cached",
        "--name-only",
        "-z",
        "--diff-filter=ACMRD",
    ])?;
    Ok(out
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect())
}

fn git(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .output()
        .context("running git: is it installed and on PATH?")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}; run this inside a git repository",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("git printed a path that is not UTF-8")
}

/// Run a hooks command.
pub fn run_hooks(command: HooksCommand) -> anyhow::Result<()> {
    let HooksCommand::Install = command;
    let hooks = PathBuf::from(git(&["rev-parse", "--git-path", "hooks"])?.trim());
    std::fs::create_dir_all(&hooks)
        .with_context(|| format!("creating the hooks folder {}", hooks.display()))?;
    let hook = hooks.join("pre-commit");
    let kept = keep_existing(&hook, &hooks.join(PREVIOUS_HOOK))?;
    let exe = std::env::current_exe().context("finding the clawboo binary to call")?;
    std::fs::write(&hook, hook_script(&exe))
        .with_context(|| format!("writing {}", hook.display()))?;
    make_executable(&hook)?;
    println!(
        "installed {} (it runs clawboo reservations check as ${AGENT_ENV} on ${TEAM_ENV}, against $CLAWBOO_DB_PATH){}",
        hook.display(),
        if kept {
            format!("; your previous hook is kept as {PREVIOUS_HOOK} and runs first")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Move a pre-commit hook that is not ours aside to `previous`; whether one was kept.
fn keep_existing(hook: &Path, previous: &Path) -> anyhow::Result<bool> {
    match std::fs::read(hook) {
        Ok(text) if String::from_utf8_lossy(&text).contains(HOOK_MARK) => Ok(previous.exists()),
        Ok(_) => {
            if previous.exists() {
                bail!(
                    "{} exists and {} is not clawboo's: move one of them away, then install again",
                    previous.display(),
                    hook.display()
                );
            }
            std::fs::rename(hook, previous)
                .with_context(|| format!("keeping the existing hook as {}", previous.display()))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(previous.exists()),
        Err(e) => Err(e).with_context(|| format!("reading {}", hook.display())),
    }
}

/// The hook: the kept hook first, then the check, with the identity and database of the
/// environment the commit runs in.
fn hook_script(exe: &Path) -> String {
    let exe = exe.to_string_lossy().replace('\'', r"'\''");
    format!(
        "#!/bin/sh\n{HOOK_MARK}\n\
         previous=\"$(dirname \"$0\")/{PREVIOUS_HOOK}\"\n\
         if [ -x \"$previous\" ]; then \"$previous\" \"$@\" || exit $?; fi\n\
         exec '{exe}' reservations check\n"
    )
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}
