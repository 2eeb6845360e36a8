//! Upgrade safety: a database made by every earlier schema version (the fixtures in
//! `tests/fixtures/upgrade`, see its README) opens with the current store, migrates to the
//! latest version with its data intact, and the current code works on it. Memory's facts
//! and procedures are checked by `crates/clawboo-memory/tests/upgrade.rs`, the broker's
//! approvals, grants and audit by `crates/clawboo-broker/tests/upgrade.rs`, on the same
//! fixtures.
#![allow(clippy::unwrap_used)]

mod upgrade_data;

use std::sync::Arc;

use clawboo_store::board::{CreatePolicy, NewTask, Scope, Status, TaskFilter};
use clawboo_store::chat::{ChatQuery, PostKind};
use clawboo_store::{SCHEMA_VERSION, Store, StoreError};
use upgrade_data::*;

#[test]
fn there_is_a_fixture_for_every_earlier_schema_version() {
    let versions: Vec<i64> = fixtures().into_iter().map(|(v, _)| v).collect();
    for v in 1..SCHEMA_VERSION {
        assert!(
            versions.contains(&v),
            "no upgrade fixture for schema version {v}: see tests/fixtures/upgrade/README.md"
        );
    }
    assert!(versions.iter().all(|v| (1..=SCHEMA_VERSION).contains(v)));
}

#[test]
fn every_fixture_migrates_with_its_data_intact_and_the_current_code_works_on_it() {
    let all = fixtures();
    assert!(!all.is_empty());
    for (version, fixture) in all {
        let dir = tempfile::tempdir().unwrap();
        let (db, store) = open_migrated(dir.path(), &fixture, version, |db| {
            Arc::new(Store::open(db).unwrap())
        });

        board_is_intact(&store, version);
        if version >= 3 {
            chat_is_intact(&store);
        }

        board_works(&store, version);
        chat_works(&store, version);
        drop(store);
        reopens_unchanged(&db, |db| Store::open(db).unwrap());
    }
}

fn board_is_intact(store: &Store, version: i64) {
    let all = store
        .list_tasks(&TaskFilter {
            include_dropped: true,
            ..TaskFilter::default()
        })
        .unwrap();
    assert_eq!(all.len(), TASKS.len());
    let detail = store.task_detail(CLAIMED, Scope::ALL).unwrap().unwrap();
    let task = &detail.task;
    assert_eq!(task.title, "Deploy");
    assert_eq!(task.status, Status::InProgress);
    assert_eq!(task.assignee_agent_id.as_deref(), Some(AGENT_ALICE));
    assert_eq!(task.assignee_runtime.as_deref(), Some("claude-code"));
    assert_eq!(task.priority, 3);
    assert_eq!(task.parent_task_id.as_deref(), Some(EPIC));
    // A claim from before leases (migration 11) gets one when the store opens, so a long
    // gone holder does not keep it forever; it has no fencing token yet. A claim leased
    // under schema 11 keeps its lease and token.
    if version >= 11 {
        assert_eq!(task.lease_expires_at, Some(LEASE_UNTIL));
        assert_eq!(task.claim_token, CLAIM_TOKEN);
    } else {
        assert!(task.lease_expires_at.is_some_and(|at| at > store.now_ms()));
        assert_eq!(task.claim_token, 0);
    }
    // Paths and links arrived with schema 14.
    if version >= 14 {
        assert_eq!(task.paths, CLAIMED_PATHS);
        let links: Vec<(&str, &str)> = detail
            .links
            .iter()
            .map(|l| (l.id.as_str(), l.line.as_str()))
            .collect();
        assert_eq!(links, [(LINKED_POST, "deploying now")]);
    } else {
        assert!(task.paths.is_empty() && detail.links.is_empty());
    }
    // Short ids came with schema 15: the store numbers each team's tasks in creation order
    // when it opens the migrated file, with keys derived from the teams' names.
    for (n, id) in TASKS[..10].iter().enumerate() {
        let task = store.get_task(id, Scope::ALL).unwrap().unwrap();
        assert_eq!(task.short_id, Some(format!("ALP-{}", n + 1)), "{id}");
    }
    let beta = store
        .get_task("bet-1", Scope::team(Some(TEAM_BETA)))
        .unwrap()
        .unwrap();
    assert_eq!(beta.id, BETA_ROOT);
    let keys: Vec<Option<String>> = store
        .list_teams()
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, [Some("ALP".to_owned()), Some("BET".to_owned())]);
    // An operator's move came with schema 16.
    let activity = store.operator_activity(None, 10).unwrap();
    assert_eq!(
        activity.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        if version >= 16 {
            vec![OPERATOR_MOVE]
        } else {
            vec![]
        }
    );
    let comment_ids: Vec<&str> = detail.comments.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        comment_ids,
        [COMMENT_BY_BOB, COMMENT_BY_USER, COMMENT_BY_SYSTEM]
    );
    assert_eq!(detail.comments[0].body, "looks good");
    let ancestors: Vec<&str> = detail.ancestors.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ancestors, [EPIC]);

    let grandchild = store.task_detail(GRANDCHILD, Scope::ALL).unwrap().unwrap();
    let ancestors: Vec<&str> = grandchild.ancestors.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ancestors, [EPIC, CLAIMED]);
    let waiting = store.get_task(WAITING, Scope::ALL).unwrap().unwrap();
    assert_eq!(waiting.depends_on, [CLAIMED]);
    let done = store.get_task(DONE, Scope::ALL).unwrap().unwrap();
    assert_eq!(done.status, Status::Done);
    assert!(done.completed_at.is_some());
    assert!(
        store
            .get_task(DROPPED, Scope::ALL)
            .unwrap()
            .unwrap()
            .dropped
    );
    let beta = store
        .get_task(BETA_ROOT, Scope::team(Some(TEAM_BETA)))
        .unwrap()
        .unwrap();
    assert_eq!(beta.title, BETA_TITLE);
    assert_eq!(beta.tenant_id.as_deref(), Some("tenant-1"));
    // Another team's scope cannot see it.
    assert!(
        store
            .get_task(BETA_ROOT, Scope::team(Some(TEAM_ALPHA)))
            .unwrap()
            .is_none()
    );

    let ready: Vec<String> = store
        .list_tasks(&TaskFilter {
            team_id: Some(TEAM_ALPHA.into()),
            ready: true,
            ..TaskFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ready, [OPEN, GRANDCHILD], "ready = priority, then age");

    let teams: Vec<String> = store
        .list_teams()
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(teams.len(), 2);
    assert!(teams.iter().any(|t| t == TEAM_ALPHA));
    let names: Vec<String> = store
        .list_agents(Some(TEAM_ALPHA))
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    // A last call recorded under schema 11 is the agent's presence on its team since
    // migration 13 (liveness per team and agent).
    let seen = store.agents_seen(Some(TEAM_ALPHA)).unwrap();
    let alice = seen.iter().find(|a| a.id == AGENT_ALICE).unwrap();
    let expected = (version >= 11).then_some(T0 + 800);
    assert_eq!(alice.last_seen_at, expected, "{seen:?}");
    // Her presence on another team, recorded under schema 13, stays hers there.
    let on_beta = store.agents_seen(Some(TEAM_BETA)).unwrap();
    let beta = on_beta.iter().find(|a| a.id == AGENT_ALICE);
    assert_eq!(
        beta.and_then(|a| a.last_seen_at),
        (version >= 13).then_some(T0 + 1300),
        "{on_beta:?}"
    );
    assert_eq!(
        store.setting(SECRET_KEY).unwrap().as_deref(),
        Some(SECRET_VALUE)
    );
}

fn board_works(store: &Store, version: i64) {
    let claimed = store.claim_task(OPEN, "agent-new", Some("codex")).unwrap();
    assert_eq!(claimed.status, Status::InProgress);
    // The task declares no paths, so its claim reserves none; only the claim made under
    // schema 14 with paths holds a reservation.
    assert!(claimed.paths.is_empty());
    let reserved: Vec<String> = store
        .reservations(None)
        .unwrap()
        .into_iter()
        .map(|r| r.task_id)
        .collect();
    let expected: &[&str] = if version >= 14 { &[CLAIMED] } else { &[] };
    assert_eq!(reserved, expected);
    assert!(matches!(
        store.claim_task(OPEN, "agent-late", None),
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store.claim_task(WAITING, "agent-new", None),
        Err(StoreError::NotReady)
    ));
    assert!(matches!(
        store.claim_task(DROPPED, "agent-new", None),
        Err(StoreError::NotFound(_))
    ));
    // The old claim moves on; its dependent becomes claimable.
    store
        .set_status(
            CLAIMED,
            Status::InReview,
            Some(AGENT_ALICE),
            None,
            Scope::ALL,
        )
        .unwrap();
    let finished = store
        .set_status(CLAIMED, Status::Done, Some(AGENT_BOB), None, Scope::ALL)
        .unwrap();
    assert!(finished.completed_at.is_some());
    store.claim_task(WAITING, AGENT_BOB, None).unwrap();
    // Bob's status change queued a note for alice behind the old pending one.
    let inbox = store
        .take_inbox(AGENT_ALICE, Some(TEAM_ALPHA), 10, "mcp")
        .unwrap();
    assert_eq!(inbox.len(), 2, "{inbox:?}");
    assert_eq!(inbox[0].id, INBOX_PENDING);
    assert_eq!(inbox[0].body, INBOX_PENDING_BODY);

    // Capped creates: old rows are outside the root window; the depth cap still holds.
    let mut sub = NewTask::titled("Tag the release");
    sub.parent_task_id = Some(EPIC.into());
    let sub = store.create_task(sub, CreatePolicy::Capped).unwrap();
    assert_eq!(sub.team_id.as_deref(), Some(TEAM_ALPHA));
    // Numbered after the tasks the open numbered.
    assert_eq!(sub.short_id.as_deref(), Some("ALP-11"));
    store
        .create_task(NewTask::titled("a new root"), CreatePolicy::Capped)
        .unwrap();
    let mut too_deep = NewTask::titled("too deep");
    too_deep.parent_task_id = Some(GRANDCHILD.into());
    assert!(matches!(
        store.create_task(too_deep, CreatePolicy::Capped),
        Err(StoreError::Cap { .. })
    ));
    store.link_task(sub.id.as_str(), DONE, Scope::ALL).unwrap();
    assert!(matches!(
        store.link_task(CLAIMED, GRANDCHILD, Scope::ALL),
        Ok(())
    ));
}

fn chat_is_intact(store: &Store) {
    let page = store
        .read_chat(&ChatQuery {
            room_id: ROOM,
            since_seq: 0,
            limit: 100,
            exclude_author: None,
        })
        .unwrap();
    let posts: Vec<(i64, &str, &str, &str)> = page
        .posts
        .iter()
        .map(|p| (p.seq, p.author.as_str(), p.kind.as_str(), p.body.as_str()))
        .collect();
    let expected: Vec<(i64, &str, &str, &str)> = ROOM_POSTS
        .iter()
        .enumerate()
        .map(|(i, (a, k, b))| (i as i64 + 1, *a, *k, *b))
        .collect();
    assert_eq!(posts, expected);
    assert_eq!(page.next_seq, 3);
    let custom = store
        .read_chat(&ChatQuery {
            room_id: CUSTOM_ROOM,
            since_seq: 0,
            limit: 10,
            exclude_author: None,
        })
        .unwrap();
    assert_eq!(custom.posts.len(), 1);
    assert_eq!(custom.posts[0].body, "line one\nline two");
}

fn chat_works(store: &Store, version: i64) {
    let post = store
        .post_chat(ROOM, AGENT_BOB, PostKind::Peer, "after the upgrade")
        .unwrap();
    let expected = if version >= 3 { 4 } else { 1 };
    assert_eq!(post.seq, expected);
}
