//! Delegation: a teammate hands work to another by name. One write creates the task through
//! the board's own create, queues the assignee's inbox note and narrates it in the room,
//! so the board stays canonical and a post is only narration.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::board::{self, CreatePolicy, NewTask, Scope, Task};
use crate::chat::{ChatPost, PostKind, SYSTEM_AUTHOR, check_label, insert_post};
use crate::db::Tx;
use crate::error::StoreError;
use crate::reads::ready_now;
use crate::run::RunError;
use crate::teams::{self, Agent};
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, inbox};

/// A delegation: `caller_agent_id` hands `task` to the teammate named (or id'd) `assignee`.
#[derive(Debug, Clone, Copy)]
pub struct Delegation<'a> {
    pub team_id: &'a str,
    pub caller_agent_id: &'a str,
    pub assignee: &'a str,
    /// First line is the title, the rest the description.
    pub task: &'a str,
    /// Where the delegation is narrated.
    pub room_id: &'a str,
}

/// What a delegation wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegated {
    /// The new `todo` task in the team.
    pub task: Task,
    /// The teammate it was handed to.
    pub assignee: Agent,
    /// The `system` post narrating it.
    pub post: ChatPost,
}

/// Why a delegation was refused. Every refusal leaves the store unchanged.
#[derive(Debug, thiserror::Error)]
pub enum DelegateError {
    /// `assignee` names no agent of the team.
    #[error("no teammate matches \"{assignee}\" on team {team_id}; {}", roster_hint(.roster))]
    UnknownAssignee {
        assignee: String,
        team_id: String,
        /// The caller's teammates.
        roster: Vec<Agent>,
    },
    /// `assignee` names several agents of the team.
    #[error("\"{assignee}\" matches several teammates; pass the agent id instead; {}", roster_hint(.roster))]
    AmbiguousAssignee {
        assignee: String,
        roster: Vec<Agent>,
    },
    /// `assignee` is the caller.
    #[error("you cannot delegate to yourself ({caller}); {}", roster_hint(.roster))]
    SelfAssignment { caller: String, roster: Vec<Agent> },
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn roster_hint(roster: &[Agent]) -> String {
    if roster.is_empty() {
        return "no teammates are registered on this team yet (an operator adds them with POST /api/agents)".into();
    }
    let names: Vec<String> = roster
        .iter()
        .map(|a| format!("{} ({})", a.name, a.id))
        .collect();
    format!("delegate to one of: {}", names.join(", "))
}

/// Split a delegated task's text into a title (its first non-blank line, cut to the board's
/// title limit) and a description (the rest; the whole text when the title was cut).
fn split_task_text(text: &str) -> (String, Option<String>) {
    let trimmed = text.trim();
    let (first, rest) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
    let first = first.trim();
    let (title, description) = if first.chars().count() > board::MAX_TITLE_CHARS {
        let cut: String = first.chars().take(board::MAX_TITLE_CHARS - 1).collect();
        (format!("{cut}…"), trimmed.to_owned())
    } else {
        (first.to_owned(), rest.trim().to_owned())
    };
    (title, (!description.is_empty()).then_some(description))
}

impl Store {
    /// Hand `task` to a teammate: resolve the assignee by id or name among the team's
    /// agents (never the caller), create a `todo` task in the team through the board's
    /// uncapped create (`assigneeRuntime` from the agent), queue an inbox row for the
    /// assignee and narrate a `system` post in the room, all in one write.
    pub fn delegate(&self, delegation: &Delegation<'_>) -> Result<Delegated, DelegateError> {
        let write = DelegateWrite::new(self, delegation)?;
        self.write(|tx| write.run(tx))?
    }

    /// [`Store::delegate`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn delegate_async(
        self: &Arc<Store>,
        delegation: &Delegation<'_>,
    ) -> std::result::Result<Result<Delegated, DelegateError>, RunError> {
        let write = match DelegateWrite::new(self, delegation) {
            Ok(write) => write,
            Err(e) => return Ok(Err(e)),
        };
        Ok(match self.run_transaction(write).await? {
            Ok(delegated) => delegated,
            Err(e) => Err(e.into()),
        })
    }
}

/// A [`Delegation`] with its text checked, for [`Store::run_transaction`]. A refusal
/// that names teammates is the write's answer, not its error: it wrote nothing.
struct DelegateWrite {
    team_id: String,
    caller_agent_id: String,
    assignee: String,
    title: String,
    description: Option<String>,
    room_id: String,
    now: i64,
}

impl DelegateWrite {
    fn new(store: &Store, delegation: &Delegation<'_>) -> Result<DelegateWrite, DelegateError> {
        let Delegation {
            team_id,
            caller_agent_id,
            assignee,
            task,
            room_id,
        } = *delegation;
        check_label("roomId", room_id)?;
        if task.trim().is_empty() || assignee.trim().is_empty() {
            return Err(StoreError::Invalid(
                "a delegation requires both an assignee and a task".into(),
            )
            .into());
        }
        if task.chars().count() > board::MAX_BODY_CHARS {
            return Err(StoreError::Invalid(format!(
                "the task is longer than {} characters; shorten it",
                board::MAX_BODY_CHARS
            ))
            .into());
        }
        let (title, description) = split_task_text(task);
        Ok(DelegateWrite {
            team_id: team_id.to_owned(),
            caller_agent_id: caller_agent_id.to_owned(),
            assignee: assignee.trim().to_owned(),
            title,
            description,
            room_id: room_id.to_owned(),
            now: store.now_ms(),
        })
    }

    /// The caller's name on the team and the teammate `assignee` names: by id, else by
    /// name, else by name in any case; never the caller.
    fn choose(&self, agents: &[Agent]) -> Result<(String, Agent), DelegateError> {
        let caller = self.caller_agent_id.as_str();
        let caller_name = agents
            .iter()
            .find(|a| a.id == caller)
            .map_or(caller, |a| a.name.as_str())
            .to_owned();
        let roster: Vec<Agent> = agents.iter().filter(|a| a.id != caller).cloned().collect();
        let wanted = self.assignee.as_str();
        let by_id: Vec<&Agent> = agents.iter().filter(|a| a.id == wanted).collect();
        let by_name: Vec<&Agent> = agents.iter().filter(|a| a.name == wanted).collect();
        let by_folded_name: Vec<&Agent> = agents
            .iter()
            .filter(|a| a.name.to_lowercase() == wanted.to_lowercase())
            .collect();
        let matches = [by_id, by_name, by_folded_name]
            .into_iter()
            .find(|m| !m.is_empty())
            .unwrap_or_default();
        let target = match matches.as_slice() {
            [] => {
                return Err(DelegateError::UnknownAssignee {
                    assignee: wanted.to_owned(),
                    team_id: self.team_id.clone(),
                    roster,
                });
            }
            [one] => (*one).clone(),
            _ => {
                return Err(DelegateError::AmbiguousAssignee {
                    assignee: wanted.to_owned(),
                    roster,
                });
            }
        };
        if target.id == caller {
            return Err(DelegateError::SelfAssignment {
                caller: caller_name,
                roster,
            });
        }
        Ok((caller_name, target))
    }

    /// The roster read, then the task, the assignee's inbox note and the room narration,
    /// which land together or not at all.
    async fn delegate<W: Writes + ?Sized>(
        &self,
        tx: &W,
    ) -> crate::error::Result<Result<Delegated, DelegateError>> {
        let (team_id, now) = (self.team_id.as_str(), self.now);
        let agents = teams::agents_on(tx, Some(team_id)).await?;
        let (caller_name, target) = match self.choose(&agents) {
            Ok(chosen) => chosen,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let new = NewTask {
            title: self.title.clone(),
            description: self.description.clone(),
            team_id: Some(team_id.to_owned()),
            assignee_runtime: target.runtime.clone(),
            ..NewTask::default()
        };
        let scope = Scope::team(Some(team_id));
        let created = board::insert_task(tx, now, &new, CreatePolicy::Uncapped, scope).await?;
        let note = format!(
            "{caller_name} delegated a task to you: \"{}\" ({}); claim it with claim_task",
            created.title, created.id
        );
        let narration = format!(
            "{caller_name} delegated \"{}\" to {} (task {})",
            created.title, target.name, created.id
        );
        inbox::push(tx, now, &target.id, Some(team_id), "delegation", &note).await?;
        let post = insert_post(
            tx,
            now,
            &self.room_id,
            SYSTEM_AUTHOR,
            PostKind::System,
            &narration,
        )
        .await?;
        Ok(Ok(Delegated {
            task: created,
            assignee: target,
            post,
        }))
    }
}

impl StoreWrite for DelegateWrite {
    type Output = Result<Delegated, DelegateError>;

    fn run(&self, tx: &dyn Tx) -> crate::error::Result<Self::Output> {
        ready_now(self.delegate(tx))
    }

    fn run_async<'a>(
        &'a self,
        tx: &'a AsyncWriteTx,
    ) -> BoxFuture<'a, crate::error::Result<Self::Output>> {
        Box::pin(self.delegate(tx))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::board::Status;
    use crate::teams::NewAgent;

    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("delegate.db")).unwrap();
        (dir, Arc::new(store))
    }

    #[test]
    fn task_text_splits_into_title_and_description() {
        assert_eq!(
            split_task_text("  Fix it \n\n details\nmore "),
            ("Fix it".into(), Some("details\nmore".into()))
        );
        assert_eq!(
            split_task_text("only a title"),
            ("only a title".into(), None)
        );
        let long = "t".repeat(board::MAX_TITLE_CHARS + 10);
        let (title, description) = split_task_text(&long);
        assert_eq!(title.chars().count(), board::MAX_TITLE_CHARS);
        assert_eq!(description.as_deref(), Some(long.as_str()));
    }

    fn team(s: &Store) {
        for (id, name, runtime) in [("a1", "alice", "codex"), ("b1", "bob", "claude-code")] {
            s.upsert_agent(&NewAgent {
                id: Some(id.into()),
                name: name.into(),
                team_id: Some("t".into()),
                runtime: Some(runtime.into()),
            })
            .unwrap();
        }
        s.upsert_agent(&NewAgent {
            id: Some("z1".into()),
            name: "zed".into(),
            team_id: Some("other".into()),
            runtime: None,
        })
        .unwrap();
    }

    fn delegation<'a>(assignee: &'a str, task: &'a str) -> Delegation<'a> {
        Delegation {
            team_id: "t",
            caller_agent_id: "a1",
            assignee,
            task,
            room_id: "team:t",
        }
    }

    #[test]
    fn delegation_creates_the_task_queues_the_inbox_and_narrates() {
        let (_dir, s) = store();
        team(&s);
        let done = s
            .delegate(&delegation("Bob", "Write tests\nfor the chat"))
            .unwrap();
        assert_eq!(done.assignee.id, "b1");
        assert_eq!(done.task.title, "Write tests");
        assert_eq!(done.task.description.as_deref(), Some("for the chat"));
        assert_eq!(done.task.status, Status::Todo);
        assert_eq!(done.task.team_id.as_deref(), Some("t"));
        assert_eq!(done.task.assignee_runtime.as_deref(), Some("claude-code"));
        assert_eq!(done.task.assignee_agent_id, None, "left claimable");
        assert_eq!(
            (done.post.kind, done.post.author.as_str()),
            (PostKind::System, SYSTEM_AUTHOR)
        );
        assert!(done.post.body.contains(&done.task.id));
        let inbox = s.take_inbox("b1", Some("t"), 5, "test").unwrap();
        assert_eq!(inbox.len(), 1);
        assert_eq!(inbox[0].source, "delegation");
        assert!(inbox[0].body.contains(&done.task.id));
        // by id too
        assert_eq!(
            s.delegate(&delegation("b1", "again"))
                .unwrap()
                .assignee
                .name,
            "bob"
        );
    }

    #[test]
    fn delegation_refuses_nobody_and_the_caller_with_the_roster() {
        let (_dir, s) = store();
        team(&s);
        for (who, starts) in [
            ("zed", "no teammate matches \"zed\""),
            ("alice", "you cannot delegate to yourself (alice)"),
            ("a1", "you cannot delegate to yourself"),
        ] {
            let err = s.delegate(&delegation(who, "work")).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with(starts), "{text}");
            assert!(text.ends_with("delegate to one of: bob (b1)"), "{text}");
        }
        assert!(s.list_tasks(&Default::default()).unwrap().is_empty());
        assert!(
            s.read_chat(&crate::chat::ChatQuery {
                room_id: "team:t",
                since_seq: 0,
                limit: 10,
                exclude_author: None,
            })
            .unwrap()
            .posts
            .is_empty()
        );
        let lonely = Delegation {
            team_id: "empty",
            ..delegation("bob", "x")
        };
        assert!(
            s.delegate(&lonely)
                .unwrap_err()
                .to_string()
                .contains("no teammates are registered")
        );
    }
}
