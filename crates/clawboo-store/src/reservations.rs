//! Path reservations (SPEC §19): a claim may name glob patterns of the repository its team
//! shares (`src/store/**`, `README.md`); they are the task's `paths`, reserved for as long
//! as the task is claimed `in_progress` under a live lease. A reservation has no row of its
//! own: release, done, block and expiry free it by moving the task, and renewal renews it
//! with the lease. A claim whose patterns overlap another agent's live reservation on the
//! same team is refused ([`StoreError::Reserved`]); the check and the claim run in one
//! transaction serialized per team (`lock`), so two claimers in any processes on any
//! hosts never both win overlapping paths.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex_automata::dfa::{Automaton, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};
use serde::Serialize;

use crate::Store;
use crate::db::Tx;
use crate::error::{Result, StoreError};
use crate::reads::{Query, Reads, RowsRead, ready_now};
use crate::run::RunError;
use crate::writes::Writes;

/// Most patterns one task may reserve.
pub const MAX_PATHS: usize = 32;
/// Longest accepted pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 200;

/// Joins a task's patterns in its `paths` column (a pattern never holds a line break).
const SEPARATOR: char = '\n';

/// The glob `pattern` as reservations read it: `*`, `?` and classes never cross a `/`,
/// `**` does, as in git's pathspecs and most editors.
fn glob(pattern: &str) -> std::result::Result<Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// `paths` checked and normalised (a leading `./` dropped, repeats dropped): each a valid
/// glob relative to the repository root, without `..`, at most [`MAX_PATHS`] of them.
pub fn normalize_paths(paths: &[String]) -> Result<Vec<String>> {
    if paths.len() > MAX_PATHS {
        return Err(StoreError::Invalid(format!(
            "paths has {} patterns; the limit is {MAX_PATHS}: reserve a directory (dir/**) instead of its files",
            paths.len()
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(paths.len());
    for raw in paths {
        let mut pattern = raw.trim();
        while let Some(rest) = pattern.strip_prefix("./") {
            pattern = rest;
        }
        let bad = |why: &str| {
            StoreError::Invalid(format!(
                "paths: {raw:?} {why}; write a glob relative to the repository root, such as src/store/** or README.md"
            ))
        };
        if pattern.is_empty() {
            return Err(bad("is empty"));
        }
        if pattern.starts_with('/') {
            return Err(bad("is absolute"));
        }
        if pattern.contains(['\n', '\r', '\0']) {
            return Err(bad("holds a line break or NUL"));
        }
        if pattern.split('/').any(|part| part == "..") {
            return Err(bad("climbs out with .."));
        }
        if pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(bad(&format!(
                "is longer than {MAX_PATTERN_CHARS} characters"
            )));
        }
        if let Err(e) = glob(pattern) {
            return Err(bad(&format!("is not a glob pattern ({})", e.kind())));
        }
        if !out.iter().any(|p| p == pattern) {
            out.push(pattern.to_owned());
        }
    }
    Ok(out)
}

/// The `paths` column's text of `paths` (`None` for none).
pub(crate) fn join(paths: &[String]) -> Option<String> {
    (!paths.is_empty()).then(|| paths.join(&SEPARATOR.to_string()))
}

/// The patterns of a `paths` column's text.
pub(crate) fn split(text: Option<&str>) -> Vec<String> {
    text.map(|t| {
        t.split(SEPARATOR)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// A pattern compiled for overlap tests: a DFA over the bytes of a path.
struct Compiled {
    text: String,
    /// `None` when the pattern does not compile (a row written by hand): it then overlaps
    /// only a pattern spelled the same.
    dfa: Option<dense::DFA<Vec<u32>>>,
}

impl Compiled {
    fn new(pattern: &str) -> Compiled {
        let dfa = glob(pattern).ok().and_then(|g| {
            dense::Builder::new()
                .syntax(syntax::Config::new().utf8(false))
                .thompson(thompson::Config::new().utf8(false))
                .configure(dense::Config::new().dfa_size_limit(Some(1 << 22)))
                .build(g.regex())
                .ok()
        });
        Compiled {
            text: pattern.to_owned(),
            dfa,
        }
    }

    fn overlaps(&self, other: &Compiled) -> bool {
        match (&self.dfa, &other.dfa) {
            (Some(a), Some(b)) => intersects(a, b),
            _ => self.text == other.text,
        }
    }
}

/// Whether two globs overlap: some path matches both (`src/**` and `src/store/*.rs` do;
/// `src/a*` and `src/b*` share a prefix and do not).
pub fn overlap(a: &str, b: &str) -> bool {
    Compiled::new(a).overlaps(&Compiled::new(b))
}

/// Whether some byte string takes both DFAs to a match: a breadth-first walk of their
/// product from the two start states. `globset` matches a path against globs but has no
/// intersection of two globs, and no maintained crate decides it; both globs are regular
/// languages, so `regex-automata` compiles each (from the regex `globset` makes of it) to a
/// DFA and this walk finds a common word exactly, never by comparing prefixes.
fn intersects(a: &dense::DFA<Vec<u32>>, b: &dense::DFA<Vec<u32>>) -> bool {
    let input = Input::new(&b""[..]).anchored(Anchored::Yes);
    let (Ok(start_a), Ok(start_b)) = (a.start_state_forward(&input), b.start_state_forward(&input))
    else {
        // Unreachable for globs (no look-behind); say "overlaps", the safe answer.
        return true;
    };
    let mut seen = HashSet::from([(start_a, start_b)]);
    let mut queue = VecDeque::from([(start_a, start_b)]);
    while let Some((x, y)) = queue.pop_front() {
        if a.is_match_state(a.next_eoi_state(x)) && b.is_match_state(b.next_eoi_state(y)) {
            return true;
        }
        for byte in 0..=u8::MAX {
            let (nx, ny) = (a.next_state(x, byte), b.next_state(y, byte));
            if a.is_dead_state(nx) || b.is_dead_state(ny) {
                continue;
            }
            if seen.insert((nx, ny)) {
                queue.push_back((nx, ny));
            }
        }
    }
    false
}

/// A live reservation: the paths of a task claimed `in_progress` under a lease that has
/// not run out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub task_id: String,
    pub title: String,
    pub team_id: Option<String>,
    pub holder: String,
    pub paths: Vec<String>,
    /// When it lapses unless the holder keeps calling (none while leases are off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<i64>,
}

/// A file another agent has reserved, as [`Store::reserved_files`] finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservedFile {
    pub file: String,
    /// The pattern that reserves it.
    pub pattern: String,
    pub reservation: Reservation,
}

/// Live reservations, `?1` now and `?2` the team. A task's team is matched exactly (a
/// team-less task's reservations are among team-less tasks).
const LIVE_ON_TEAM: &str = "SELECT id, title, team_id, assignee_agent_id, paths, lease_expires_at
     FROM tasks
     WHERE status = 'in_progress' AND assignee_agent_id IS NOT NULL AND paths IS NOT NULL
       AND dropped = 0 AND (lease_expires_at IS NULL OR lease_expires_at > ?1)
       AND team_id IS NOT DISTINCT FROM CAST(?2 AS TEXT)
     ORDER BY id";

/// [`LIVE_ON_TEAM`] on every team when `?2` is NULL.
const LIVE_ANY_TEAM: &str = "SELECT id, title, team_id, assignee_agent_id, paths, lease_expires_at
     FROM tasks
     WHERE status = 'in_progress' AND assignee_agent_id IS NOT NULL AND paths IS NOT NULL
       AND dropped = 0 AND (lease_expires_at IS NULL OR lease_expires_at > ?1)
       AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)
     ORDER BY team_id, id";

fn live(tx: &dyn Tx, sql: &'static str, now: i64, team: Option<&str>) -> Result<Vec<Reservation>> {
    ready_now(live_on(tx, sql, now, team))
}

/// [`live`] on any transaction.
async fn live_on<R: Reads + ?Sized>(
    tx: &R,
    sql: &'static str,
    now: i64,
    team: Option<&str>,
) -> Result<Vec<Reservation>> {
    let query = Query::new(sql, &[&now, &team]);
    tx.query_map(query, reservation_from_row).await
}

/// One row of [`LIVE_ON_TEAM`] or [`LIVE_ANY_TEAM`].
fn reservation_from_row(r: &dyn crate::db::DbRow) -> Result<Reservation> {
    Ok(Reservation {
        task_id: r.get(0)?,
        title: r.get(1)?,
        team_id: r.get(2)?,
        holder: r.get(3)?,
        paths: split(r.get::<Option<String>>(4)?.as_deref()),
        lease_expires_at: r.get(5)?,
    })
}

/// Make the rest of the caller's write the only one reserving paths on `team`, so the
/// check below and the claim it allows are one step across processes and hosts.
pub(crate) async fn lock_on<W: Writes + ?Sized>(tx: &W, team: Option<&str>) -> Result<()> {
    tx.serialize_on(format!("reservations:{}", team.unwrap_or("")))
        .await
}

/// The live reservations on `team` other than `agent`'s own, inside the caller's write,
/// after [`lock_on`].
pub(crate) async fn held_by_others_on<R: Reads + ?Sized>(
    tx: &R,
    now: i64,
    team: Option<&str>,
    agent: &str,
) -> Result<Vec<Reservation>> {
    let mut held = live_on(tx, LIVE_ON_TEAM, now, team).await?;
    held.retain(|r| r.holder != agent);
    Ok(held)
}

/// The first reservation in `held` that `paths` overlap, as the refusal that names it.
pub(crate) fn first_conflict(paths: &[String], held: &[Reservation]) -> Option<StoreError> {
    let mine: Vec<Compiled> = paths.iter().map(|p| Compiled::new(p)).collect();
    held.iter().find_map(|r| {
        let overlapping: Vec<(String, String)> = r
            .paths
            .iter()
            .map(|p| Compiled::new(p))
            .flat_map(|theirs| {
                mine.iter()
                    .filter(|m| m.overlaps(&theirs))
                    .map(|m| (m.text.clone(), theirs.text.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        (!overlapping.is_empty()).then(|| StoreError::Reserved {
            holder: r.holder.clone(),
            task_id: r.task_id.clone(),
            title: r.title.clone(),
            overlapping,
        })
    })
}

/// Refuse `agent`'s reservation of `paths` for `task_id` on `team` when another agent
/// holds an overlapping one, inside the caller's write: takes [`lock_on`] first. The task's
/// own reservation is not in the way: a claim of a task someone holds is a conflict,
/// which the claim itself reports.
pub(crate) async fn ensure_free<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    team: Option<&str>,
    agent: &str,
    task_id: &str,
    paths: &[String],
) -> Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    lock_on(tx, team).await?;
    let mut held = held_by_others_on(tx, now, team, agent).await?;
    held.retain(|r| r.task_id != task_id);
    match first_conflict(paths, &held) {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

impl Store {
    /// Every live reservation on `team` (every team when `None`), by team then task.
    pub fn reservations(&self, team: Option<&str>) -> Result<Vec<Reservation>> {
        let now = self.now_ms();
        self.read(|tx| live(tx, LIVE_ANY_TEAM, now, team))
    }

    /// [`Store::reservations`] for an async caller, run the way the engine runs reads
    /// best ([`Store::run_read_committed`]).
    pub async fn reservations_async(
        self: &Arc<Store>,
        team: Option<String>,
    ) -> std::result::Result<Result<Vec<Reservation>>, RunError> {
        let now = self.now_ms();
        let read = RowsRead {
            query: Query::new(LIVE_ANY_TEAM, &[&now, &team]),
            decode: reservation_from_row,
        };
        self.run_read_committed(read).await
    }

    /// Which of `files` (paths relative to the repository root) a live reservation on
    /// `team` (any team when `None`) of an agent other than `agent` covers: what a
    /// pre-commit check refuses.
    pub fn reserved_files(
        &self,
        team: Option<&str>,
        agent: Option<&str>,
        files: &[String],
    ) -> Result<Vec<ReservedFile>> {
        let now = self.now_ms();
        let held = self.read(|tx| live(tx, LIVE_ANY_TEAM, now, team))?;
        let mut found = Vec::new();
        for reservation in held.iter().filter(|r| Some(r.holder.as_str()) != agent) {
            let matchers: Vec<(String, GlobMatcher)> = reservation
                .paths
                .iter()
                .filter_map(|p| glob(p).ok().map(|g| (p.clone(), g.compile_matcher())))
                .collect();
            for file in files {
                let file = file.strip_prefix("./").unwrap_or(file);
                if let Some((pattern, _)) = matchers.iter().find(|(_, m)| m.is_match(file)) {
                    found.push(ReservedFile {
                        file: file.to_owned(),
                        pattern: pattern.clone(),
                        reservation: reservation.clone(),
                    });
                }
            }
        }
        found.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_glob_overlaps_the_files_below_it() {
        assert!(overlap("src/**", "src/store/*.rs"));
        assert!(overlap("src/store/*.rs", "src/**"));
        assert!(overlap("**/*.rs", "src/lib.rs"));
        assert!(overlap("src/**", "src/**"));
        assert!(overlap("**", "README.md"));
    }

    #[test]
    fn globs_sharing_a_prefix_need_not_overlap() {
        assert!(!overlap("src/a*", "src/b*"));
        assert!(!overlap("src/store/*.rs", "src/store/*.md"));
        assert!(!overlap("docs/**", "src/**"));
        // `*` stops at `/`: no path is both one level under src/ and two levels under it.
        assert!(!overlap("src/*", "src/*/*"));
        assert!(overlap("src/*", "src/**"));
    }

    #[test]
    fn character_classes_and_single_characters_are_exact() {
        assert!(overlap("src/[ab].rs", "src/b.rs"));
        assert!(!overlap("src/[ab].rs", "src/c.rs"));
        assert!(!overlap("src/[a-c]*.rs", "src/[d-f]*.rs"));
        assert!(overlap("src/[a-c]*.rs", "src/[!a]x.rs"));
        assert!(!overlap("src/[!a-z].rs", "src/q.rs"));
        assert!(overlap("src/?.rs", "src/x.rs"));
        assert!(!overlap("src/?.rs", "src/xy.rs"));
        assert!(!overlap("src/?", "src/a/b"), "? never matches a /");
        assert!(overlap("src/??.rs", "src/a*.rs"));
        assert!(overlap("src/{lib,main}.rs", "src/main.rs"));
        assert!(!overlap("src/{lib,main}.rs", "src/mod.rs"));
    }

    #[test]
    fn patterns_are_normalised_or_refused_with_what_to_write() {
        let ok = normalize_paths(&["./src/**".into(), "README.md".into(), "src/**".into()]);
        assert_eq!(ok.unwrap(), ["src/**", "README.md"]);
        for bad in [
            "",
            "  ",
            "/etc/passwd",
            "../x",
            "src/../../x",
            "src/[",
            "a\nb",
        ] {
            let err = normalize_paths(&[bad.to_owned()]).unwrap_err();
            assert!(
                err.to_string().contains("relative to the repository root"),
                "{bad:?}: {err}"
            );
        }
        let many: Vec<String> = (0..=MAX_PATHS).map(|i| format!("f{i}")).collect();
        assert!(normalize_paths(&many).is_err());
    }

    #[test]
    fn the_column_round_trips() {
        let paths = vec!["src/**".to_owned(), "README.md".to_owned()];
        assert_eq!(split(join(&paths).as_deref()), paths);
        assert_eq!(join(&[]), None);
        assert!(split(None).is_empty());
    }
}
