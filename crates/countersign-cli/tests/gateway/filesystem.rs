//! The filesystem example end to end, driven by the rmcp client.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::support::{BIN, World, filesystem_server};

async fn connect(program: &str, args: &[String]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    let transport = TokioChildProcess::new(command).expect("spawn");
    ().serve(transport).await.expect("initialize")
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
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("transport error: {other}"),
    }
}

fn reason(error: &rmcp::ErrorData) -> String {
    error
        .data
        .as_ref()
        .and_then(|data| data.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_read_passes_write_pauses_until_approved_once_and_move_is_denied() {
    let world = World::new();
    let gateway = connect(BIN, &world.gateway_args()).await;
    let direct = connect(
        "node",
        &[
            filesystem_server().display().to_string(),
            world.data.display().to_string(),
        ],
    )
    .await;

    // tools/list hides what the policy can never permit.
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
    assert!(names.iter().any(|name| name == "write_file"), "{names:?}");
    assert!(!names.iter().any(|name| name == "move_file"), "{names:?}");

    // A read passes through unchanged (apart from the receipt in _meta).
    let a = world.data.join("a.txt").display().to_string();
    let through = call(&gateway, "read_text_file", json!({"path": a}))
        .await
        .expect("read");
    let plain = call(&direct, "read_text_file", json!({"path": a}))
        .await
        .expect("read direct");
    assert_eq!(through["content"], plain["content"]);
    assert_eq!(through["structuredContent"], plain["structuredContent"]);
    assert_eq!(
        through["_meta"]["countersign"]["receipt"]["outcome"],
        "committed"
    );

    // A write pauses for approval; nothing is written.
    let b = world.data.join("b.txt");
    let write = json!({"path": b.display().to_string(), "content": "written once"});
    let paused = call(&gateway, "write_file", write.clone())
        .await
        .expect_err("paused");
    assert_eq!(paused.code.0, -32090, "{paused:?}");
    assert!(
        paused.message.contains("countersign approve apr_"),
        "{}",
        paused.message
    );
    assert!(!b.exists());
    let request_id = paused
        .data
        .as_ref()
        .and_then(|data| data["request_id"].as_str())
        .expect("request id")
        .to_owned();

    // A human approves with the real CLI, running the command the refusal suggests exactly as
    // shown, from another folder (found by a first-time user: its relative paths worked only
    // from the gateway's own folder); the message quotes the same command.
    let approve_with = paused
        .data
        .as_ref()
        .and_then(|data| data["approve_with"].as_str())
        .expect("approve_with")
        .to_owned();
    assert!(
        paused.message.contains(&format!("`{approve_with}`")),
        "{}: {approve_with}",
        paused.message
    );
    let words = shlex::split(&approve_with).expect("a shell command line");
    assert_eq!(words[..3], ["countersign", "approve", request_id.as_str()]);
    let approved = std::process::Command::new(BIN)
        .args(&words[1..])
        .args(["--as", "human:tester"])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run the suggested command");
    assert!(
        approved.status.success(),
        "{approve_with}: {}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let done = call(&gateway, "write_file", write.clone())
        .await
        .expect("approved write");
    assert_eq!(
        done["_meta"]["countersign"]["receipt"]["effect_key"],
        json!(format!("write:{}", b.display()))
    );
    assert_eq!(std::fs::read_to_string(&b).expect("b.txt"), "written once");

    // A third identical call is a duplicate and never reaches the upstream.
    std::fs::write(&b, "changed by someone else").expect("overwrite");
    let again = call(&gateway, "write_file", write)
        .await
        .expect_err("duplicate");
    assert_eq!(
        (again.code.0, reason(&again).as_str()),
        (-32095, "duplicate"),
        "{again:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&b).expect("b.txt"),
        "changed by someone else"
    );

    // A move is denied and the file system is untouched.
    let c = world.data.join("c.txt");
    let moved = call(
        &gateway,
        "move_file",
        json!({"source": a, "destination": c.display().to_string()}),
    )
    .await
    .expect_err("denied");
    assert_eq!(moved.code.0, -32094, "{moved:?}");
    assert!(world.data.join("a.txt").exists() && !c.exists());

    gateway.cancel().await.expect("close gateway");
    direct.cancel().await.expect("close direct");

    // The receipts verify.
    let (verified, stdout, stderr) = world.cli(&["receipts", "--verify"]);
    assert!(verified, "{stdout}{stderr}");
    let (_, effects, _) = world.cli(&["--json", "effects"]);
    let effects: Value = serde_json::from_str(&effects).expect("effects JSON");
    let committed: Vec<&Value> = effects
        .as_array()
        .expect("a list")
        .iter()
        .filter(|effect| effect["state"] == "committed")
        .collect();
    assert_eq!(committed.len(), 1, "{effects}");
}
