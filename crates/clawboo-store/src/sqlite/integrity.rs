//! SQLite's own integrity checks, for `clawboo db check` ([`crate::db::Tx::check_integrity`]).

use crate::db::{DbRow, Findings, Tx, Value};
use crate::error::Result;

/// `PRAGMA integrity_check` (every page, index and constraint) and `foreign_key_check`.
pub(crate) fn check(tx: &dyn Tx, found: &mut Findings) -> Result<()> {
    found.checks.push("integrity_check");
    let lines: Vec<String> = tx.query_map("PRAGMA integrity_check", &[], |r| shown(r, 0))?;
    for line in lines.into_iter().filter(|l| l != "ok") {
        found.problems.push(("integrity_check", line));
    }
    found.checks.push("foreign_key_check");
    let broken: Vec<String> = tx.query_map("PRAGMA foreign_key_check", &[], |r| {
        Ok(format!(
            "row {} of {} names a missing row of {}",
            shown(r, 1)?,
            shown(r, 0)?,
            shown(r, 2)?
        ))
    })?;
    for detail in broken {
        found.problems.push(("foreign_key_check", detail));
    }
    Ok(())
}

/// A column of any type, as text for a report (the pragmas' columns are loosely typed).
fn shown(row: &dyn DbRow, index: usize) -> Result<String> {
    Ok(match row.value(index)? {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(t) => t.to_owned(),
        Value::Blob(b) => format!("{} bytes", b.len()),
    })
}
