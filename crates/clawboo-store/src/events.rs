//! Domain events: what a committed write tells the waits that care (a post in a room, a
//! decided or expired approval, "this process wrote"). A domain rule raises an event
//! inside its transaction ([`raise`]); the store publishes it on its bus (`bus::Bus`)
//! only once that transaction (or the group commit it ran in) committed, and drops it when
//! the write rolled back, so a waiter never wakes to read a state that is not there yet.
//! The same event goes to every other process as its wire topic (`Event::topic`): on
//! PostgreSQL by `NOTIFY`, delivered at commit and published on each listening process's
//! bus by the cross-host relay (`postgres/listen.rs`); SQLite's processes poll instead.

use std::cell::RefCell;

use crate::db::Tx;
use crate::error::Result;

/// What happened, keyed as its waiters subscribe (`bus::Bus::listen`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// A room got a post: long-polls on that room read again.
    Posted { room: String },
    /// Some rooms got posts, which ones unknown (a relay that lost its connection, or a
    /// host that names no room): every room's long-polls read again.
    PostedSomewhere,
    /// An approval was decided or expired: the call waiting on it reads it again.
    ApprovalSettled { id: String },
    /// Some approvals settled, which ones unknown: every approval wait reads again.
    ApprovalsSettled,
    /// Something was written (announced by each PostgreSQL process, its own writes
    /// included): live views re-read their change marks ([`crate::activity`]).
    Wrote,
}

const ROOM: &str = "chat:";
const ANY_ROOM: &str = "chat";
const APPROVAL: &str = "approval:";
const WROTE: &str = "activity";

impl Event {
    /// The event as a `NOTIFY` payload to the other processes.
    pub(crate) fn topic(&self) -> String {
        match self {
            Event::Posted { room } => format!("{ROOM}{room}"),
            Event::PostedSomewhere => ANY_ROOM.into(),
            Event::ApprovalSettled { id } => format!("{APPROVAL}{id}"),
            Event::ApprovalsSettled => APPROVAL.into(),
            Event::Wrote => WROTE.into(),
        }
    }

    /// The event another process sent as `topic`; `None` for a topic this version does not
    /// know (a newer host's), which wakes nobody.
    pub(crate) fn from_topic(topic: &str) -> Option<Event> {
        if topic == ANY_ROOM {
            Some(Event::PostedSomewhere)
        } else if let Some(room) = topic.strip_prefix(ROOM) {
            Some(Event::Posted { room: room.into() })
        } else if topic == APPROVAL {
            Some(Event::ApprovalsSettled)
        } else if let Some(id) = topic.strip_prefix(APPROVAL) {
            Some(Event::ApprovalSettled { id: id.into() })
        } else if topic == WROTE {
            Some(Event::Wrote)
        } else {
            None
        }
    }
}

/// Raise `event` in the write transaction `tx`: every other process hears of it when `tx`
/// commits ([`Tx::notify`]), and this process's bus once the store committed the write
/// that raised it.
pub fn raise(tx: &dyn Tx, event: Event) -> Result<()> {
    tx.notify(&event.topic())?;
    RAISED.with_borrow_mut(|raised| raised.events.push(event));
    Ok(())
}

/// The events raised on this thread by the writes it is running, and how deep those
/// writes nest. A write's body runs on the thread that began it (both engines run a
/// transaction's body synchronously), so a thread-local is the write's own list.
#[derive(Default)]
struct Raised {
    depth: usize,
    events: Vec<Event>,
}

thread_local! {
    static RAISED: RefCell<Raised> = RefCell::new(Raised::default());
}

/// One write (or one queued write of a group) on this thread, from its start to its end:
/// the events raised inside it are kept when it succeeds ([`Raising::succeeded`]) and
/// dropped when it fails or unwinds, as its savepoint or transaction is.
pub(crate) struct Raising {
    mark: usize,
    ended: bool,
}

impl Raising {
    pub(crate) fn begin() -> Raising {
        let mark = RAISED.with_borrow_mut(|raised| {
            raised.depth += 1;
            raised.events.len()
        });
        Raising { mark, ended: false }
    }

    /// The write succeeded. Returns the events to publish now when it was the outermost
    /// write on this thread (so it committed); an inner one's stay for its outer write.
    pub(crate) fn succeeded(mut self) -> Vec<Event> {
        self.ended = true;
        RAISED.with_borrow_mut(|raised| {
            raised.depth -= 1;
            if raised.depth == 0 {
                std::mem::take(&mut raised.events)
            } else {
                Vec::new()
            }
        })
    }

    /// The write of a group's job ran: its events, to publish when the group commits.
    pub(crate) fn ran_in_group(mut self) -> Vec<Event> {
        self.ended = true;
        RAISED.with_borrow_mut(|raised| {
            raised.depth -= 1;
            raised.events.split_off(self.mark.min(raised.events.len()))
        })
    }
}

impl Drop for Raising {
    /// A write that failed or unwound: what it raised never happened.
    fn drop(&mut self) {
        if !self.ended {
            RAISED.with_borrow_mut(|raised| {
                raised.depth = raised.depth.saturating_sub(1);
                raised.events.truncate(self.mark);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_survives_its_wire_topic() {
        for event in [
            Event::Posted {
                room: "team:red".into(),
            },
            Event::PostedSomewhere,
            Event::ApprovalSettled { id: "a1".into() },
            Event::ApprovalsSettled,
            Event::Wrote,
        ] {
            assert_eq!(Event::from_topic(&event.topic()), Some(event));
        }
        assert_eq!(Event::from_topic("something-newer"), None);
    }

    fn push(event: Event) {
        RAISED.with_borrow_mut(|raised| raised.events.push(event));
    }

    #[test]
    fn a_failed_inner_write_drops_only_its_own_events() {
        let outer = Raising::begin();
        push(Event::Wrote);
        let inner = Raising::begin();
        push(Event::PostedSomewhere);
        drop(inner);
        let kept = Raising::begin();
        push(Event::ApprovalsSettled);
        assert!(
            kept.succeeded().is_empty(),
            "an inner write publishes nothing"
        );
        assert_eq!(
            outer.succeeded(),
            vec![Event::Wrote, Event::ApprovalsSettled]
        );
    }

    #[test]
    fn a_group_job_takes_its_own_events_and_a_failed_one_none() {
        let job = Raising::begin();
        push(Event::Wrote);
        assert_eq!(job.ran_in_group(), vec![Event::Wrote]);
        let failed = Raising::begin();
        push(Event::Wrote);
        drop(failed);
        let next = Raising::begin();
        assert!(next.ran_in_group().is_empty());
    }
}
