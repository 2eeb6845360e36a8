//! Fuzzing every tool's argument decoding on all four servers, through the real stdio
//! front and `McpServer` in process: each case calls one tool with an arbitrary object
//! (the tool's own keys with well- or wrongly-typed values, nulls, huge strings, deep
//! nesting, missing required keys, unknown keys) and checks that
//!
//! - the answer is a tool result, never a JSON-RPC error and never a panic;
//! - arguments serde cannot decode (unknown key, wrong type, missing required key) are
//!   refused with `_meta.error = invalid_args`;
//! - a refused call leaves the store as it was (row counts of every table, and no row
//!   changed), apart from the tools broker's audit trail, which records refusals too.
//!
//! `PROPTEST_CASES=5000 cargo test -p clawboo-mcp --test fuzz_tool_args` for a long run.

mod fuzz_support;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clawboo_broker::BrokerConfig;
use clawboo_embed::HashedEmbedder;
use clawboo_exec::Builtins;
use clawboo_mcp::binding::Binding;
use clawboo_mcp::memory::{MemoryConfig, MemoryServer};
use clawboo_mcp::server::McpServer;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_mcp::teamchat::TeamChatServer;
use clawboo_mcp::tools::{ToolsConfig, ToolsServer};
use clawboo_mcp::waits::WaitLimit;
use clawboo_memory::Memory;
use clawboo_store::board::{CreatePolicy, NewTask};
use clawboo_store::teams::NewAgent;
use clawboo_store::{Store, StoreConfig};
use fuzz_support::{LineSession, arbitrary_json, config};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};

/// What serde accepts for one argument.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Bool,
    U32,
    U64,
    I64,
    Enum(&'static [&'static str]),
    StrList,
}

/// One argument of a tool: its wire name, type, and whether serde requires it.
#[derive(Debug)]
struct Field {
    name: &'static str,
    kind: Kind,
    required: bool,
}

const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: true,
    }
}

const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// A tool and the arguments its decoder accepts.
#[derive(Debug)]
struct Shape {
    tool: &'static str,
    fields: &'static [Field],
}

const STATUS: Kind = Kind::Enum(&[
    "backlog",
    "todo",
    "in_progress",
    "in_review",
    "blocked",
    "done",
    "cancelled",
]);
const TASK_ID: [Field; 1] = [req("taskId", Kind::Str)];

const TASKS: &[Shape] = &[
    Shape {
        tool: "list_tasks",
        fields: &[
            opt("teamId", Kind::Str),
            opt("status", STATUS),
            opt("ready", Kind::Bool),
        ],
    },
    Shape {
        tool: "get_task",
        fields: &TASK_ID,
    },
    Shape {
        tool: "create_task",
        fields: &[
            req("title", Kind::Str),
            opt("description", Kind::Str),
            opt("status", STATUS),
            opt("priority", Kind::I64),
            opt("teamId", Kind::Str),
            opt("parentTaskId", Kind::Str),
            opt("assigneeRuntime", Kind::Str),
        ],
    },
    Shape {
        tool: "create_subtask",
        fields: &[
            req("parentTaskId", Kind::Str),
            req("title", Kind::Str),
            opt("description", Kind::Str),
        ],
    },
    Shape {
        tool: "claim_task",
        fields: &[
            req("taskId", Kind::Str),
            req("assigneeAgentId", Kind::Str),
            opt("assigneeRuntime", Kind::Str),
        ],
    },
    Shape {
        tool: "assign_task",
        fields: &[
            req("taskId", Kind::Str),
            req("assigneeAgentId", Kind::Str),
            opt("assigneeRuntime", Kind::Str),
        ],
    },
    Shape {
        tool: "release_task",
        fields: &TASK_ID,
    },
    Shape {
        tool: "update_task_status",
        fields: &[req("taskId", Kind::Str), req("status", STATUS)],
    },
    Shape {
        tool: "block_task",
        fields: &TASK_ID,
    },
    Shape {
        tool: "unblock_task",
        fields: &TASK_ID,
    },
    Shape {
        tool: "add_comment",
        fields: &[
            req("taskId", Kind::Str),
            req("body", Kind::Str),
            opt("authorAgentId", Kind::Str),
            opt("authorType", Kind::Enum(&["agent", "user", "system"])),
        ],
    },
    Shape {
        tool: "link_task",
        fields: &[req("taskId", Kind::Str), req("dependsOnTaskId", Kind::Str)],
    },
];

const MEMORY: &[Shape] = &[
    Shape {
        tool: "memory_save",
        fields: &[
            req("content", Kind::Str),
            opt("title", Kind::Str),
            opt("tags", Kind::StrList),
            opt("procedureName", Kind::Str),
            opt("scopeTeamId", Kind::Str),
            opt("scopeAgentId", Kind::Str),
        ],
    },
    Shape {
        tool: "memory_search",
        fields: &[
            req("query", Kind::Str),
            opt("mode", Kind::Enum(&["fts", "vector", "hybrid"])),
            opt("limit", Kind::U32),
            opt("scopeTeamId", Kind::Str),
            opt("scopeAgentId", Kind::Str),
            opt("includeProcedures", Kind::Bool),
        ],
    },
    Shape {
        tool: "memory_browse",
        fields: &[
            opt("limit", Kind::U32),
            opt("scopeTeamId", Kind::Str),
            opt("scopeAgentId", Kind::Str),
            opt("includeProcedures", Kind::Bool),
        ],
    },
];

const TEAMCHAT: &[Shape] = &[
    Shape {
        tool: "team_chat_post",
        fields: &[
            req("text", Kind::Str),
            opt("authorAgentId", Kind::Str),
            opt("teamId", Kind::Str),
            opt("roomId", Kind::Str),
        ],
    },
    Shape {
        tool: "team_chat_subscribe",
        fields: &[
            opt("sinceSeq", Kind::U64),
            opt("limit", Kind::U64),
            opt("authorAgentId", Kind::Str),
            opt("teamId", Kind::Str),
            opt("roomId", Kind::Str),
            opt("waitMs", Kind::U64),
        ],
    },
    Shape {
        tool: "team_delegate",
        fields: &[opt("assignee", Kind::Str), opt("task", Kind::Str)],
    },
];

const TOOLS: &[Shape] = &[
    Shape {
        tool: "echo",
        fields: &[req("message", Kind::Str)],
    },
    Shape {
        tool: "note",
        fields: &[req("note", Kind::Str)],
    },
    Shape {
        tool: "web_search",
        fields: &[req("query", Kind::Str), opt("limit", Kind::U64)],
    },
    Shape {
        tool: "delete_path",
        fields: &[req("path", Kind::Str)],
    },
];

/// Whether serde decodes `value` as `kind`: `Some(false)` when it certainly refuses it,
/// `None` where serde's leniency makes the answer depend on details (an enum written as a
/// one-key object).
fn decodes(kind: Kind, value: &Value, required: bool) -> Option<bool> {
    if value.is_null() {
        return Some(!required);
    }
    Some(match kind {
        Kind::Str => value.is_string(),
        Kind::Bool => value.is_boolean(),
        Kind::U32 => value.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)),
        Kind::U64 => value.is_u64(),
        Kind::I64 => value.is_i64(),
        Kind::Enum(variants) => match value {
            Value::String(s) => variants.contains(&s.as_str()),
            Value::Object(map) if map.len() == 1 => return None,
            _ => false,
        },
        Kind::StrList => value
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string)),
    })
}

/// Whether serde certainly refuses `args` for `shape`.
fn certainly_refused(shape: &Shape, args: &Map<String, Value>) -> bool {
    let unknown = args
        .keys()
        .any(|k| !shape.fields.iter().any(|f| f.name == k));
    let bad = shape.fields.iter().any(|f| match args.get(f.name) {
        None => f.required,
        Some(v) => decodes(f.kind, v, f.required) == Some(false),
    });
    unknown || bad
}

/// A value serde accepts for `kind`, drawn from the interesting ones: ids that exist,
/// empty and blank strings, arbitrary Unicode, huge strings, boundary numbers.
fn well_typed(kind: Kind, ids: Vec<String>) -> BoxedStrategy<Value> {
    let text = prop_oneof![
        4 => "[a-z0-9 -]{1,12}",
        2 => proptest::sample::select(ids),
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => Just("  \n\t ".to_owned()),
        1 => "[a-z]{0,4}\u{0}[a-z]{0,4}",
        1 => (1_000usize..130_000).prop_map(|n| "y".repeat(n)),
    ];
    match kind {
        Kind::Str => text.prop_map(Value::from).boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Kind::U32 => prop_oneof![0u32..300, any::<u32>()]
            .prop_map(Value::from)
            .boxed(),
        Kind::U64 => prop_oneof![0u64..600, any::<u64>()]
            .prop_map(Value::from)
            .boxed(),
        Kind::I64 => any::<i64>().prop_map(Value::from).boxed(),
        Kind::Enum(variants) => proptest::sample::select(variants)
            .prop_map(Value::from)
            .boxed(),
        Kind::StrList => proptest::collection::vec(text, 0..40)
            .prop_map(Value::from)
            .boxed(),
    }
}

/// An argument object for `shape`: each field present or not, well-typed or anything;
/// sometimes extra keys (near-miss spellings or arbitrary).
fn arguments(shape: &'static Shape, ids: Vec<String>) -> BoxedStrategy<Map<String, Value>> {
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = shape
        .fields
        .iter()
        .map(|f| {
            let value = prop_oneof![
                6 => well_typed(f.kind, ids.clone()),
                1 => arbitrary_json(),
            ];
            let presence = if f.required { 0.92 } else { 0.6 };
            proptest::option::weighted(presence, value.prop_map(move |v| (f.name.to_owned(), v)))
                .boxed()
        })
        .collect();
    let extra_key = prop_oneof![
        Just("task_id".to_owned()),
        Just("TaskId".to_owned()),
        Just("__proto__".to_owned()),
        Just(String::new()),
        any::<String>(),
    ];
    let extras = proptest::option::weighted(
        0.12,
        proptest::collection::vec((extra_key, arbitrary_json()), 1..3),
    );
    (fields, extras)
        .prop_map(|(fields, extras)| {
            let mut args: Map<String, Value> = fields.into_iter().flatten().collect();
            for (k, v) in extras.unwrap_or_default() {
                args.entry(k).or_insert(v);
            }
            args
        })
        .boxed()
}

/// Every table but the full-text index's segment tables, by name: its row count and a
/// digest of every row, read through a connection of the test's own (the file, not the
/// store's API), so any insert, update or delete shows.
fn table_contents(store: &Store) -> BTreeMap<String, (i64, u64)> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let conn = rusqlite::Connection::open(store.path().expect("a SQLite store"))
        .expect("opening the test database");
    let read = || -> rusqlite::Result<BTreeMap<String, (i64, u64)>> {
        let mut names = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        let names = names
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        names
            .into_iter()
            // The full-text index's segment tables: the store's checkpoint thread merges
            // segments once the store has been idle for a second, which rewrites these
            // rows (not what is indexed) while a case runs. A by-hand run of 20,000
            // memory cases caught one.
            .filter(|name| !name.ends_with("_fts_data") && !name.ends_with("_fts_idx"))
            .map(|name| {
                let mut rows = conn.prepare(&format!("SELECT * FROM \"{name}\""))?;
                let columns = rows.column_count();
                let mut rows = rows.query([])?;
                let (mut count, mut digest) = (0, DefaultHasher::new());
                while let Some(row) = rows.next()? {
                    count += 1;
                    for column in 0..columns {
                        format!("{:?}", row.get_ref(column)?).hash(&mut digest);
                    }
                }
                Ok((name, (count, digest.finish())))
            })
            .collect()
    };
    read().expect("reading every table")
}

/// The tables a refused call may still write: the broker audits refusals, and a call
/// refused for want of approval leaves its (expired) approval row.
fn audit_tables(tool_error: &str) -> &'static [&'static str] {
    match tool_error {
        "invalid_args" => &["tool_call_audit"],
        _ => &["tool_call_audit", "tool_call_approvals"],
    }
}

/// One server under test: its session, its store and its tools.
struct Target {
    name: &'static str,
    session: LineSession,
    store: Arc<Store>,
    shapes: &'static [Shape],
    /// Whether refused calls still write audit rows (the tools broker).
    audited: bool,
}

/// Make `waitMs` short: a well-typed wait would park the call for up to 30 s.
fn tame(tool: &str, args: &mut Map<String, Value>) {
    if tool == "team_chat_subscribe"
        && let Some(wait) = args.get_mut("waitMs")
        && wait.as_u64().is_some_and(|ms| (2..=30_000).contains(&ms))
    {
        *wait = json!(1);
    }
}

/// Call `tool` with `args` on `target` and check the answer and the store.
fn check_call(
    target: &mut Target,
    shape: &Shape,
    args: Map<String, Value>,
) -> Result<(), TestCaseError> {
    // A NUL anywhere is refused before any backend is asked (neither stores one alike).
    let refused_by_serde =
        certainly_refused(shape, &args) || clawboo_store::normalize::nul_in_fields(&args).is_some();
    let contents_before = table_contents(&target.store);
    let answer = target.session.request(
        "tools/call",
        json!({"name": shape.tool, "arguments": Value::Object(args.clone())}),
    );
    let context = || {
        format!(
            "{} {}({})",
            target.name,
            shape.tool,
            Value::Object(args.clone())
        )
    };
    prop_assert!(
        answer.get("error").is_none(),
        "a JSON-RPC error for {}: {}",
        context(),
        answer
    );
    let result = &answer["result"];
    let text = result["content"][0]["text"].as_str();
    prop_assert!(
        text.is_some(),
        "no text block for {}: {}",
        context(),
        answer
    );
    let is_error = result["isError"] == json!(true);
    let code = result["_meta"]["error"].as_str().unwrap_or_default();
    if refused_by_serde {
        prop_assert!(
            is_error && code == "invalid_args",
            "undecodable arguments were not refused as invalid_args: {} -> {}",
            context(),
            answer
        );
    }
    if text.is_some_and(|t| t.starts_with("invalid args: ")) {
        prop_assert_eq!(code, "invalid_args", "{}", context());
    }
    if is_error {
        prop_assert!(
            !code.is_empty(),
            "a tool-error without _meta.error: {}",
            answer
        );
        let mut contents_after = table_contents(&target.store);
        let mut contents_before = contents_before;
        if target.audited {
            for table in audit_tables(code) {
                let (added, _) = contents_after.remove(*table).unwrap_or_default();
                let (before, _) = contents_before.remove(*table).unwrap_or_default();
                prop_assert!(added >= before, "a refused call deleted {table} rows");
            }
        }
        prop_assert_eq!(
            contents_after,
            contents_before,
            "a refused call changed rows: {}",
            context()
        );
    }
    Ok(())
}

fn temp_store(dir: &tempfile::TempDir) -> Arc<Store> {
    let config = StoreConfig::default().with_extension(clawboo_memory::EXTENSION);
    Arc::new(Store::open_with(&dir.path().join("clawboo.db"), config).expect("open the store"))
}

/// Ids that exist in `store` (tasks), so some calls get past decoding and reach the rules.
fn seed_board(store: &Store) -> Vec<String> {
    let parent = store
        .create_task(NewTask::titled("parent"), CreatePolicy::Uncapped)
        .expect("seed a task");
    let child = store
        .create_task(
            NewTask {
                parent_task_id: Some(parent.id.clone()),
                ..NewTask::titled("child")
            },
            CreatePolicy::Uncapped,
        )
        .expect("seed a subtask");
    vec![parent.id, child.id, "t".to_owned(), "a".to_owned()]
}

/// Run `cases` random calls against `target`.
fn fuzz(target: Target, ids: Vec<String>, cases: u32) {
    let shapes = target.shapes;
    let name = target.name;
    // The runner takes a `Fn`; the session is used by one case at a time.
    let target = RefCell::new(target);
    let strategy = proptest::sample::select((0..shapes.len()).collect::<Vec<_>>())
        .prop_flat_map(move |i| (Just(i), arguments(&shapes[i], ids.clone())));
    let mut runner = TestRunner::new(config(cases));
    let outcome = runner.run(&strategy, |(i, mut args)| {
        tame(shapes[i].tool, &mut args);
        check_call(&mut target.borrow_mut(), &shapes[i], args)
    });
    if let Err(e) = outcome {
        panic!("{name}: {e}");
    }
    let rest = target.into_inner().session.finish();
    assert!(
        rest.is_empty(),
        "unexpected output after the last answer: {rest:?}"
    );
}

#[test]
fn tasks_tools_decode_any_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = temp_store(&dir);
    let ids = seed_board(&store);
    let server = TasksServer::new(store.clone(), TasksConfig::default());
    let target = Target {
        name: "tasks",
        session: LineSession::initialized(McpServer::new(server)),
        store,
        shapes: TASKS,
        audited: false,
    };
    fuzz(target, ids, 400);
}

#[test]
fn memory_tools_decode_any_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = temp_store(&dir);
    let memory = Arc::new(Memory::new(
        store.clone(),
        Some(Arc::new(HashedEmbedder::default())),
    ));
    let server = MemoryServer::new(memory, MemoryConfig::default());
    let target = Target {
        name: "memory",
        session: LineSession::initialized(McpServer::new(server)),
        store,
        shapes: MEMORY,
        audited: false,
    };
    fuzz(target, vec!["t".to_owned(), "a".to_owned()], 300);
}

#[test]
fn teamchat_tools_decode_any_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = temp_store(&dir);
    store
        .upsert_team(Some("t"), "the team", None)
        .expect("seed a team");
    for (id, name) in [("a", "ada"), ("b", "bob")] {
        store
            .upsert_agent(&NewAgent {
                id: Some(id.to_owned()),
                name: name.to_owned(),
                team_id: Some("t".to_owned()),
                runtime: None,
            })
            .expect("seed an agent");
    }
    let unbound = TeamChatServer::new(store.clone(), Binding::default(), WaitLimit::default());
    fuzz(
        Target {
            name: "teamchat (unbound)",
            session: LineSession::initialized(McpServer::new(unbound)),
            store: store.clone(),
            shapes: &TEAMCHAT[..2],
            audited: false,
        },
        vec!["t".to_owned(), "a".to_owned(), "bob".to_owned()],
        200,
    );
    let delegate = TeamChatServer::new(
        store.clone(),
        Binding {
            team_id: Some("t".to_owned()),
            agent_id: Some("a".to_owned()),
            tenant_id: None,
            delegate: true,
        },
        WaitLimit::default(),
    );
    fuzz(
        Target {
            name: "teamchat (bound, delegate)",
            session: LineSession::initialized(McpServer::new(delegate)),
            store,
            shapes: TEAMCHAT,
            audited: false,
        },
        vec!["t".to_owned(), "bob".to_owned(), "ada".to_owned()],
        200,
    );
}

#[test]
fn tools_broker_decodes_any_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = temp_store(&dir);
    // web_search is available (a key is "set") but, like delete_path, needs an approval
    // nobody gives: such calls end as approval timeouts after 1 ms and never execute.
    let broker = BrokerConfig {
        approval_wait: Duration::from_millis(1),
        poll_interval: Duration::from_millis(1),
        env: |name| (name == "TAVILY_API_KEY").then(|| "fuzz-key".to_owned()),
        ..BrokerConfig::default()
    };
    let server = ToolsServer::new(
        store.clone(),
        ToolsConfig {
            binding: Binding::default(),
            broker,
            executor: Arc::new(Builtins {
                tavily_base_url: "http://127.0.0.1:9".to_owned(),
                ..Builtins::default()
            }),
            waits: WaitLimit::default(),
        },
    );
    let target = Target {
        name: "tools",
        session: LineSession::initialized(McpServer::new(server)),
        store,
        shapes: TOOLS,
        audited: true,
    };
    fuzz(target, vec!["/tmp/x".to_owned()], 300);
}
