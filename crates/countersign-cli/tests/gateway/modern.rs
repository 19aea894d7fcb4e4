//! MCP 2026-07-28 end to end: the pinned rmcp client in its `server/discover` lifecycle (no
//! `initialize`, every request carrying its own `_meta`) through `countersign gateway` to the
//! real `@modelcontextprotocol/server-filesystem`, which speaks only the handshake revisions:
//! the gateway performs the handshake upstream itself.

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::support::{BIN, World};

async fn connect_modern(args: &[String]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(BIN);
    command.args(args);
    let transport = TokioChildProcess::new(command).expect("spawn");
    ().serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("server/discover through the gateway")
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> Result<Value, rmcp::ErrorData> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    match client.call_tool(params).await {
        Ok(result) => Ok(serde_json::to_value(result).expect("result as JSON")),
        Err(rmcp::service::ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("transport error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_client_reads_and_writes_once_through_the_gateway_over_server_filesystem() {
    let world = World::new();
    let gateway = connect_modern(&world.gateway_args()).await;
    let names: Vec<String> = gateway
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert!(
        names.iter().any(|name| name == "read_text_file"),
        "{names:?}"
    );
    assert!(!names.iter().any(|name| name == "move_file"), "{names:?}");

    let a = world.data.join("a.txt").display().to_string();
    let read = call(&gateway, "read_text_file", json!({"path": a}))
        .await
        .expect("read");
    assert!(read["content"].to_string().contains("hello"), "{read}");
    assert_eq!(
        read["_meta"]["countersign"]["receipt"]["outcome"],
        "committed"
    );

    // Without elicitation, approval is out of band, as for the handshake revisions.
    let b = world.data.join("b.txt");
    let write = json!({"path": b.display().to_string(), "content": "written once"});
    let paused = call(&gateway, "write_file", write.clone())
        .await
        .expect_err("paused");
    assert_eq!(paused.code.0, -32090, "{paused:?}");
    let request_id = paused
        .data
        .as_ref()
        .and_then(|data| data["request_id"].as_str())
        .expect("request id")
        .to_owned();
    assert!(!b.exists());
    let (approved, _, stderr) = world.cli(&["approve", &request_id, "--as", "human:tester"]);
    assert!(approved, "{stderr}");
    let done = call(&gateway, "write_file", write.clone())
        .await
        .expect("approved write");
    assert_eq!(
        done["_meta"]["countersign"]["receipt"]["outcome"],
        "committed"
    );
    assert_eq!(std::fs::read_to_string(&b).expect("b.txt"), "written once");
    let again = call(&gateway, "write_file", write)
        .await
        .expect_err("duplicate");
    assert_eq!(again.code.0, -32095, "{again:?}");
    gateway.cancel().await.expect("close");
    let (verified, stdout, stderr) = world.cli(&["receipts", "--verify"]);
    assert!(verified, "{stdout}{stderr}");
}
