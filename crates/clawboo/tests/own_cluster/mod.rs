//! A throwaway PostgreSQL cluster of one test's own (`scripts/pg-test-cluster.sh`), for
//! tests that take the server away (`pause`) and bring it back (`resume`).
#![allow(dead_code, clippy::unwrap_used)]

use std::process::Command;

const CLUSTER_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/pg-test-cluster.sh"
);

/// This test's own cluster, removed on drop.
pub struct Cluster {
    pub url: String,
}

impl Cluster {
    /// A fresh cluster, or `None` (after a notice) when there are no PostgreSQL binaries.
    pub fn start() -> Option<Cluster> {
        if !script(&["bindir"]).status.success() {
            eprintln!("skipped: no PostgreSQL binaries to start a cluster of this test's own");
            return None;
        }
        let out = script(&["start"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Some(Cluster { url })
    }

    pub fn run(&self, action: &str) {
        let out = script(&[action, &self.url]);
        assert!(
            out.status.success(),
            "{action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = script(&["stop", &self.url]);
    }
}

fn script(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(CLUSTER_SCRIPT)
        .args(args)
        .output()
        .expect("run the cluster script")
}
