//! The lease rules on one store with a clock each test moves by hand.

use std::cell::Cell;
use std::time::Duration;

use super::*;
use crate::StoreConfig;
use crate::board::{AuthorType, CreatePolicy, NewComment, NewTask, TaskFilter};
use crate::chat::ChatQuery;

const LEASE_MS: i64 = 60_000;
const T0: i64 = 1_700_000_000_000;

thread_local! {
    static NOW: Cell<i64> = const { Cell::new(T0) };
}

fn clock() -> i64 {
    NOW.with(Cell::get)
}

fn advance(ms: i64) {
    NOW.with(|now| now.set(now.get() + ms));
}

fn store() -> (tempfile::TempDir, Store) {
    NOW.with(|now| now.set(T0));
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        clock,
        lease: Some(Duration::from_millis(LEASE_MS as u64)),
        ..StoreConfig::default()
    };
    let store = Store::open_with(&dir.path().join("leases.db"), config).unwrap();
    (dir, store)
}

fn task(store: &Store, title: &str, team: Option<&str>) -> Task {
    let new = NewTask {
        team_id: team.map(str::to_owned),
        ..NewTask::titled(title)
    };
    store.create_task(new, CreatePolicy::Uncapped).unwrap()
}

fn comments(store: &Store, id: &str) -> Vec<(AuthorType, String)> {
    let detail = store.task_detail(id, Scope::ALL).unwrap().unwrap();
    detail
        .comments
        .into_iter()
        .map(|c| (c.author_type, c.body))
        .collect()
}

#[test]
fn a_claim_is_a_lease_with_a_growing_token_and_reclaiming_your_own_renews_it() {
    let (_dir, store) = store();
    let t = task(&store, "write docs", None);
    assert_eq!(t.claim_token, 0);
    assert_eq!(t.lease_expires_at, None);
    let claimed = store.claim_task(&t.id, "alice", None).unwrap();
    assert_eq!(claimed.claim_token, 1);
    assert_eq!(claimed.lease_expires_at, Some(T0 + LEASE_MS));
    advance(10_000);
    let again = store.claim_task(&t.id, "alice", None).unwrap();
    assert_eq!(again.claim_token, 1, "a renewal is not a new claim");
    assert_eq!(again.lease_expires_at, Some(T0 + 10_000 + LEASE_MS));
    assert!(matches!(
        store.claim_task(&t.id, "bob", None),
        Err(StoreError::Conflict)
    ));
    let released = store.release_task(&t.id, None, Scope::ALL).unwrap();
    assert_eq!(released.lease_expires_at, None);
    let reclaimed = store.claim_task(&t.id, "bob", None).unwrap();
    assert_eq!(reclaimed.claim_token, 2);
    let done = store
        .set_status(&t.id, Status::Done, None, None, Scope::ALL)
        .unwrap();
    assert_eq!(
        done.lease_expires_at, None,
        "only in_progress holds a lease"
    );
}

#[test]
fn an_expired_lease_is_reclaimed_once_with_a_comment_an_inbox_row_and_a_room_post() {
    let (_dir, store) = store();
    let t = task(&store, "ship it", Some("alpha"));
    store.claim_task(&t.id, "alice", None).unwrap();
    advance(LEASE_MS - 1);
    assert!(store.expire_leases().unwrap().is_empty(), "not yet");
    advance(1);
    let reclaimed = store.expire_leases().unwrap();
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].holder, "alice");
    assert_eq!(reclaimed[0].expired_at, T0 + LEASE_MS);
    assert!(store.expire_leases().unwrap().is_empty(), "exactly once");

    let after = store.get_task(&t.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(after.status, Status::Todo);
    assert_eq!(after.assignee_agent_id, None);
    assert_eq!(after.lease_expires_at, None);
    assert_eq!(after.reclaimed_at, Some(T0 + LEASE_MS));
    assert_eq!(after.reclaimed_from.as_deref(), Some("alice"));
    let notes = comments(&store, &t.id);
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].0, AuthorType::System);
    assert!(
        notes[0]
            .1
            .contains("alice's lease ran out at 2023-11-14T22:14:20Z"),
        "{}",
        notes[0].1
    );
    let inbox = store
        .take_inbox("alice", Some("alpha"), 10, "test")
        .unwrap();
    assert_eq!(inbox.len(), 1);
    assert!(
        inbox[0].body.contains("claim it again"),
        "{}",
        inbox[0].body
    );
    let room = store
        .read_chat(&ChatQuery {
            room_id: &chat::team_room("alpha"),
            since_seq: 0,
            limit: 10,
            exclude_author: None,
        })
        .unwrap();
    assert_eq!(room.posts.len(), 1);
    assert_eq!(room.posts[0].kind, PostKind::System);

    // The next claim clears the marker.
    let bob = store.claim_task(&t.id, "bob", None).unwrap();
    assert_eq!((bob.claim_token, bob.reclaimed_at), (2, None));
}

#[test]
fn a_claim_or_a_list_that_meets_an_expired_lease_reclaims_it() {
    let (_dir, store) = store();
    let t = task(&store, "a", None);
    store.claim_task(&t.id, "alice", None).unwrap();
    advance(LEASE_MS);
    let bob = store.claim_task(&t.id, "bob", None).unwrap();
    assert_eq!(bob.assignee_agent_id.as_deref(), Some("bob"));
    assert_eq!(comments(&store, &t.id).len(), 1);
    advance(LEASE_MS);
    let page = store
        .list_tasks_page(&TaskFilter::default(), None, 10)
        .unwrap();
    assert_eq!(page.tasks[0].status, Status::Todo);
    assert_eq!(comments(&store, &t.id).len(), 2);
}

#[test]
fn calls_renew_leases_only_once_less_than_half_remains() {
    let (_dir, store) = store();
    let t = task(&store, "a", None);
    store.claim_task(&t.id, "alice", None).unwrap();
    assert!(store.call_record_due("alice", None), "never recorded");
    store.record_call("alice", None).unwrap();
    let lease = |s: &Store| {
        s.get_task(&t.id, Scope::ALL)
            .unwrap()
            .unwrap()
            .lease_expires_at
    };
    assert_eq!(
        lease(&store),
        Some(T0 + LEASE_MS),
        "more than half left: kept"
    );
    assert!(!store.call_record_due("alice", None));
    advance(LEASE_MS / 2 + 1);
    assert!(store.call_record_due("alice", None));
    store.record_call("alice", None).unwrap();
    assert_eq!(lease(&store), Some(clock() + LEASE_MS));
    let seen = store.agents_seen(None).unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].last_seen_at, Some(clock()));
    assert!(seen[0].alive);
    assert_eq!(seen[0].held[0].lease_expires_at, Some(clock() + LEASE_MS));
    // A call after the lease ran out does not bring it back.
    advance(LEASE_MS);
    store.record_call("alice", None).unwrap();
    assert_eq!(store.expire_leases().unwrap().len(), 1);
    advance(LEASE_MS);
    assert!(
        !store.agents_seen(None).unwrap()[0].alive,
        "silent for a lease"
    );
}

#[test]
fn a_stale_claim_token_is_refused_and_changes_nothing() {
    let (_dir, store) = store();
    let t = task(&store, "a", None);
    let first = store.claim_task(&t.id, "alice", None).unwrap().claim_token;
    advance(LEASE_MS);
    let second = store.claim_task(&t.id, "bob", None).unwrap().claim_token;
    let stale = Scope::ALL.fenced(Some(first));
    let err = store
        .set_status(&t.id, Status::Done, Some("alice"), Some("alice"), stale)
        .unwrap_err();
    assert_eq!(err.code(), "stale_claim");
    assert!(err.to_string().contains("held by bob"), "{err}");
    let comment = NewComment {
        author_agent_id: Some("alice".into()),
        author_type: AuthorType::Agent,
        body: "done!".into(),
    };
    assert_eq!(
        store
            .add_comment(&t.id, comment.clone(), stale)
            .unwrap_err()
            .code(),
        "stale_claim"
    );
    assert_eq!(
        store.release_task(&t.id, None, stale).unwrap_err().code(),
        "stale_claim"
    );
    let still = store.get_task(&t.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(
        (still.status, still.assignee_agent_id.as_deref()),
        (Status::InProgress, Some("bob"))
    );
    assert_eq!(comments(&store, &t.id).len(), 1, "only the expiry's");
    let current = Scope::ALL.fenced(Some(second));
    store.add_comment(&t.id, comment, current).unwrap();
    store.release_task(&t.id, None, current).unwrap();
    assert_eq!(
        store
            .set_status(&t.id, Status::Blocked, None, None, current)
            .unwrap_err()
            .code(),
        "stale_claim",
        "a released claim is over"
    );
}

#[test]
fn claim_next_takes_the_first_ready_task_in_scope_and_skips_other_runtimes() {
    let (_dir, store) = store();
    let low = task(&store, "low", Some("alpha"));
    let high = store
        .create_task(
            NewTask {
                priority: Some(5),
                team_id: Some("alpha".into()),
                ..NewTask::titled("high")
            },
            CreatePolicy::Uncapped,
        )
        .unwrap();
    let codex_only = store
        .create_task(
            NewTask {
                priority: Some(9),
                team_id: Some("alpha".into()),
                assignee_runtime: Some("codex".into()),
                ..NewTask::titled("codex")
            },
            CreatePolicy::Uncapped,
        )
        .unwrap();
    let waiting = task(&store, "waiting", Some("alpha"));
    store.link_task(&waiting.id, &low.id, Scope::ALL).unwrap();
    task(&store, "other team", Some("beta"));
    let alpha = Scope::team(Some("alpha"));
    let claude = |agent| Claimant {
        agent_id: agent,
        runtime: Some("claude-code"),
        paths: None,
    };
    let next = |who| store.claim_next(who, alpha).unwrap().map(|t| t.id);
    assert_eq!(next(claude("a")), Some(high.id));
    assert_eq!(next(claude("b")), Some(low.id.clone()));
    assert_eq!(
        next(claude("c")),
        None,
        "codex's task and a waiting one are left"
    );
    let codex = Claimant {
        agent_id: "d",
        runtime: Some("codex"),
        paths: None,
    };
    let got = store
        .claim_next(codex, alpha)
        .unwrap()
        .expect("codex's task is ready");
    assert_eq!((got.id, got.claim_token), (codex_only.id, 1));
    assert_eq!(got.lease_expires_at, Some(T0 + LEASE_MS));
    let seen = store.agents_seen(Some("alpha")).unwrap();
    assert_eq!(
        seen.iter()
            .find(|a| a.id == "d")
            .unwrap()
            .runtime
            .as_deref(),
        Some("codex")
    );
    store
        .set_status(&low.id, Status::Done, None, None, Scope::ALL)
        .unwrap();
    assert_eq!(next(claude("e")), Some(waiting.id));
}

#[test]
fn with_leases_off_claims_never_expire() {
    NOW.with(|now| now.set(T0));
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        clock,
        lease: None,
        ..StoreConfig::default()
    };
    let store = Store::open_with(&dir.path().join("off.db"), config).unwrap();
    let t = task(&store, "a", None);
    let claimed = store.claim_task(&t.id, "alice", None).unwrap();
    assert_eq!((claimed.claim_token, claimed.lease_expires_at), (1, None));
    advance(100 * LEASE_MS);
    assert!(store.expire_leases().unwrap().is_empty());
    store.record_call("alice", None).unwrap();
    assert_eq!(
        store
            .get_task(&t.id, Scope::ALL)
            .unwrap()
            .unwrap()
            .assignee_agent_id
            .as_deref(),
        Some("alice")
    );
}

/// The expiry rule runs inside every claim: it must read only expired leases, never walk
/// the claimed tasks (SQLite's plan; PostgreSQL's statement has no hint).
#[test]
fn the_expiry_rule_reads_only_the_lease_index() {
    let (_dir, store) = store();
    let plan = store
        .read_sqlite(|c| {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {}", EXPIRE_LEASES.sqlite))?;
            let rows = stmt.query_map([1], |r| r.get::<_, String>(3))?;
            Ok::<_, StoreError>(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .unwrap()
        .join(" | ");
    assert!(
        plan.contains("INDEX tasks_by_lease (lease_expires_at<?)"),
        "{plan}"
    );
}

/// A claim made while leases were off (or before they existed) gets a lease when a store
/// opens with them on, so its holder cannot keep the task forever.
#[test]
fn claims_without_a_lease_get_one_when_leases_are_on() {
    NOW.with(|now| now.set(T0));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let open = |lease: Option<Duration>| {
        let config = StoreConfig {
            clock,
            lease,
            ..StoreConfig::default()
        };
        Store::open_with(&path, config).unwrap()
    };
    let off = open(None);
    let t = task(&off, "old claim", None);
    let claimed = off.claim_task(&t.id, "alice", Some("codex")).unwrap();
    assert_eq!(claimed.lease_expires_at, None);
    drop(off);
    advance(5_000);
    let on = open(Some(Duration::from_millis(LEASE_MS as u64)));
    let leased = on.get_task(&t.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(leased.lease_expires_at, Some(T0 + 5_000 + LEASE_MS));
    assert_eq!(leased.assignee_agent_id.as_deref(), Some("alice"));
    advance(LEASE_MS);
    let reclaimed = on.expire_leases().unwrap();
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].holder, "alice");
    // Back in todo as a release leaves it: nobody's, for any runtime.
    let back = on.get_task(&t.id, Scope::ALL).unwrap().unwrap();
    assert_eq!((back.status, back.assignee_runtime), (Status::Todo, None));
}

#[test]
fn lease_times_read_as_utc_iso() {
    assert_eq!(utc_iso(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc_iso(T0 + LEASE_MS), "2023-11-14T22:14:20Z");
    assert_eq!(utc_iso(951_782_399_999), "2000-02-28T23:59:59Z");
    assert_eq!(utc_iso(951_868_800_000), "2000-03-01T00:00:00Z");
    assert_eq!(utc_iso(1_709_208_000_000), "2024-02-29T12:00:00Z");
    assert_eq!(utc_iso(-1), "1969-12-31T23:59:59Z");
}

#[test]
fn entering_in_progress_by_status_is_a_claim() {
    let (_dir, store) = store();
    let dep = task(&store, "first", Some("red"));
    let t = task(&store, "second", Some("red"));
    store.link_task(&t.id, &dep.id, Scope::ALL).unwrap();
    let alice = Scope::bound(Some("red"), Some("alice"));
    let to_progress = |who: Option<&str>, scope: Scope<'_>| {
        store.set_status(&t.id, Status::InProgress, who, who, scope)
    };
    // Not ready: refused with the claim's own reason, nothing changed.
    assert!(matches!(
        to_progress(Some("alice"), alice),
        Err(StoreError::NotReady)
    ));
    // Nobody to hold it: refused, saying how to name one.
    let nobody = to_progress(None, Scope::ALL).unwrap_err();
    assert!(
        matches!(&nobody, StoreError::Invalid(text) if text.contains("assigneeAgentId")),
        "{nobody}"
    );
    let untouched = store.get_task(&t.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(
        (
            untouched.status,
            untouched.assignee_agent_id,
            untouched.claim_token
        ),
        (Status::Todo, None, 0)
    );
    // Ready: the mover holds it, with a lease and a new claim token.
    store.claim_task(&dep.id, "dora", None).unwrap();
    store
        .set_status(&dep.id, Status::Done, None, None, Scope::ALL)
        .unwrap();
    let held = to_progress(Some("alice"), alice).unwrap();
    assert_eq!(
        (
            held.status,
            held.assignee_agent_id.as_deref(),
            held.claim_token,
            held.lease_expires_at
        ),
        (Status::InProgress, Some("alice"), 1, Some(T0 + LEASE_MS))
    );
    // Reclaimed after its lease ran out, the stale holder's fenced move is refused; an
    // unfenced one is a claim anew like anyone's.
    advance(LEASE_MS);
    assert_eq!(store.expire_leases().unwrap().len(), 1);
    let stale = alice.fenced(Some(held.claim_token));
    assert_eq!(
        to_progress(Some("alice"), stale).unwrap_err().code(),
        "stale_claim"
    );
    let bob = store
        .set_status(
            &t.id,
            Status::InProgress,
            Some("op"),
            Some("bob"),
            Scope::ALL,
        )
        .unwrap();
    assert_eq!(
        (bob.assignee_agent_id.as_deref(), bob.claim_token),
        (Some("bob"), 2)
    );
    // A blocked task nobody holds is claimed the same way when it goes back to work.
    let blocked = task(&store, "third", Some("red"));
    store
        .set_status(&blocked.id, Status::Blocked, None, None, Scope::ALL)
        .unwrap();
    let resumed = store
        .set_status(
            &blocked.id,
            Status::InProgress,
            None,
            Some("carol"),
            Scope::ALL,
        )
        .unwrap();
    assert_eq!(
        (
            resumed.assignee_agent_id.as_deref(),
            resumed.lease_expires_at.is_some()
        ),
        (Some("carol"), true)
    );
}

#[test]
fn a_call_on_one_team_renews_no_lease_on_another() {
    let (_dir, store) = store();
    let blue = task(&store, "blue work", Some("blue"));
    let red = task(&store, "red work", Some("red"));
    store
        .claim_task_in(
            &blue.id,
            "alice",
            None,
            Scope::bound(Some("blue"), Some("alice")),
        )
        .unwrap();
    store
        .claim_task_in(
            &red.id,
            "alice",
            None,
            Scope::bound(Some("red"), Some("alice")),
        )
        .unwrap();
    // alice keeps calling on red only.
    for _ in 0..4 {
        advance(LEASE_MS / 2 + 1);
        store.record_call("alice", Some("red")).unwrap();
    }
    let reclaimed = store.expire_leases().unwrap();
    assert_eq!(
        reclaimed
            .iter()
            .map(|r| r.task_id.as_str())
            .collect::<Vec<_>>(),
        [blue.id.as_str()],
        "red's lease was renewed, blue's ran out"
    );
    // Liveness is per team too.
    let on = |team: &str| {
        store
            .agents_seen(Some(team))
            .unwrap()
            .into_iter()
            .find(|a| a.id == "alice")
            .map(|a| (a.alive, a.held.len()))
    };
    assert_eq!(on("red"), Some((true, 1)));
    assert_eq!(
        on("blue"),
        None,
        "never seen on blue, holding nothing there"
    );
    store.record_call("alice", Some("blue")).unwrap();
    assert_eq!(on("blue"), Some((true, 0)));
}
