//! Team chat rooms: posts with a per-room sequence number, cursor reads with an echo guard
//! and long-poll waits. Delegation, which writes the board too, is [`crate::delegate`].
//!
//! A room is `team:<teamId>` unless a caller names another; it exists from its first post
//! (no room row to create). `seq` starts at 1 in each room and is the room's `max + 1`,
//! read and inserted inside the write transaction after `Tx::serialize_on` on the room, so
//! posters in any number of processes and hosts never share a seq or leave a gap (a rolled
//! back post gives its number back). The board stays canonical: a post
//! is narration, never a board mutation (delegation writes the board through the board's
//! own create).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::db::{DbRow, Tx};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::reads::{self, AsyncTx, Query, Reads, StoreRead, ready_now};
use crate::run::RunError;
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, new_id};

/// Longest accepted post body, in characters.
pub const MAX_POST_CHARS: usize = crate::task::MAX_BODY_CHARS;
/// Longest accepted room id or author, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// The most posts one read returns.
pub const MAX_READ_LIMIT: usize = 500;
/// The longest a long-poll waits.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// How often a waiter re-reads the database for posts written by other processes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The author of the posts the server narrates itself.
pub const SYSTEM_AUTHOR: &str = "clawboo";
/// The author of an operator's post (web board, REST) that names nobody.
pub const OPERATOR_AUTHOR: &str = "operator";

/// The room of a team: `team:<teamId>`.
pub fn team_room(team_id: &str) -> String {
    format!("team:{team_id}")
}

/// Who a post speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PostKind {
    /// An agent's post.
    Peer,
    /// An operator's post from the web board or REST.
    User,
    /// A board event the server narrates (author [`SYSTEM_AUTHOR`]).
    System,
}

impl PostKind {
    /// The wire name (`peer`, `user`, `system`).
    pub fn as_str(self) -> &'static str {
        match self {
            PostKind::Peer => "peer",
            PostKind::User => "user",
            PostKind::System => "system",
        }
    }
}

impl fmt::Display for PostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PostKind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<PostKind> {
        match s {
            "peer" => Ok(PostKind::Peer),
            "user" => Ok(PostKind::User),
            "system" => Ok(PostKind::System),
            other => Err(StoreError::Invalid(format!(
                "unknown post kind: {other} (use peer, user or system)"
            ))),
        }
    }
}

/// One post in a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatPost {
    pub id: String,
    pub room_id: String,
    pub seq: i64,
    pub author: String,
    pub body: String,
    pub kind: PostKind,
    pub created_at: i64,
}

/// A read of a room from a cursor.
#[derive(Debug, Clone, Copy)]
pub struct ChatQuery<'a> {
    pub room_id: &'a str,
    /// Posts with a seq above this are new.
    pub since_seq: i64,
    /// At most this many posts (clamped to 1..=[`MAX_READ_LIMIT`]).
    pub limit: usize,
    /// The echo guard: posts by this author are never returned.
    pub exclude_author: Option<&'a str>,
}

/// The answer to a read: the posts, and the cursor to pass next time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatPage {
    pub posts: Vec<ChatPost>,
    /// The last seq examined: the last returned post's when `limit` cut the list (so no
    /// post is ever skipped), else the room's head; `since_seq` when nothing is new.
    pub next_seq: i64,
}

fn post_from_row(r: &dyn DbRow) -> Result<ChatPost> {
    let kind: String = r.get(5)?;
    let kind = kind.parse().map_err(|e: StoreError| {
        // The table's CHECK admits only the three kinds: another one is a damaged row.
        StoreError::Backend(BackendError {
            kind: BackendErrorKind::Corrupt,
            message: format!("a team_chat row has a kind this build does not know: {e}"),
        })
    })?;
    Ok(ChatPost {
        id: r.get(0)?,
        room_id: r.get(1)?,
        seq: r.get(2)?,
        author: r.get(3)?,
        body: r.get(4)?,
        kind,
        created_at: r.get(6)?,
    })
}

/// A page of a room's posts, its columns in [`post_from_row`]'s order: of room `?1`, past
/// seq `?2`, not by `?3`, at most `?4`.
const READ_POSTS: &str = "SELECT id, room_id, seq, author, body, kind, created_at FROM team_chat
     WHERE room_id = ?1 AND seq > ?2 AND (CAST(?3 AS TEXT) IS NULL OR author <> ?3)
     ORDER BY seq LIMIT ?4";

pub(crate) fn check_label(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(StoreError::Invalid(format!("{field} must not be empty")));
    }
    let n = value.chars().count();
    if n > MAX_LABEL_CHARS {
        return Err(StoreError::Invalid(format!(
            "{field} is {n} characters; the limit is {MAX_LABEL_CHARS}"
        )));
    }
    Ok(())
}

fn check_body(body: &str) -> Result<()> {
    if body.trim().is_empty() {
        return Err(StoreError::Invalid("a post requires non-empty text".into()));
    }
    let n = body.chars().count();
    if n > MAX_POST_CHARS {
        return Err(StoreError::Invalid(format!(
            "the post is {n} characters; the limit is {MAX_POST_CHARS}"
        )));
    }
    Ok(())
}

/// Append a post inside the caller's write transaction, assigning the room's next seq:
/// the room's `max + 1`, read and inserted in one statement once this transaction is the
/// room's only poster ([`Tx::serialize_on`]; `UNIQUE(room_id, seq)` stands behind it). The
/// key names the room, not a row, so a room's first posts are ordered as well as its later
/// ones.
pub(crate) async fn insert_post<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    room_id: &str,
    author: &str,
    kind: PostKind,
    body: &str,
) -> Result<ChatPost> {
    tx.serialize_on(format!("chat-room:{room_id}")).await?;
    tx.raise(crate::events::Event::Posted {
        room: room_id.into(),
    })
    .await?;
    let id = new_id();
    let insert = Query::new(
        "INSERT INTO team_chat(id, room_id, seq, author, body, kind, created_at)
         VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM team_chat WHERE room_id = ?2),
             ?3, ?4, ?5, ?6)
         RETURNING seq",
        &[&id, &room_id, &author, &body, &kind.as_str(), &now],
    );
    let seq: i64 = tx
        .query_map(insert, |r| r.get(0))
        .await?
        .pop()
        .ok_or_else(|| {
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Other,
                message: "a post's insert returned no seq".into(),
            })
        })?;
    crate::counters::chat_posted();
    Ok(ChatPost {
        id,
        room_id: room_id.to_owned(),
        seq,
        author: author.to_owned(),
        body: body.to_owned(),
        kind,
        created_at: now,
    })
}

impl Store {
    /// Append a post to `room_id` with the room's next seq (from 1, contiguous and unique
    /// across processes), and wake same-process waiters.
    pub fn post_chat(
        &self,
        room_id: &str,
        author: &str,
        kind: PostKind,
        body: &str,
    ) -> Result<ChatPost> {
        check_label("roomId", room_id)?;
        check_label("author", author)?;
        check_body(body)?;
        let now = self.now_ms();
        self.write(|tx| ready_now(insert_post(tx, now, room_id, author, kind, body)))
    }

    /// [`Store::post_chat`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn post_chat_async(
        self: &Arc<Store>,
        room_id: String,
        author: String,
        kind: PostKind,
        body: String,
    ) -> std::result::Result<Result<ChatPost>, RunError> {
        let checked = check_label("roomId", &room_id)
            .and_then(|()| check_label("author", &author))
            .and_then(|()| check_body(&body));
        if let Err(e) = checked {
            return Ok(Err(e));
        }
        let post = PostWrite {
            room_id,
            author,
            kind,
            body,
            now: self.now_ms(),
        };
        self.run_transaction(post).await
    }

    /// Posts of a room newer than the cursor, oldest first, skipping the excluded author's,
    /// with the next cursor (see [`ChatPage::next_seq`]). Read in one snapshot.
    pub fn read_chat(&self, query: &ChatQuery<'_>) -> Result<ChatPage> {
        self.snapshot(|tx| ready_now(read_posts(tx, query)))
    }

    /// [`Store::read_chat`] for an async caller, run the way the engine runs reads best
    /// ([`Store::run_snapshot`]).
    pub async fn read_chat_async(
        self: &Arc<Store>,
        room_id: String,
        since_seq: i64,
        limit: usize,
        exclude_author: Option<String>,
    ) -> std::result::Result<Result<ChatPage>, RunError> {
        self.run_snapshot(PostsRead {
            room_id,
            since_seq,
            limit,
            exclude_author,
        })
        .await
    }
}

/// [`Store::read_chat`]'s read, on any transaction.
async fn read_posts<R: Reads + ?Sized>(tx: &R, query: &ChatQuery<'_>) -> Result<ChatPage> {
    let limit = query.limit.clamp(1, MAX_READ_LIMIT);
    let page = Query::new(
        READ_POSTS,
        &[
            &query.room_id,
            &query.since_seq,
            &query.exclude_author,
            &limit,
        ],
    );
    let posts = tx.query_map(page, post_from_row).await?;
    let next_seq = match posts.last() {
        Some(last) if posts.len() == limit => last.seq,
        _ => {
            let head = Query::new(
                "SELECT COALESCE(MAX(seq), 0) FROM team_chat WHERE room_id = ?1",
                &[&query.room_id],
            );
            let head: i64 = reads::query_first(tx, head)
                .await?
                .map_or(Ok(0), |row| row.get(0))?;
            head.max(query.since_seq)
        }
    };
    Ok(ChatPage { posts, next_seq })
}

/// [`read_posts`] with its arguments, for [`Store::run_snapshot`].
struct PostsRead {
    room_id: String,
    since_seq: i64,
    limit: usize,
    exclude_author: Option<String>,
}

impl PostsRead {
    fn query(&self) -> ChatQuery<'_> {
        ChatQuery {
            room_id: &self.room_id,
            since_seq: self.since_seq,
            limit: self.limit,
            exclude_author: self.exclude_author.as_deref(),
        }
    }
}

/// [`insert_post`] with its arguments checked, for [`Store::run_transaction`].
struct PostWrite {
    room_id: String,
    author: String,
    kind: PostKind,
    body: String,
    now: i64,
}

impl PostWrite {
    fn insert<'a, W: Writes + ?Sized>(
        &'a self,
        tx: &'a W,
    ) -> impl Future<Output = Result<ChatPost>> + 'a {
        let Self {
            room_id,
            author,
            kind,
            body,
            now,
        } = self;
        insert_post(tx, *now, room_id, author, *kind, body)
    }
}

impl StoreWrite for PostWrite {
    type Output = ChatPost;

    fn run(&self, tx: &dyn Tx) -> Result<ChatPost> {
        ready_now(self.insert(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<ChatPost>> {
        Box::pin(self.insert(tx))
    }
}

impl StoreRead for PostsRead {
    type Output = ChatPage;

    fn run(&self, tx: &dyn Tx) -> Result<ChatPage> {
        ready_now(read_posts(tx, &self.query()))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<ChatPage>> {
        Box::pin(async move { read_posts(tx, &self.query()).await })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("chat.db")).unwrap();
        (dir, Arc::new(store))
    }

    fn query<'a>(room: &'a str, since: i64, limit: usize, me: Option<&'a str>) -> ChatQuery<'a> {
        ChatQuery {
            room_id: room,
            since_seq: since,
            limit,
            exclude_author: me,
        }
    }

    fn seqs(page: &ChatPage) -> Vec<i64> {
        page.posts.iter().map(|p| p.seq).collect()
    }

    #[test]
    fn seq_starts_at_one_per_room_and_is_contiguous() {
        let (_dir, s) = store();
        for i in 1..=3 {
            let p = s.post_chat("team:a", "x", PostKind::Peer, "hi").unwrap();
            assert_eq!(p.seq, i);
        }
        let other = s.post_chat("team:b", "x", PostKind::User, "yo").unwrap();
        assert_eq!(other.seq, 1);
        assert_eq!(other.kind, PostKind::User);
    }

    #[test]
    fn posts_are_validated() {
        let (_dir, s) = store();
        let err = s
            .post_chat("team:a", "x", PostKind::Peer, "  \n")
            .unwrap_err();
        assert_eq!(err.to_string(), "invalid: a post requires non-empty text");
        assert!(s.post_chat("", "x", PostKind::Peer, "hi").is_err());
        let long = "x".repeat(MAX_POST_CHARS + 1);
        assert!(s.post_chat("team:a", "x", PostKind::Peer, &long).is_err());
        let page = s.read_chat(&query("team:a", 0, 10, None)).unwrap();
        assert_eq!(
            page,
            ChatPage {
                posts: vec![],
                next_seq: 0
            }
        );
    }

    #[test]
    fn small_limits_walk_every_post_exactly_once_past_own_posts() {
        let (_dir, s) = store();
        let mut expected = Vec::new();
        for i in 0..23 {
            let author = if i % 3 == 0 { "me" } else { "peer" };
            let p = s
                .post_chat("r", author, PostKind::Peer, &format!("post {i}"))
                .unwrap();
            if author != "me" {
                expected.push(p.seq);
            }
        }
        for limit in [1, 2, 5, 500] {
            let mut cursor = 0;
            let mut seen = Vec::new();
            loop {
                let page = s.read_chat(&query("r", cursor, limit, Some("me"))).unwrap();
                assert!(page.posts.len() <= limit);
                assert!(page.next_seq >= cursor);
                seen.extend(seqs(&page));
                if page.next_seq == cursor {
                    assert!(page.posts.is_empty());
                    break;
                }
                cursor = page.next_seq;
            }
            assert_eq!(seen, expected, "limit {limit}");
            assert_eq!(cursor, 23, "the cursor ends at the head, past own posts");
        }
    }

    #[test]
    fn a_cursor_past_the_head_is_unchanged() {
        let (_dir, s) = store();
        s.post_chat("r", "a", PostKind::Peer, "one").unwrap();
        let page = s.read_chat(&query("r", 40, 10, None)).unwrap();
        assert_eq!(
            page,
            ChatPage {
                posts: vec![],
                next_seq: 40
            }
        );
    }

    #[tokio::test]
    async fn a_post_wakes_its_rooms_listeners_only() {
        let (_dir, s) = store();
        let mut other_room = s.listen_to_room("elsewhere");
        other_room.mark();
        let mut bell = s.listen_to_room("r");
        bell.mark();
        let poster = Arc::clone(&s);
        let posted = std::thread::spawn(move || {
            poster
                .post_chat("r", "peer", PostKind::Peer, "theirs")
                .unwrap();
        });
        let before = std::time::Instant::now();
        bell.heard(MAX_WAIT).await;
        assert!(before.elapsed() < MAX_WAIT, "the post woke the listener");
        posted.join().unwrap();
        let quiet = Duration::from_millis(200);
        let before = std::time::Instant::now();
        other_room.heard(quiet).await;
        assert!(
            before.elapsed() >= quiet,
            "another room's listener slept on"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_in_a_group_commit_wakes_its_room_once_readable() {
        let (_dir, s) = store();
        for round in 1..=20 {
            let mut bell = s.listen_to_room("r");
            bell.mark();
            let poster = Arc::clone(&s);
            let posting = tokio::spawn(async move {
                poster
                    .run_write(|st| st.post_chat("r", "peer", PostKind::Peer, "hi"))
                    .await
            });
            bell.heard(MAX_WAIT).await;
            // The event comes after the commit, so the first read after it sees the post.
            let page = s.read_chat(&query("r", round - 1, 10, None)).unwrap();
            assert_eq!(
                page.posts.len(),
                1,
                "round {round}: woken before the commit"
            );
            posting.await.unwrap().unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_post_rolled_back_wakes_nobody() {
        let (_dir, s) = store();
        let mut bell = s.listen_to_room("r");
        bell.mark();
        let refused = s.write(|tx| {
            ready_now(insert_post(tx, 1, "r", "peer", PostKind::Peer, "never"))?;
            Err::<(), _>(StoreError::Invalid("the rest of the write failed".into()))
        });
        assert!(refused.is_err());
        let quiet = Duration::from_millis(200);
        let before = std::time::Instant::now();
        bell.heard(quiet).await;
        assert!(
            before.elapsed() >= quiet,
            "a rolled-back post woke its room"
        );
        assert!(
            s.read_chat(&query("r", 0, 10, None))
                .unwrap()
                .posts
                .is_empty()
        );
    }
}
