//! Exactly one winner per task when several OS processes race to claim the same tasks.

mod common;

use std::collections::HashMap;

use clawboo_mcp::tasks::CLAIM_CONFLICT;
use common::{StdioClient, TestDb, first_text, seed_subtasks, sql_quote};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const PROCESSES: usize = 6;
const TASKS: usize = 240;

#[test]
fn racing_processes_claim_each_task_exactly_once() {
    let db = TestDb::new();
    let mut setup = StdioClient::spawn(BIN, &db, &[]);
    setup.initialize();
    let ids = seed_subtasks(&mut setup, TASKS);

    // Each process is a different agent and walks the tasks in its own order, pipelining
    // every claim at once so the processes really overlap.
    let handles: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let db = db.clone();
            let mut order = ids.clone();
            order.rotate_left(p * TASKS / PROCESSES);
            if p % 2 == 1 {
                order.reverse();
            }
            std::thread::spawn(move || {
                let agent = format!("agent-{p}");
                let mut c = StdioClient::spawn(BIN, &db, &["--agent", &agent]);
                c.initialize();
                for (n, id) in order.iter().enumerate() {
                    c.send(&json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call",
                        "params": {"name": "claim_task", "arguments": {"taskId": id, "assigneeAgentId": "ignored"}}}));
                }
                let mut outcomes = Vec::new();
                for (n, id) in order.iter().enumerate() {
                    let answer = c.recv_id(&json!(1000 + n));
                    let result = &answer["result"];
                    let won = result["isError"] != json!(true);
                    if !won {
                        assert_eq!(first_text(result), CLAIM_CONFLICT, "{result}");
                        assert_eq!(result["_meta"]["error"], "conflict");
                    }
                    outcomes.push((id.clone(), agent.clone(), won));
                }
                assert_eq!(c.close(), Some(0));
                outcomes
            })
        })
        .collect();

    let mut winners: HashMap<String, Vec<String>> = HashMap::new();
    let mut attempts = 0;
    for h in handles {
        for (id, agent, won) in h.join().unwrap() {
            attempts += 1;
            if won {
                winners.entry(id).or_default().push(agent);
            }
        }
    }
    assert_eq!(attempts, PROCESSES * TASKS);
    assert_eq!(winners.len(), TASKS, "every task has a winner");
    for (id, agents) in &winners {
        assert_eq!(agents.len(), 1, "task {id} was won by {agents:?}");
    }
    // The database agrees with what the winners were told.
    for (id, agents) in &winners {
        let row = db.query_row(&format!(
            "SELECT status, assignee_agent_id FROM tasks WHERE id = {}",
            sql_quote(id)
        ));
        assert_eq!(row[0].as_deref(), Some("in_progress"));
        assert_eq!(row[1].as_ref(), Some(&agents[0]));
    }
}
