//! An in-process MCP client joined to a server over an in-memory duplex pipe: used to probe
//! a server's liveness (`tools/list`) without any network.

use rmcp::service::RunningService;
use rmcp::{RoleClient, ServerHandler, ServiceExt};

/// Capacity of the in-memory pipe between client and server, in bytes.
const PIPE_BYTES: usize = 256 * 1024;

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The `initialize` handshake did not complete.
    #[error("handshake failed: {0}")]
    Connect(String),
    /// `tools/list` failed.
    #[error("tools/list failed: {0}")]
    ListTools(String),
}

/// A client connected in-process to one server. [`InMemoryClient::close`] may be called
/// any number of times; dropping the client also ends the server's session.
pub struct InMemoryClient {
    client: Option<RunningService<RoleClient, ()>>,
}

impl InMemoryClient {
    /// Start `server` on one end of a duplex pipe and complete the handshake from the other.
    pub async fn connect<S: ServerHandler>(server: S) -> Result<InMemoryClient, ProbeError> {
        let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
        tokio::spawn(async move {
            match server.serve(server_io).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!("in-process MCP server ended during handshake: {e}"),
            }
        });
        let client = ().serve(client_io).await.map_err(|e| ProbeError::Connect(e.to_string()))?;
        Ok(InMemoryClient {
            client: Some(client),
        })
    }

    /// The names of the server's tools (every page of `tools/list`).
    pub async fn tool_names(&self) -> Result<Vec<String>, ProbeError> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| ProbeError::ListTools("the client is closed".into()))?;
        let tools = client
            .list_all_tools()
            .await
            .map_err(|e| ProbeError::ListTools(e.to_string()))?;
        Ok(tools.into_iter().map(|t| t.name.into_owned()).collect())
    }

    /// End the session. Idempotent.
    pub async fn close(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.cancel().await;
        }
    }
}

/// Connect to `server` in-process, list its tools and return how many there are.
pub async fn probe_server<S: ServerHandler>(server: S) -> Result<usize, ProbeError> {
    let mut client = InMemoryClient::connect(server).await?;
    let names = client.tool_names().await;
    client.close().await;
    Ok(names?.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rmcp::model::{
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::{ErrorData, RoleServer};
    use std::sync::Arc;

    struct TwoTools;

    impl ServerHandler for TwoTools {
        fn get_info(&self) -> ServerConfig {
            let mut info = ServerConfig::default();
            info.capabilities = ServerCapabilities::builder().enable_tools().build();
            info
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema = Arc::new(serde_json::Map::from_iter([(
                "type".to_owned(),
                serde_json::Value::from("object"),
            )]));
            Ok(ListToolsResult::with_all_items(vec![
                Tool::new("a", "first", schema.clone()),
                Tool::new("b", "second", schema),
            ]))
        }
    }

    #[tokio::test]
    async fn probe_counts_tools_and_close_is_idempotent() {
        assert_eq!(probe_server(TwoTools).await.unwrap(), 2);
        let mut client = InMemoryClient::connect(TwoTools).await.unwrap();
        assert_eq!(client.tool_names().await.unwrap(), ["a", "b"]);
        client.close().await;
        client.close().await;
        assert!(client.tool_names().await.is_err());
    }
}
