//! Writes written once as `async` code ([`crate::writes`]), on both backends
//! (`TestStore::new` picks): run through `Store::run_transaction` a claim decides what the
//! synchronous one decides, racing claims have one winner, what a write raised reaches
//! its waiters only once it committed, and on PostgreSQL a write cut short before its
//! commit changes nothing and leaves its connection clean.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures_util::FutureExt;

use crate::board::{
    AuthorType, CreatePolicy, MAX_CHILDREN, MAX_PAGE, MAX_ROOTS_PER_WINDOW, NewComment, NewTask,
    OwnedScope, TaskFilter, TaskMove, TaskPatch,
};
use crate::chat::{ChatQuery, PostKind, team_room};
use crate::db::Dialect;
use crate::delegate::Delegation;
use crate::error::CapReason;
use crate::leases::Claimant;
use crate::links::LinkKind;
use crate::task::{Scope, Status, Task};
use crate::teams::NewAgent;
use crate::testing::TestStore;
use crate::{Store, StoreConfig, StoreError};

fn create(store: &Store, title: &str, paths: &[&str]) -> Task {
    let new = NewTask {
        team_id: Some("red".into()),
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        ..NewTask::titled(title)
    };
    store.create_task(new, CreatePolicy::Uncapped).unwrap()
}

/// A task of team blue, which team red's callers never see.
fn create_blues(store: &Store) -> Task {
    let new = NewTask {
        team_id: Some("blue".into()),
        ..NewTask::titled("blue's")
    };
    store.create_task(new, CreatePolicy::Uncapped).unwrap()
}

/// Claim `id` for `agent` in team red's scope, asynchronously.
async fn claim(
    store: &Arc<Store>,
    id: &str,
    agent: &str,
    paths: Option<&[&str]>,
) -> Result<Task, StoreError> {
    let paths = paths.map(|p| p.iter().map(|p| (*p).to_owned()).collect());
    store
        .claim_reserving_async(id.into(), agent.into(), None, paths, Some("red".into()))
        .await
        .expect("the claim ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_claim_decides_what_the_synchronous_one_decides() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "free", &[]);

    let claimed = claim(&store, &task.id, "agent-1", None).await.unwrap();
    assert_eq!(claimed.status, Status::InProgress);
    assert_eq!(claimed.assignee_agent_id.as_deref(), Some("agent-1"));
    assert_eq!(claimed.claim_token, task.claim_token + 1);
    assert!(claimed.lease_expires_at.is_some());
    assert_eq!(
        store.get_task(&task.id, Scope::ALL).unwrap().as_ref(),
        Some(&claimed),
        "the answer is the task as committed"
    );
    // Claiming a task you hold renews it; another agent's claim is a conflict.
    let again = claim(&store, &task.id, "agent-1", None).await.unwrap();
    assert_eq!(again.claim_token, claimed.claim_token);
    let taken = claim(&store, &task.id, "agent-2", None).await;
    assert!(matches!(taken, Err(StoreError::Conflict)), "{taken:?}");

    // Not ready while a dependency is open; unknown, or outside the team: not found.
    let blocked = create(&store, "blocked", &[]);
    let first = create(&store, "first", &[]);
    store.link_task(&blocked.id, &first.id, Scope::ALL).unwrap();
    let refused = claim(&store, &blocked.id, "agent-1", None).await;
    assert!(matches!(refused, Err(StoreError::NotReady)), "{refused:?}");
    let refused = claim(&store, "no-such-task", "agent-1", None).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );
    let blue = create_blues(&store);
    let refused = claim(&store, &blue.id, "agent-1", None).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );
    let refused = claim(&store, &first.id, " ", None).await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );

    // Paths another agent reserved are refused, naming the holder; free ones are taken.
    let docs = create(&store, "docs", &["docs/**"]);
    claim(&store, &docs.id, "agent-1", None).await.unwrap();
    let overlapping = create(&store, "readme", &[]);
    let refused = claim(
        &store,
        &overlapping.id,
        "agent-2",
        Some(&["docs/README.md"]),
    )
    .await;
    match refused {
        Err(StoreError::Reserved {
            holder, task_id, ..
        }) => {
            assert_eq!(
                (holder.as_str(), task_id.as_str()),
                ("agent-1", docs.id.as_str())
            );
        }
        other => panic!("expected a reservation refusal, got {other:?}"),
    }
    assert_eq!(
        store
            .get_task(&overlapping.id, Scope::ALL)
            .unwrap()
            .unwrap()
            .status,
        Status::Todo,
        "a refused claim changed nothing"
    );
    let src = claim(&store, &overlapping.id, "agent-2", Some(&["src/**"]))
        .await
        .unwrap();
    assert_eq!(src.paths, vec!["src/**".to_owned()]);

    // A claim naming its runtime puts the agent on the roster with it.
    let coded = create(&store, "coded", &[]);
    let runtime = store
        .claim_reserving_async(
            coded.id.clone(),
            "agent-3".into(),
            Some("codex".into()),
            None,
            Some("red".into()),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(runtime.assignee_agent_id.as_deref(), Some("agent-3"));
    let roster: Option<String> = store
        .read(|tx| {
            tx.query_one(
                "SELECT runtime FROM agents WHERE id = ?1",
                &[&"agent-3"],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(roster.as_deref(), Some("codex"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_claims_have_exactly_one_winner() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for round in 0..5 {
        let task = create(&store, &format!("contested {round}"), &[]);
        let claims = (0..12).map(|i| {
            let (store, id) = (Arc::clone(&store), task.id.clone());
            tokio::spawn(async move { claim(&store, &id, &format!("agent-{i}"), None).await })
        });
        let mut winners = Vec::new();
        for outcome in futures_util::future::join_all(claims).await {
            match outcome.unwrap() {
                Ok(task) => winners.push(task.assignee_agent_id.unwrap()),
                Err(StoreError::Conflict) => {}
                Err(other) => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let held = store.get_task(&task.id, Scope::ALL).unwrap().unwrap();
        assert_eq!(held.assignee_agent_id.as_ref(), winners.first());
    }
}

/// A clock of one test's own (tests run side by side, and each moves its clock on).
macro_rules! test_clock {
    ($now:ident, $clock:ident) => {
        static $now: AtomicI64 = AtomicI64::new(1_700_000_000_000);

        fn $clock() -> i64 {
            $now.load(Ordering::Relaxed)
        }
    };
}

test_clock!(RECLAIMING_NOW, reclaiming_clock);
test_clock!(REFUSED_NOW, refused_clock);
test_clock!(RECORDING_NOW, recording_clock);

/// A store on `clock` with one-minute leases, whose listener (on PostgreSQL) has
/// connected, so its "you may have missed posts" wake-up is behind us.
async fn leased_store(test: &TestStore, clock: fn() -> i64) -> Arc<Store> {
    let config = StoreConfig {
        clock,
        lease: Some(Duration::from_secs(60)),
        ..StoreConfig::default()
    };
    let store = Arc::new(test.store_with(config));
    tokio::time::sleep(Duration::from_millis(500)).await;
    store
}

fn room_posts(store: &Store) -> usize {
    let query = ChatQuery {
        room_id: &team_room("red"),
        since_seq: 0,
        limit: 100,
        exclude_author: None,
    };
    store.read_chat(&query).unwrap().posts.len()
}

/// A task agent-1 claimed whose lease then lapsed (`now`, the store's clock, moved past
/// it), and a listener on team red's room marked after that.
async fn lapse_a_lease(store: &Arc<Store>, now: &AtomicI64) -> (Task, crate::Listener) {
    let lapsing = create(store, "lapsing", &[]);
    claim(store, &lapsing.id, "agent-1", None).await.unwrap();
    now.fetch_add(61_000, Ordering::Relaxed);
    let mut room = store.listen_to_room(&team_room("red"));
    room.mark();
    (lapsing, room)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_reclaims_a_lapsed_lease_wakes_the_room_once_committed() {
    let test = TestStore::new();
    let store = leased_store(&test, reclaiming_clock).await;
    let next = create(&store, "next", &[]);
    let (lapsing, mut room) = lapse_a_lease(&store, &RECLAIMING_NOW).await;
    let claiming = {
        let store = Arc::clone(&store);
        let id = next.id.clone();
        tokio::spawn(async move { claim(&store, &id, "agent-2", None).await })
    };
    room.heard(Duration::from_secs(10)).await;
    // The wake comes after the commit: the first read after it sees the narration.
    assert_eq!(room_posts(&store), 1, "woken before the commit");
    claiming.await.unwrap().unwrap();
    let reclaimed = store.get_task(&lapsing.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(reclaimed.status, Status::Todo);
    assert_eq!(reclaimed.reclaimed_from.as_deref(), Some("agent-1"));
    let inbox = store
        .take_inbox("agent-1", Some("red"), 10, "test")
        .unwrap();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0].source, "lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_refused_after_reclaiming_undoes_the_reclaim_and_wakes_nobody() {
    let test = TestStore::new();
    let store = leased_store(&test, refused_clock).await;
    let blocked = create(&store, "blocked", &[]);
    let first = create(&store, "first", &[]);
    store.link_task(&blocked.id, &first.id, Scope::ALL).unwrap();
    let (lapsing, mut room) = lapse_a_lease(&store, &REFUSED_NOW).await;
    // The claim reclaims the lapsed lease and narrates it, then is refused: not ready.
    let refused = claim(&store, &blocked.id, "agent-2", None).await;
    assert!(matches!(refused, Err(StoreError::NotReady)), "{refused:?}");
    let quiet = Duration::from_millis(300);
    let started = std::time::Instant::now();
    room.heard(quiet).await;
    assert!(
        started.elapsed() >= quiet,
        "a rolled-back post woke the room"
    );
    assert_eq!(room_posts(&store), 0);
    let still = store.get_task(&lapsing.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(
        still.status,
        Status::InProgress,
        "the reclaim rolled back with the claim"
    );
    assert!(
        store
            .take_inbox("agent-1", Some("red"), 10, "test")
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_short_strands_no_later_write_and_no_transaction() {
    let test = TestStore::new();
    // One connection, so the next write reuses the one the cut write held.
    let store = Arc::new(test.store_on_one_connection());
    let cut_task = create(&store, "cut", &[]);
    let other = create(&store, "other", &[]);
    // Warm: the connection is open and the claim's statements prepared.
    let warm = create(&store, "warm", &[]);
    claim(&store, &warm.id, "agent-0", None).await.unwrap();
    {
        let mut cut = pin!(claim(&store, &cut_task.id, "agent-1", None));
        // On PostgreSQL this sends the claim's `BEGIN` and its statements, the claim's
        // update among them, and leaves it waiting for their answer. On SQLite it queues
        // the write and gathers others to join its group.
        let _ = cut.as_mut().now_or_never();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The next write runs (on SQLite nobody is left draining the queue unless the cut
    // call handed that on) and, on PostgreSQL, on the same connection: had the cut
    // transaction stayed open, this write's commit would commit the cut claim too.
    let after = claim(&store, &other.id, "agent-2", None).await.unwrap();
    assert_eq!(after.assignee_agent_id.as_deref(), Some("agent-2"));
    let cut_now = store.get_task(&cut_task.id, Scope::ALL).unwrap().unwrap();
    if store.dialect() == Dialect::Postgres {
        assert_eq!(
            cut_now.status,
            Status::Todo,
            "a write cut short before its commit changed nothing"
        );
    }
    let page = store
        .list_tasks_page(&TaskFilter::default(), None, 10)
        .unwrap();
    assert_eq!(page.tasks.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_posts_take_one_seq_each_with_no_gap() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let posts = (0..12).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .post_chat_async(
                    "room".into(),
                    format!("agent-{i}"),
                    PostKind::Peer,
                    format!("post {i}"),
                )
                .await
        })
    });
    let mut seqs = Vec::new();
    for posted in futures_util::future::join_all(posts).await {
        seqs.push(posted.unwrap().unwrap().unwrap().seq);
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=12).collect::<Vec<i64>>());
    for (room, body) in [("room", " "), ("", "hi")] {
        let refused = store
            .post_chat_async(room.into(), "agent-0".into(), PostKind::Peer, body.into())
            .await
            .unwrap();
        assert!(
            matches!(refused, Err(StoreError::Invalid(_))),
            "{refused:?}"
        );
    }
    assert_eq!(
        store
            .read_chat(&ChatQuery {
                room_id: "room",
                since_seq: 0,
                limit: 100,
                exclude_author: None
            })
            .unwrap()
            .posts
            .len(),
        12
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_call_record_renews_a_lease_under_half_and_remembers_when_next() {
    let test = TestStore::new();
    let store = leased_store(&test, recording_clock).await;
    let task = create(&store, "held", &[]);
    let held = claim(&store, &task.id, "agent-1", None).await.unwrap();
    RECORDING_NOW.fetch_add(31_000, Ordering::Relaxed);
    assert!(store.call_record_due("agent-1", Some("red")));
    store
        .record_call_async("agent-1".into(), Some("red".into()))
        .await
        .unwrap()
        .unwrap();
    let renewed = store.get_task(&task.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(renewed.lease_expires_at, Some(recording_clock() + 60_000));
    assert!(renewed.lease_expires_at > held.lease_expires_at);
    assert!(
        !store.call_record_due("agent-1", Some("red")),
        "recorded just now"
    );
    let seen: i64 = store
        .read(|tx| {
            tx.query_one(
                "SELECT last_seen_at FROM agent_presence WHERE agent_id = ?1 AND team_key = ?2",
                &[&"agent-1", &"red"],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(seen, recording_clock());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_committed_asynchronously_wakes_another_hosts_room() {
    // Hosts hear each other's posts by PostgreSQL's `NOTIFY`; SQLite's processes share
    // one host and poll.
    let Some(test) = TestStore::postgres() else {
        return;
    };
    let poster = Arc::new(test.store());
    let other_host = test.store();
    // Both listeners have connected, so their "you may have missed posts" is behind us.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut room = other_host.listen_to_room("room");
    room.mark();
    let started = std::time::Instant::now();
    poster
        .post_chat_async(
            "room".into(),
            "agent-1".into(),
            PostKind::Peer,
            "hello".into(),
        )
        .await
        .unwrap()
        .unwrap();
    room.heard(Duration::from_secs(10)).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the other host heard"
    );
}

/// Create `title` asynchronously with the caps on, as a caller bound to team red.
async fn create_capped(
    store: &Arc<Store>,
    title: &str,
    parent: Option<&Task>,
) -> Result<Task, StoreError> {
    let new = NewTask {
        parent_task_id: parent.map(|p| p.id.clone()),
        ..NewTask::titled(title)
    };
    store
        .create_task_async(new, CreatePolicy::Capped, Some("red".into()))
        .await
        .expect("the create ran")
}

fn cap_of(refused: Result<Task, StoreError>) -> CapReason {
    match refused {
        Err(StoreError::Cap { reason, .. }) => reason,
        other => panic!("expected a cap, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_create_keeps_every_cap_the_synchronous_one_keeps() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let root = create_capped(&store, "  root  ", None).await.unwrap();
    assert_eq!(
        (root.title.as_str(), root.team_id.as_deref(), root.status),
        ("root", Some("red"), Status::Todo)
    );
    assert_eq!(
        store.get_task(&root.id, Scope::ALL).unwrap().as_ref(),
        Some(&root)
    );

    // Depth: the root's child's child is as deep as a task goes.
    let child = create_capped(&store, "child", Some(&root)).await.unwrap();
    assert_eq!(child.parent_task_id.as_deref(), Some(root.id.as_str()));
    let grandchild = create_capped(&store, "grandchild", Some(&child))
        .await
        .unwrap();
    let too_deep = create_capped(&store, "too deep", Some(&grandchild)).await;
    assert_eq!(cap_of(too_deep), CapReason::DepthCap);

    // Children: a parent takes MAX_CHILDREN.
    for i in 1..MAX_CHILDREN {
        create_capped(&store, &format!("sibling {i}"), Some(&root))
            .await
            .unwrap();
    }
    let one_more = create_capped(&store, "one more", Some(&root)).await;
    assert_eq!(cap_of(one_more), CapReason::ChildCap);

    // A parent unknown, or of another team, and a task created in progress are refused.
    let ghost = Task {
        id: "no-such-task".into(),
        ..root.clone()
    };
    assert_eq!(
        cap_of(create_capped(&store, "orphan", Some(&ghost)).await),
        CapReason::ParentNotFound
    );
    let blue = create_blues(&store);
    assert_eq!(
        cap_of(create_capped(&store, "stray", Some(&blue)).await),
        CapReason::ParentNotFound,
        "another team's parent is hidden from a caller bound to red"
    );
    let in_progress = NewTask {
        status: Some(Status::InProgress),
        ..NewTask::titled("started")
    };
    let refused = store
        .create_task_async(in_progress, CreatePolicy::Capped, Some("red".into()))
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );

    // Roots: MAX_ROOTS_PER_WINDOW in the window, the root above included.
    for i in 1..MAX_ROOTS_PER_WINDOW {
        create_capped(&store, &format!("root {i}"), None)
            .await
            .unwrap();
    }
    let flood = create_capped(&store, "flood", None).await;
    assert_eq!(cap_of(flood), CapReason::RootRateCap);
    let listed = store
        .list_tasks_page(&TaskFilter::default(), None, MAX_PAGE)
        .unwrap()
        .tasks
        .len();
    let expected = MAX_ROOTS_PER_WINDOW + MAX_CHILDREN + 1 + 1; // roots, children, grandchild, blue's
    assert_eq!(
        listed,
        usize::try_from(expected).unwrap(),
        "refused creates wrote nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_creates_take_every_short_id_once_with_no_gap() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let creates = (0..12).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let new = NewTask::titled(format!("task {i}"));
            store
                .create_task_async(new, CreatePolicy::Uncapped, Some("green".into()))
                .await
        })
    });
    let mut numbers = Vec::new();
    for created in futures_util::future::join_all(creates).await {
        let short = created.unwrap().unwrap().unwrap().short_id.unwrap();
        let (key, number) = short.rsplit_once('-').unwrap();
        assert_eq!(key, "GRE");
        numbers.push(number.parse::<i64>().unwrap());
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=12).collect::<Vec<i64>>());
}

/// Assert that agent-1's inbox on team red holds a note saying `text`.
fn assert_agent_1_heard(store: &Store, text: &str) {
    let inbox = store
        .take_inbox("agent-1", Some("red"), 10, "test")
        .unwrap();
    assert!(
        inbox.iter().any(|note| note.body.contains(text)),
        "{inbox:?}"
    );
}

/// Move `id` asynchronously as `agent` bound to team red, fenced by `token` when given.
async fn move_as(
    store: &Arc<Store>,
    id: &str,
    to: TaskMove,
    agent: &str,
    token: Option<i64>,
) -> Result<Task, StoreError> {
    let scope = OwnedScope {
        team_id: Some("red".into()),
        agent_id: Some(agent.into()),
        claim_token: token,
        operator: None,
    };
    store
        .move_task_async(id.into(), to, Some(agent.into()), scope)
        .await
        .expect("the move ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_moves_follow_the_state_machine_holders_and_fences() {
    use TaskMove::{Release, To, Unblock};
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "moved", &[]);
    let id = task.id.as_str();

    // Moving a task nobody holds into progress claims it for the mover.
    let held = move_as(&store, id, To(Status::InProgress), "agent-1", None).await;
    let held = held.unwrap();
    assert_eq!(held.assignee_agent_id.as_deref(), Some("agent-1"));
    assert!(held.lease_expires_at.is_some());
    // Another agent may not move it, nor may a stale claim; unblock starts from blocked.
    let stale = Some(held.claim_token - 1);
    let refusals = [
        (To(Status::InReview), "agent-2", None, "not_assignee"),
        (To(Status::InReview), "agent-1", stale, "stale_claim"),
        (Unblock, "agent-1", None, "illegal_transition"),
    ];
    for (to, agent, token, code) in refusals {
        let refused = move_as(&store, id, to, agent, token).await.unwrap_err();
        assert_eq!(refused.code(), code, "{to:?} by {agent}");
    }
    // Release from in progress clears the holder.
    let token = Some(held.claim_token);
    let released = move_as(&store, id, Release, "agent-1", token)
        .await
        .unwrap();
    assert_eq!(
        (released.status, released.assignee_agent_id),
        (Status::Todo, None)
    );

    // An operator's move of an agent's task: the agent hears of it, the audit records it.
    let held = claim(&store, id, "agent-1", None).await.unwrap();
    let operator = OwnedScope {
        operator: Some("api".into()),
        ..OwnedScope::default()
    };
    let blocked = store
        .move_task_async(id.into(), To(Status::Blocked), None, operator)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(blocked.status, Status::Blocked);
    assert_eq!(blocked.claim_token, held.claim_token);
    assert_agent_1_heard(&store, "moved it to blocked");
    let audit = store.operator_activity(None, 10).unwrap();
    let last = audit.first().map(|a| a.detail.as_str());
    assert_eq!(last, Some("in_progress → blocked"));
    let unblocked = move_as(&store, id, Unblock, "agent-1", None).await.unwrap();
    assert_eq!(unblocked.status, Status::Todo);

    // Done is final.
    for to in [Status::InProgress, Status::Done] {
        move_as(&store, id, To(to), "agent-1", None).await.unwrap();
    }
    let refused = move_as(&store, id, To(Status::Todo), "agent-1", None).await;
    assert_eq!(refused.unwrap_err().code(), "illegal_transition");
    let done = store.get_task(id, Scope::ALL).unwrap().unwrap();
    assert!(done.completed_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_comment_is_scrubbed_fenced_and_heard_by_the_holder() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "discussed", &[]);
    let held = claim(&store, &task.id, "agent-1", None).await.unwrap();
    let comment = |body: &str| NewComment {
        author_agent_id: Some("agent-2".into()),
        author_type: AuthorType::Agent,
        body: body.into(),
    };
    let red = |claim_token| OwnedScope {
        team_id: Some("red".into()),
        claim_token,
        ..OwnedScope::default()
    };
    let secret = "the key is AKIAABCDEFGHIJKLMNOP, rotate it";
    let added = store
        .add_comment_async(
            task.id.clone(),
            comment(secret),
            red(Some(held.claim_token)),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        !added.body.contains("AKIAABCDEFGHIJKLMNOP"),
        "{}",
        added.body
    );
    assert_agent_1_heard(&store, "agent-2 commented");
    // Refused: a stale claim, another team's task, an empty body; none wrote a comment.
    let refusals = [
        (
            task.id.clone(),
            "fine",
            red(Some(held.claim_token - 1)),
            "stale_claim",
        ),
        ("no-such-task".to_owned(), "fine", red(None), "not_found"),
        (task.id.clone(), "  ", red(None), "invalid_args"),
    ];
    for (id, body, scope, code) in refusals {
        let refused = store
            .add_comment_async(id, comment(body), scope)
            .await
            .unwrap();
        assert_eq!(refused.unwrap_err().code(), code, "{body:?}");
    }
    let detail = store.task_detail(&task.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(detail.comments.len(), 1);
    assert_eq!(detail.comments[0], added);
}

/// `claim_next` for `agent` in team red, asynchronously: the id of the task it took.
async fn claim_next(
    store: &Arc<Store>,
    agent: &str,
    paths: Option<&[String]>,
) -> Result<Option<String>, StoreError> {
    let who = Claimant {
        agent_id: agent,
        runtime: None,
        paths,
    };
    let claimed = store.claim_next_async(who, Some("red")).await;
    Ok(claimed.expect("the claim ran")?.map(|task| task.id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_claim_nexts_hand_out_each_ready_task_once() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    // Five free tasks, one declaring paths (taken the reserving way), one waiting on a
    // dependency (never handed out) and one of another team.
    let mut ready: Vec<String> = (0..4)
        .map(|i| create(&store, &format!("ready {i}"), &[]).id)
        .collect();
    ready.push(create(&store, "declares paths", &["src/**"]).id);
    let waiting = create(&store, "waiting", &[]);
    store.link_task(&waiting.id, &ready[0], Scope::ALL).unwrap();
    create_blues(&store);

    let racers = (0..9).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move { claim_next(&store, &format!("agent-{i}"), None).await })
    });
    let mut taken = Vec::new();
    let mut told_nothing = 0;
    for outcome in futures_util::future::join_all(racers).await {
        match outcome.unwrap().unwrap() {
            Some(id) => taken.push(id),
            None => told_nothing += 1,
        }
    }
    taken.sort();
    ready.sort();
    assert_eq!(taken, ready, "each ready task went to exactly one racer");
    assert_eq!(told_nothing, 4);
    let held = store.get_task(&waiting.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(held.status, Status::Todo, "a task waiting on another stays");

    // Paths another agent holds are refused by name; an empty agent is refused.
    let wanted = ["src/main.rs".to_owned()];
    let extra = create(&store, "extra", &[]);
    let refused = claim_next(&store, "agent-late", Some(&wanted)).await;
    assert!(
        matches!(refused, Err(StoreError::Reserved { .. })),
        "{refused:?}"
    );
    let untouched = store.get_task(&extra.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(
        untouched.assignee_agent_id, None,
        "a refusal claims nothing"
    );
    let refused = claim_next(&store, " ", None).await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
}

test_clock!(NEXT_NOW, next_clock);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_claim_next_reclaims_a_lapsed_lease_and_may_take_it() {
    let test = TestStore::new();
    let store = leased_store(&test, next_clock).await;
    let (lapsed, mut room) = lapse_a_lease(&store, &NEXT_NOW).await;
    let posts = room_posts(&store);
    let taken = claim_next(&store, "agent-2", None).await.unwrap();
    assert_eq!(taken.as_deref(), Some(lapsed.id.as_str()));
    room.heard(Duration::from_secs(10)).await;
    assert_eq!(room_posts(&store), posts + 1);
    assert_agent_1_heard(&store, "ran out");
    let held = store.get_task(&lapsed.id, Scope::ALL).unwrap().unwrap();
    assert_eq!(held.assignee_agent_id.as_deref(), Some("agent-2"));
}

/// Make `task` depend on `on` asynchronously, as a caller of team red.
async fn link(store: &Arc<Store>, task: &str, on: &str) -> Result<(), StoreError> {
    let scope = OwnedScope {
        team_id: Some("red".into()),
        ..OwnedScope::default()
    };
    store
        .link_task_async(task, on, scope)
        .await
        .expect("the link ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_links_refuse_cycles_and_unknown_tasks_and_repeat_as_no_ops() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let [a, b, c] = ["a", "b", "c"].map(|t| create(&store, t, &[]).id);
    link(&store, &a, &b).await.unwrap();
    link(&store, &b, &c).await.unwrap();
    link(&store, &a, &b).await.unwrap();
    let blue = create_blues(&store);
    let refusals = [
        (&c, &a, "cycle"),
        (&a, &a, "cycle"),
        (&a, &"no-such-task".to_owned(), "not_found"),
        (&a, &blue.id, "not_found"),
    ];
    for (task, on, code) in refusals {
        let refused = link(&store, task, on).await;
        assert_eq!(refused.unwrap_err().code(), code, "{task} on {on}");
    }
    let a_task = store.get_task(&a, Scope::ALL).unwrap().unwrap();
    assert_eq!(
        a_task.depends_on,
        vec![b.clone()],
        "one edge, refusals wrote none"
    );
    let c_task = store.get_task(&c, Scope::ALL).unwrap().unwrap();
    assert!(c_task.depends_on.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_links_never_close_a_cycle() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for round in 0..5 {
        // Each of the two links alone is fine; together they close a cycle.
        let x = create(&store, &format!("x {round}"), &[]).id;
        let y = create(&store, &format!("y {round}"), &[]).id;
        let (s1, s2) = (Arc::clone(&store), Arc::clone(&store));
        let (x1, y1, x2, y2) = (x.clone(), y.clone(), x.clone(), y.clone());
        let first = tokio::spawn(async move { link(&s1, &x1, &y1).await });
        let second = tokio::spawn(async move { link(&s2, &y2, &x2).await });
        let outcomes = [first.await.unwrap(), second.await.unwrap()];
        let made = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(made, 1, "round {round}: {outcomes:?}");
        let refused = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
        assert_eq!(refused.code(), "cycle", "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_link_to_a_task_lands_once_and_never_on_a_task_out_of_scope() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "linked", &[]);
    for _ in 0..2 {
        store
            .link_to_task_async(
                &task.id,
                Some("red"),
                LinkKind::Fact,
                "fact-1",
                "\n a fact\nmore",
            )
            .await
            .unwrap()
            .unwrap();
    }
    for (id, team) in [
        ("no-such-task", Some("red")),
        (task.id.as_str(), Some("blue")),
    ] {
        let refused = store
            .link_to_task_async(id, team, LinkKind::Post, "post-1", "a post")
            .await
            .unwrap();
        assert!(
            matches!(refused, Err(StoreError::NotFound(_))),
            "{refused:?}"
        );
    }
    let detail = store.task_detail(&task.id, Scope::ALL).unwrap().unwrap();
    let links: Vec<(&str, &str, &str)> = detail
        .links
        .iter()
        .map(|l| (l.kind.as_str(), l.id.as_str(), l.line.as_str()))
        .collect();
    assert_eq!(links, [("fact", "fact-1", "a fact")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_inbox_takes_deliver_each_note_once() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for i in 0..7 {
        store
            .push_inbox("agent-1", Some("red"), "test", &format!("note {i}"))
            .unwrap();
    }
    let takers = (0..6).map(|_| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .take_inbox_async("agent-1", Some("red"), 2, "mcp")
                .await
                .unwrap()
                .unwrap()
        })
    });
    let mut bodies = Vec::new();
    for taken in futures_util::future::join_all(takers).await {
        let taken = taken.unwrap();
        assert!(taken.len() <= 2, "{taken:?}");
        bodies.extend(taken.into_iter().map(|note| note.body));
    }
    bodies.sort();
    let expected: Vec<String> = (0..7).map(|i| format!("note {i}")).collect();
    let delivered_more = store
        .take_inbox("agent-1", Some("red"), 10, "test")
        .unwrap();
    bodies.extend(delivered_more.into_iter().map(|note| note.body));
    bodies.sort();
    assert_eq!(bodies, expected, "every note delivered, none twice");
    let none_left = store
        .take_inbox_async("agent-1", Some("red"), 2, "mcp")
        .await
        .unwrap()
        .unwrap();
    assert!(none_left.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_delegation_writes_the_task_note_and_post_together_or_nothing() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for (id, name) in [("a1", "alice"), ("b1", "bob"), ("b2", "Bob")] {
        store
            .upsert_agent(&NewAgent {
                id: Some(id.into()),
                name: name.into(),
                team_id: Some("red".into()),
                runtime: Some("codex".into()),
            })
            .unwrap();
    }
    let delegate = |assignee: &'static str, task: &'static str| {
        let store = Arc::clone(&store);
        async move {
            let delegation = Delegation {
                team_id: "red",
                caller_agent_id: "a1",
                assignee,
                task,
                room_id: &team_room("red"),
            };
            store.delegate_async(&delegation).await.unwrap()
        }
    };
    let listed = |store: &Store| {
        store
            .list_tasks_page(&TaskFilter::default(), None, MAX_PAGE)
            .unwrap()
            .tasks
            .len()
    };
    let refusals = [
        ("nobody", "work", "no teammate matches"),
        ("BOB", "work", "matches several teammates"),
        ("alice", "work", "cannot delegate to yourself"),
        ("b1", " ", "requires both"),
    ];
    for (assignee, task, says) in refusals {
        let refused = delegate(assignee, task).await.unwrap_err();
        assert!(refused.to_string().contains(says), "{assignee}: {refused}");
    }
    assert_eq!(listed(&store), 0, "refusals wrote no task");
    assert_eq!(room_posts(&store), 0, "nor a post");

    let done = delegate("b1", "Write the tests\nfor the chat")
        .await
        .unwrap();
    assert_eq!(done.assignee.id, "b1");
    assert_eq!(done.task.title, "Write the tests");
    assert_eq!(done.task.assignee_runtime.as_deref(), Some("codex"));
    assert_eq!(done.post.kind, PostKind::System);
    assert_eq!(listed(&store), 1);
    assert_eq!(room_posts(&store), 1);
    let inbox = store.take_inbox("b1", Some("red"), 10, "test").unwrap();
    assert!(
        inbox[0].body.contains("alice delegated a task to you"),
        "{inbox:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_async_edits_land_scrubbed_in_scope_and_in_the_activity() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "draft", &[]);
    let operator = |team: Option<&str>| OwnedScope {
        team_id: team.map(str::to_owned),
        operator: Some("api".into()),
        ..OwnedScope::default()
    };
    let patch = TaskPatch {
        title: Some("  final  ".into()),
        description: Some("token AKIAABCDEFGHIJKLMNOP inside".into()),
        priority: Some(3),
    };
    let edited = store
        .patch_task_async(&task.id, &patch, operator(None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((edited.title.as_str(), edited.priority), ("final", 3));
    assert!(!edited.description.unwrap().contains("AKIAABCDEFGHIJKLMNOP"));

    // Refused: an empty title, a task out of scope; neither changed anything.
    let empty = TaskPatch {
        title: Some(" ".into()),
        ..TaskPatch::default()
    };
    let refused = store
        .patch_task_async(&task.id, &empty, operator(None))
        .await;
    assert_eq!(refused.unwrap().unwrap_err().code(), "invalid_args");
    let renamed = TaskPatch {
        title: Some("blue's now".into()),
        ..TaskPatch::default()
    };
    let refused = store
        .patch_task_async(&task.id, &renamed, operator(Some("blue")))
        .await;
    assert_eq!(refused.unwrap().unwrap_err().code(), "not_found");
    let refused = store
        .set_dropped_async(&task.id, true, operator(Some("blue")))
        .await;
    assert_eq!(refused.unwrap().unwrap_err().code(), "not_found");
    let seen = store.get_task(&task.id, Scope::ALL).unwrap().unwrap();
    assert_eq!((seen.title.as_str(), seen.dropped), ("final", false));

    // Dropped by its short id, then dropped again (no change, no activity), restored.
    let short = task.short_id.clone().unwrap();
    for dropped in [true, true, false] {
        let task = store
            .set_dropped_async(&short, dropped, operator(Some("red")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(task.dropped, dropped);
    }
    let page = store.operator_activity_async(None, 10).await.unwrap();
    assert_eq!(page.unwrap(), store.operator_activity(None, 10).unwrap());
    let refused = store.operator_activity_async(None, 0).await.unwrap();
    assert_eq!(refused.unwrap_err().code(), "invalid_args");
    let actions: Vec<String> = store
        .operator_activity(None, 10)
        .unwrap()
        .into_iter()
        .map(|row| format!("{} {}", row.action, row.detail))
        .collect();
    assert_eq!(
        actions,
        [
            "restored restored to the board",
            "dropped dropped from the board",
            "edited title, description, priority",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_async_teams_asking_for_one_key_leave_it_to_exactly_one() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for round in 0..3 {
        let key = format!("K{round}");
        let racers = (0..6).map(|i| {
            let (store, key) = (Arc::clone(&store), key.clone());
            tokio::spawn(async move {
                let id = format!("team-{round}-{i}");
                store
                    .upsert_team_async(Some(&id), "racer", Some(&key))
                    .await
                    .unwrap()
            })
        });
        let mut keyed = 0;
        for answer in futures_util::future::join_all(racers).await {
            match answer.unwrap() {
                Ok(team) => {
                    assert_eq!(team.key.as_deref(), Some(key.as_str()));
                    keyed += 1;
                }
                Err(refused) => assert!(refused.to_string().contains("is taken by"), "{refused}"),
            }
        }
        assert_eq!(keyed, 1, "round {round}");
    }
    let refused = store.upsert_team_async(None, " ", None).await.unwrap();
    assert_eq!(refused.unwrap_err().code(), "invalid_args");
    let renamed = store
        .upsert_team_async(Some("team-0-0"), "renamed", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.name, "renamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_nexts_back_to_back_each_take_a_task_without_losing_every_pick() {
    const AGENTS: usize = 16;
    const CLAIMS_EACH: usize = 20;
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for i in 0..AGENTS * CLAIMS_EACH {
        create(&store, &format!("queued {i}"), &[]);
    }
    // Agents claiming back to back, as a team draining a queue does: every pick goes
    // for the same first ready row unless it passes over the ones others hold.
    let agents = (0..AGENTS).map(|a| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let mut taken = Vec::new();
            for _ in 0..CLAIMS_EACH {
                match claim_next(&store, &format!("agent-{a}"), None).await {
                    Ok(Some(id)) => taken.push(id),
                    Ok(None) => break,
                    Err(e) => panic!("agent-{a}: {e:?}"),
                }
            }
            taken
        })
    });
    let mut taken: Vec<String> = Vec::new();
    for agent in futures_util::future::join_all(agents).await {
        taken.extend(agent.unwrap());
    }
    let count = taken.len();
    taken.sort();
    taken.dedup();
    let all = AGENTS * CLAIMS_EACH;
    assert_eq!(
        (count, taken.len()),
        (all, all),
        "each task once, none missed"
    );
}
