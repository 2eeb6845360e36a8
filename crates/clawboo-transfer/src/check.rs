//! `clawboo db check`: the engine's own integrity check and the board's invariants (SPEC
//! §18), each violation reported on its own.

use clawboo_store::db::{Findings, Tx};
use clawboo_store::{Store, StoreError};

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which check found it (`integrity_check`, `chat_seq_gap`, …).
    pub check: &'static str,
    /// What is wrong, naming the rows.
    pub detail: String,
}

/// What [`check`] looked at.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// The checks run, by name, in order.
    pub checks: Vec<&'static str>,
    /// Every violation found (none: the database is sound).
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// Add what another check (the engine's own, memory's index) ran and found.
    fn note(&mut self, findings: Findings) {
        self.checks.extend(findings.checks);
        self.violations.extend(
            findings
                .problems
                .into_iter()
                .map(|(check, detail)| Violation { check, detail }),
        );
    }
}

/// One invariant of the board, as a query returning one text per violating row.
struct Invariant {
    check: &'static str,
    /// What a violation means, before the rows it names.
    meaning: &'static str,
    sql: &'static str,
}

/// The invariants both engines state in the same SQL.
const INVARIANTS: &[Invariant] = &[
    Invariant {
        check: "in_progress_without_holder",
        meaning: "an in_progress task has no holder",
        sql: "SELECT id FROM tasks WHERE status = 'in_progress' AND assignee_agent_id IS NULL ORDER BY id",
    },
    Invariant {
        check: "lease_off_in_progress",
        meaning: "a task that is not in_progress holds a lease",
        sql: "SELECT id || ' (' || status || ')' FROM tasks
              WHERE status <> 'in_progress' AND lease_expires_at IS NOT NULL ORDER BY id",
    },
    Invariant {
        check: "subtask_without_parent",
        meaning: "a subtask's parent does not exist",
        sql: "SELECT c.id || ' -> ' || c.parent_task_id FROM tasks c
              WHERE c.parent_task_id IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = c.parent_task_id) ORDER BY c.id",
    },
    Invariant {
        check: "dependency_without_task",
        meaning: "a dependency names a task that does not exist",
        sql: "SELECT d.task_id || ' -> ' || d.depends_on_task_id FROM task_deps d
              WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = d.task_id)
                 OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = d.depends_on_task_id)
              ORDER BY 1",
    },
    Invariant {
        check: "self_dependency",
        meaning: "a task depends on itself",
        sql: "SELECT task_id FROM task_deps WHERE task_id = depends_on_task_id ORDER BY 1",
    },
    Invariant {
        check: "comment_without_task",
        meaning: "a comment's task does not exist",
        sql: "SELECT c.id || ' on ' || c.task_id FROM task_comments c
              WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = c.task_id) ORDER BY c.id",
    },
    Invariant {
        check: "chat_seq_gap",
        meaning: "a room's seqs are not 1, 2, 3, … without a gap",
        sql: "SELECT room_id || ': ' || CAST(count(*) AS TEXT) || ' posts, highest seq '
                  || CAST(max(seq) AS TEXT)
              FROM team_chat GROUP BY room_id HAVING count(*) <> max(seq) ORDER BY room_id",
    },
    Invariant {
        check: "procedure_version_gap",
        meaning: "a procedure's versions are not 1, 2, 3, … without a gap",
        sql: "SELECT name || ' (team ' || COALESCE(team_id, '-') || ', agent '
                  || COALESCE(agent_id, '-') || ', tenant ' || COALESCE(tenant_id, '-') || '): '
                  || CAST(count(*) AS TEXT) || ' versions, highest ' || CAST(max(version) AS TEXT)
              FROM memory_procedures
              GROUP BY name, team_id, agent_id, tenant_id
              HAVING count(*) <> max(version) ORDER BY 1",
    },
    Invariant {
        check: "short_id_counter_behind",
        meaning: "a team's next short id number was already given (a new task would repeat it)",
        sql: "SELECT k.key || ': next ' || CAST(k.next_number AS TEXT) || ', highest given '
                  || CAST(max(CAST(substr(t.short_id, length(k.key) + 2) AS BIGINT)) AS TEXT)
              FROM task_keys k JOIN tasks t ON t.short_id LIKE k.key || '-%'
              GROUP BY k.key, k.next_number
              HAVING max(CAST(substr(t.short_id, length(k.key) + 2) AS BIGINT)) >= k.next_number
              ORDER BY 1",
    },
    Invariant {
        check: "inbox_half_delivered",
        meaning: "an inbox row has a delivery time without a way, or a way without a time",
        sql: "SELECT id FROM agent_inbox
              WHERE (delivered_at IS NULL AND delivered_via IS NOT NULL)
                 OR (delivered_at IS NOT NULL AND delivered_via IS NULL) ORDER BY id",
    },
];

/// Most rows one violated invariant lists by name.
const LISTED: usize = 20;

/// Run every check on `store`: the engine's integrity check, then the invariants. A check
/// that cannot run is an error; a rule it finds broken is a [`Violation`].
pub fn check(store: &Store) -> Result<CheckReport, StoreError> {
    let mut report = CheckReport::default();
    store.snapshot(|tx| {
        let mut integrity = Findings::default();
        tx.check_integrity(&mut integrity)?;
        report.note(integrity);
        if store.lease_ms().is_some() {
            run(
                tx,
                &Invariant {
                    check: "in_progress_without_lease",
                    meaning: "an in_progress task has no lease while leases are on",
                    sql: "SELECT id FROM tasks WHERE status = 'in_progress'
                          AND lease_expires_at IS NULL ORDER BY id",
                },
                &mut report,
            )?;
        }
        for invariant in INVARIANTS {
            run(tx, invariant, &mut report)?;
        }
        Ok::<_, StoreError>(())
    })?;
    report.note(clawboo_memory::check_text_index(store)?);
    Ok(report)
}

fn run(tx: &dyn Tx, invariant: &Invariant, report: &mut CheckReport) -> Result<(), StoreError> {
    report.checks.push(invariant.check);
    let rows: Vec<String> = tx.query_map(invariant.sql, &[], |r| r.get(0))?;
    if !rows.is_empty() {
        let mut listed = rows
            .iter()
            .take(LISTED)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if rows.len() > LISTED {
            listed.push_str(&format!("; and {} more", rows.len() - LISTED));
        }
        report.violations.push(Violation {
            check: invariant.check,
            detail: format!("{} ({} rows): {listed}", invariant.meaning, rows.len()),
        });
    }
    Ok(())
}
