//! Reads written once as `async` code ([`crate::reads`]), on both backends
//! (`TestStore::new` picks): run through `Store::run_snapshot` they read what the
//! synchronous call reads, and on PostgreSQL a snapshot cut short or a runtime that ended
//! never leaves a connection that later reads would trip over.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures_util::FutureExt;

use crate::board::{
    AuthorType, CreatePolicy, NewComment, NewTask, TaskDetail, TaskFilter, TaskPatch,
};
use crate::chat::{ChatQuery, PostKind};
use crate::links::LinkKind;
use crate::task::{Scope, Status, Task};
use crate::teams::NewAgent;
use crate::testing::TestStore;
use crate::{Store, StoreConfig};

fn create(store: &Store, title: &str, parent: Option<&Task>) -> Task {
    let new = NewTask {
        team_id: Some("red".into()),
        parent_task_id: parent.map(|p| p.id.clone()),
        ..NewTask::titled(title)
    };
    store.create_task(new, CreatePolicy::Uncapped).unwrap()
}

/// The async detail of a task that exists.
async fn detail(store: &Arc<Store>, id: &str) -> TaskDetail {
    let read = store.task_detail_async(id.to_owned(), None).await;
    read.unwrap().unwrap().expect("the task exists")
}

/// A grandchild with comments and a link under its parent and root, all in team red.
fn tree(store: &Store) -> Task {
    let root = create(store, "root", None);
    let child = create(store, "child", Some(&root));
    let leaf = create(store, "leaf", Some(&child));
    for body in ["first", "second"] {
        let comment = NewComment {
            author_agent_id: Some("agent-1".into()),
            author_type: AuthorType::Agent,
            body: body.into(),
        };
        store.add_comment(&leaf.id, comment, Scope::ALL).unwrap();
    }
    store
        .link_to_task(&leaf.id, Scope::ALL, LinkKind::Fact, "fact-1", "a fact")
        .unwrap();
    leaf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_detail_reads_what_the_synchronous_one_reads() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let leaf = tree(&store);
    let short = leaf.short_id.clone().unwrap();
    for (reference, team) in [
        (leaf.id.clone(), None),
        (leaf.id.clone(), Some("red")),
        (short.clone(), Some("red")),
        (short.to_lowercase(), None),
        (short.clone(), Some("blue")),
        ("RED-999".to_owned(), Some("red")),
        ("no-such-task".to_owned(), None),
    ] {
        let sync_store = Arc::clone(&store);
        let (sync_reference, sync_team) = (reference.clone(), team);
        let expected = tokio::task::spawn_blocking(move || {
            sync_store.task_detail(&sync_reference, Scope::team(sync_team))
        })
        .await
        .unwrap()
        .unwrap();
        let read = store
            .task_detail_async(reference.clone(), team.map(str::to_owned))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read, expected, "{reference} as {team:?}");
        if team != Some("blue") && !reference.starts_with("RED-999") && reference != "no-such-task"
        {
            let detail = read.unwrap();
            assert_eq!(detail.ancestors.len(), 2, "{reference}");
            assert_eq!(detail.comments.len(), 2, "{reference}");
            assert_eq!(detail.links.len(), 1, "{reference}");
        } else {
            assert!(read.is_none(), "{reference} as {team:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_cut_short_leaves_its_connection_outside_any_transaction() {
    let test = TestStore::new();
    // One connection, so the next read reuses the one the cut snapshot held.
    let store = Arc::new(test.store_on_one_connection());
    let task = create(&store, "before", None);
    // Warm: the connection is open and its statements prepared, so the next read sends
    // its `BEGIN` and queries on its first poll.
    assert_eq!(detail(&store, &task.id).await.task.title, "before");
    {
        let mut cut = pin!(store.task_detail_async(task.id.clone(), None));
        // On PostgreSQL this sends the read's `BEGIN` and queries and leaves it waiting
        // for the answer; SQLite's read may run to its end right here.
        let _ = cut.as_mut().now_or_never();
        // Time for the server to run the cut read's first statements, so its snapshot
        // predates the write below (were it not, this test could not catch a leak).
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let patch = TaskPatch {
        title: Some("after".into()),
        description: None,
        priority: None,
    };
    store.patch_task(&task.id, &patch, Scope::ALL).unwrap();
    // A connection left inside the cut snapshot would still see the title before.
    let read = detail(&store, &task.id).await;
    assert_eq!(read.task.title, "after");
}

#[test]
fn connections_of_a_runtime_that_ended_are_replaced() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let task = create(&store, "a task", None);
    for _ in 0..2 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let read = runtime
            .block_on(store.task_detail_async(task.id.clone(), None))
            .unwrap()
            .unwrap();
        assert_eq!(read.unwrap().task.id, task.id);
        // The connection's task ends with this runtime; the next one must open another.
        drop(runtime);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_without_a_snapshot_agree_with_the_synchronous_ones() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let leaf = tree(&store);
    let short = leaf.short_id.clone().unwrap();
    for (reference, team) in [
        (leaf.id.clone(), None),
        (short.clone(), Some("red")),
        (short.clone(), Some("blue")),
        ("no-such-task".to_owned(), None),
    ] {
        let found = store
            .get_task_async(reference.clone(), team.map(str::to_owned))
            .await
            .unwrap()
            .unwrap();
        let expected = store.get_task(&reference, Scope::team(team)).unwrap();
        assert_eq!(found, expected, "{reference} as {team:?}");
        assert_eq!(
            found.is_some(),
            team != Some("blue") && reference != "no-such-task"
        );
        let linkable = store
            .require_linkable_async(reference.clone(), team.map(str::to_owned))
            .await
            .unwrap();
        assert_eq!(linkable.is_ok(), found.is_some(), "{reference} as {team:?}");
    }
    let pending = |agent: &str, team: Option<&str>| {
        store.has_pending_inbox_async(agent.to_owned(), team.map(str::to_owned))
    };
    assert!(!pending("agent-2", Some("red")).await.unwrap().unwrap());
    store
        .push_inbox("agent-2", Some("red"), "test", "a note")
        .unwrap();
    assert!(pending("agent-2", Some("red")).await.unwrap().unwrap());
    assert!(pending("agent-2", None).await.unwrap().unwrap());
    assert!(!pending("agent-2", Some("blue")).await.unwrap().unwrap());
    assert!(!pending("agent-3", Some("red")).await.unwrap().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_room_read_pages_as_the_synchronous_one_does() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    for i in 0..5 {
        let author = if i % 2 == 0 { "alice" } else { "bob" };
        store
            .post_chat("team:red", author, PostKind::Peer, &format!("post {i}"))
            .unwrap();
    }
    for (since, limit, me) in [
        (0, 100, None),
        (0, 2, None),
        (2, 2, Some("alice")),
        (0, 100, Some("bob")),
        (5, 10, None),
        (0, 10, Some("nobody")),
    ] {
        let query = ChatQuery {
            room_id: "team:red",
            since_seq: since,
            limit,
            exclude_author: me,
        };
        let expected = store.read_chat(&query).unwrap();
        let page = store
            .read_chat_async("team:red".into(), since, limit, me.map(str::to_owned))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(page, expected, "since {since}, limit {limit}, as {me:?}");
    }
    let empty = store
        .read_chat_async("team:blue".into(), 0, 10, None)
        .await
        .unwrap()
        .unwrap();
    assert!(empty.posts.is_empty());
    assert_eq!(empty.next_seq, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_snapshot_leaves_its_connection_outside_any_transaction() {
    let test = TestStore::new();
    // One connection, so each read reuses the one before it.
    let store = Arc::new(test.store_on_one_connection());
    let task = create(&store, "first", None);
    for title in ["second", "third"] {
        let read = detail(&store, &task.id).await;
        assert_ne!(read.task.title, title);
        let patch = TaskPatch {
            title: Some(title.into()),
            description: None,
            priority: None,
        };
        store.patch_task(&task.id, &patch, Scope::ALL).unwrap();
        // A snapshot left open would still show the title before.
        let read = detail(&store, &task.id).await;
        assert_eq!(read.task.title, title);
    }
}

/// The lease test's clock: a static, since a multi-threaded runtime's reads run on any
/// thread.
static NOW: AtomicI64 = AtomicI64::new(1_700_000_000_000);

fn clock() -> i64 {
    NOW.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_board_page_reclaims_expired_leases_then_pages_as_the_synchronous_one() {
    let test = TestStore::new();
    let config = StoreConfig {
        clock,
        lease: Some(std::time::Duration::from_secs(60)),
        ..StoreConfig::default()
    };
    let store = Arc::new(test.store_with(config));
    for (i, team) in ["red", "red", "blue", "red", "red", "blue", "red"]
        .iter()
        .enumerate()
    {
        let new = NewTask {
            team_id: Some((*team).into()),
            priority: Some(i64::try_from(i % 3).unwrap()),
            ..NewTask::titled(format!("task {i}"))
        };
        store.create_task(new, CreatePolicy::Uncapped).unwrap();
    }
    let first = store
        .list_tasks_page(&TaskFilter::default(), None, 1)
        .unwrap();
    let held = store
        .claim_task(&first.tasks[0].id, "agent-1", None)
        .unwrap();
    assert_eq!(held.status, Status::InProgress);
    NOW.fetch_add(61_000, Ordering::Relaxed);
    let filters = [
        TaskFilter::default(),
        TaskFilter {
            team_id: Some("red".into()),
            scoped: true,
            ..TaskFilter::default()
        },
        TaskFilter {
            ready: true,
            ..TaskFilter::default()
        },
        TaskFilter {
            status: Some(Status::Todo),
            ..TaskFilter::default()
        },
    ];
    for filter in filters {
        let (mut async_pages, mut after) = (Vec::new(), None);
        loop {
            let page = store
                .list_tasks_page_async(filter.clone(), after.clone(), 2)
                .await
                .unwrap()
                .unwrap();
            async_pages.push((page.tasks.clone(), page.next.clone()));
            after = page.next;
            if after.is_none() {
                break;
            }
        }
        // The first async page reclaimed the lease that ran out.
        let task = store.get_task(&held.id, Scope::ALL).unwrap().unwrap();
        assert_eq!(task.status, Status::Todo, "{filter:?}");
        let (mut sync_pages, mut after) = (Vec::new(), None);
        loop {
            let page = store.list_tasks_page(&filter, after.as_ref(), 2).unwrap();
            sync_pages.push((page.tasks.clone(), page.next.clone()));
            after = page.next;
            if after.is_none() {
                break;
            }
        }
        assert_eq!(async_pages, sync_pages, "{filter:?}");
        assert!(async_pages.len() > 1, "{filter:?} pages");
    }
    let refused = store
        .list_tasks_page_async(TaskFilter::default(), None, 0)
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(crate::StoreError::Invalid(_))),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_async_reads_answer_what_the_synchronous_ones_answer() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    let quiet = store.activity_marks_async().await.unwrap().unwrap();
    assert_eq!(quiet, store.activity_marks().unwrap());
    let task = create(&store, "held", None);
    store.claim_task(&task.id, "agent-1", None).unwrap();
    store
        .post_chat("team:red", "agent-1", PostKind::User, "on it")
        .unwrap();

    let marks = store.activity_marks_async().await.unwrap().unwrap();
    assert_eq!(marks, store.activity_marks().unwrap());
    assert_ne!(marks.board, quiet.board, "the claim moved the board's mark");
    assert_ne!(marks.chat, quiet.chat, "the post moved the chat's mark");
    assert_eq!(marks.memory, quiet.memory);

    let counts = store.ops_counts_async().await.unwrap().unwrap();
    assert_eq!(counts, store.ops_counts().unwrap());
    assert_eq!((counts.leases_held, counts.approvals_pending), (1, 0));
    let ready = store.readiness_async().await.unwrap().unwrap();
    assert!(ready.schema_current(), "{ready:?}");
    assert_eq!(ready, store.readiness().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rosters_async_reads_and_upsert_answer_what_the_synchronous_ones_answer() {
    let test = TestStore::new();
    let store = Arc::new(test.store());
    store.upsert_team(Some("red"), "Red", None).unwrap();
    let new = NewAgent {
        id: Some("agent-1".into()),
        name: "Ada".into(),
        team_id: Some("red".into()),
        runtime: Some("codex".into()),
    };
    let agent = store.upsert_agent_async(&new).await.unwrap().unwrap();
    assert_eq!((agent.id.as_str(), agent.name.as_str()), ("agent-1", "Ada"));
    let renamed = NewAgent {
        name: "Ada L.".into(),
        ..new.clone()
    };
    let agent = store.upsert_agent_async(&renamed).await.unwrap().unwrap();
    assert_eq!(agent.name, "Ada L.", "an existing id is updated in place");
    let nameless = NewAgent {
        name: " ".into(),
        ..new
    };
    let refused = store.upsert_agent_async(&nameless).await.unwrap();
    assert_eq!(refused.unwrap_err().code(), "invalid_args");

    let task = NewTask {
        team_id: Some("red".into()),
        paths: vec!["docs/**".into()],
        ..NewTask::titled("docs")
    };
    let task = store.create_task(task, CreatePolicy::Uncapped).unwrap();
    store.claim_task(&task.id, "agent-1", None).unwrap();

    let teams = store.list_teams_async().await.unwrap().unwrap();
    assert_eq!(teams, store.list_teams().unwrap());
    assert_eq!(teams[0].id, "red");
    let seen = store.agents_seen_async(Some("red")).await.unwrap().unwrap();
    assert_eq!(seen, store.agents_seen(Some("red")).unwrap());
    assert_eq!(seen[0].name, "Ada L.");
    assert_eq!(seen[0].held[0].id, task.id);
    let reserved = store
        .reservations_async(Some("red".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reserved, store.reservations(Some("red")).unwrap());
    assert_eq!(reserved[0].paths, ["docs/**"]);
}
