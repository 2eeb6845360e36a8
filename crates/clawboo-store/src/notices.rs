//! What a write tells the other processes on its database ([`crate::db::Tx::notify`]), and
//! what a process does when told: each topic wakes the waiters of one area at once, as a
//! write in the same process does, instead of their next poll. PostgreSQL delivers topics
//! by `LISTEN/NOTIFY` to every host; SQLite's processes poll.

/// A room got a post: long-polls re-read their rooms.
pub(crate) const CHAT: &str = "chat";

/// Something was written: live views re-read their change marks ([`crate::activity`]).
/// Each process announces its writes at most once a short while, never inside a write
/// transaction (a `NOTIFY` there would serialise every writer's commit).
pub(crate) const ACTIVITY: &str = "activity";

/// The prefix of an approval's topic.
const APPROVAL: &str = "approval:";

/// The topic of a decision on approval `id` (the tool broker sends it with
/// [`crate::db::Tx::notify`]): the call waiting on it wakes, on every host.
pub fn approval(id: &str) -> String {
    format!("{APPROVAL}{id}")
}

/// Wake this process's waiters for `topic` (one another process sent).
pub(crate) fn deliver(topic: &str) {
    if topic == CHAT {
        crate::bell::CHAT.ring();
    } else if topic == ACTIVITY {
        crate::bell::ACTIVITY.ring();
    } else if topic.starts_with(APPROVAL) {
        // Every waiting call of this process reads its own approval again.
        crate::bell::APPROVALS.ring();
    }
}
