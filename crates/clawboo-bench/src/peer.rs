//! Echo servers for the side-by-side run: ours (this binary's `echo-server`) and the peer,
//! `@modelcontextprotocol/server-everything` from npm (installed by `npm ci` in
//! `crates/clawboo-bench/peer/`), each over stdio and over Streamable HTTP.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// The peer's entry point inside `peer_dir`.
fn peer_script(peer_dir: &Path) -> anyhow::Result<PathBuf> {
    let script =
        peer_dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !script.exists() {
        bail!(
            "the peer is not installed: run `npm ci` in {} (see docs/BENCHMARKS.md)",
            peer_dir.display()
        );
    }
    Ok(script)
}

/// The folder holding the peer's package.json (next to this crate's sources).
pub fn default_peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peer")
}

/// Our echo server over stdio.
pub fn ours_stdio() -> anyhow::Result<Command> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["echo-server", "stdio"]);
    Ok(cmd)
}

/// The peer over stdio.
pub fn peer_stdio(node: &Path, peer_dir: &Path) -> anyhow::Result<Command> {
    let mut cmd = Command::new(node);
    cmd.arg(peer_script(peer_dir)?).arg("stdio");
    Ok(cmd)
}

/// An HTTP echo server process, killed on drop.
pub struct HttpEcho {
    child: Child,
    /// The MCP endpoint.
    pub url: String,
}

impl HttpEcho {
    /// Our echo over Streamable HTTP on a free loopback port.
    pub fn ours() -> anyhow::Result<HttpEcho> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["echo-server", "http", "--bind", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start our echo server")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            bail!("echo server did not start: {line:?}");
        };
        Ok(HttpEcho {
            url: url.to_owned(),
            child,
        })
    }

    /// The peer over Streamable HTTP (`PORT=<free port>`); returns once it says it listens.
    /// Its per-request console logging goes to /dev/null.
    pub fn peer(node: &Path, peer_dir: &Path) -> anyhow::Result<HttpEcho> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new(node)
            .arg(peer_script(peer_dir)?)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start the peer (is node installed?)")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("listening on port") => break,
                Some(Ok(_)) => continue,
                _ => {
                    let _ = child.kill();
                    bail!("the peer's HTTP server did not start");
                }
            }
        }
        // Keep draining its stderr so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(HttpEcho {
            url: format!("http://127.0.0.1:{port}/mcp"),
            child,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HttpEcho {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
