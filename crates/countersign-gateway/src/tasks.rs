//! MCP tasks (2025-11-25, "Tasks", experimental; the 2026 `io.modelcontextprotocol/tasks`
//! extension): the gateway does not offer them, and says so consistently.
//!
//! A task-augmented `tools/call` is answered later through `tasks/get` and `tasks/result`, which
//! the gateway would have to govern as the call's outcome; it does not. So the client is never
//! told the upstream's task support: the `tasks` capability (and the extension) is removed from
//! what the upstream declares, and a tool's `execution.taskSupport: "optional"` is removed from
//! `tools/list`. The specification then makes a `task` parameter harmless: "receivers that do
//! not declare the task capability for a request type MUST process requests of that type
//! normally, ignoring any task-augmentation metadata" — the gateway runs such a call as a plain
//! one (it never forwards the parameter). A tool the upstream lists with `taskSupport:
//! "required"` cannot run as a plain call, so its listing keeps saying so and a call to it is
//! refused before anything is sent. `tasks/*` requests are refused with -32601.
//!
//! Found by a first-time user: the capability and `taskSupport` reached the client while the
//! `task` parameter did not reach the upstream, which then answered `isError` and left the
//! effect `ambiguous`.

use serde_json::{Value, json};

/// The 2026 extension's key in `capabilities.extensions`.
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Remove task support from a `capabilities` object the upstream declared.
pub(crate) fn strip_capabilities(capabilities: &mut Value) {
    if let Some(capabilities) = capabilities.as_object_mut() {
        capabilities.remove("tasks");
        if let Some(extensions) = capabilities
            .get_mut("extensions")
            .and_then(Value::as_object_mut)
        {
            extensions.remove(EXTENSION);
        }
    }
}

/// Remove `execution.taskSupport: "optional"` from each tool of a `tools/list` result (an
/// `execution` left empty goes too); `"required"` stays, since the tool cannot be called here.
pub(crate) fn strip_tools(result: &mut Value) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return;
    };
    for tool in tools {
        let Some(tool) = tool.as_object_mut() else {
            continue;
        };
        let Some(execution) = tool.get_mut("execution").and_then(Value::as_object_mut) else {
            continue;
        };
        if execution.get("taskSupport").and_then(Value::as_str) != Some("required") {
            execution.remove("taskSupport");
        }
        if execution.is_empty() {
            tool.remove("execution");
        }
    }
}

/// Does a listed tool (its `tools/list` entry) say it runs only as a task?
pub(crate) fn required(tool: &Value) -> bool {
    tool.pointer("/execution/taskSupport")
        .and_then(Value::as_str)
        == Some("required")
}

/// Is `method` one of the tasks utility's requests (`tasks/get`, `tasks/result`, `tasks/list`,
/// `tasks/cancel`)?
pub(crate) fn is_task_method(method: &str) -> bool {
    method.starts_with("tasks/")
}

/// The error for a `tasks/*` request.
pub(crate) fn method_refusal(method: &str) -> Value {
    json!({
        "code": crate::codes::METHOD_NOT_FOUND,
        "message": format!(
            "not executed: `{method}`: this gateway does not offer MCP tasks, so there is no task to ask about; call tools without `task` and each call is answered when it ends"
        ),
        "data": {"countersign": true, "reason": "tasks_unsupported", "did_run": "no", "may_retry": false},
    })
}

/// The error for a call to `tool`, which the upstream runs only as a task.
pub(crate) fn required_refusal(tool: &str, action: &str) -> Value {
    json!({
        "code": crate::codes::NOT_EXECUTED,
        "message": format!(
            "not executed: the upstream runs `{tool}` only as an MCP task (`execution.taskSupport: \"required\"`), which this gateway does not offer; nothing was sent: call the tool another way, or ask its operator for a plain-call version"
        ),
        "data": {
            "countersign": true,
            "reason": "not_executed",
            "action": action,
            "did_run": "no",
            "may_retry": false,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capability_and_the_extension_are_removed_and_nothing_else() {
        let mut capabilities = json!({
            "tools": {"listChanged": true},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
            "extensions": {EXTENSION: {}, "io.example/other": {}},
        });
        strip_capabilities(&mut capabilities);
        assert_eq!(
            capabilities,
            json!({"tools": {"listChanged": true}, "extensions": {"io.example/other": {}}})
        );
    }

    #[test]
    fn optional_task_support_is_removed_and_required_is_kept() {
        let mut result = json!({"tools": [
            {"name": "a", "execution": {"taskSupport": "optional"}},
            {"name": "b", "execution": {"taskSupport": "required"}},
            {"name": "c", "execution": {"taskSupport": "forbidden", "other": 1}},
            {"name": "d"},
        ]});
        strip_tools(&mut result);
        assert_eq!(
            result,
            json!({"tools": [
                {"name": "a"},
                {"name": "b", "execution": {"taskSupport": "required"}},
                {"name": "c", "execution": {"other": 1}},
                {"name": "d"},
            ]})
        );
        assert!(required(&result["tools"][1]));
        assert!(!required(&result["tools"][0]));
    }

    #[test]
    fn only_the_tasks_methods_are_task_methods() {
        for method in ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"] {
            assert!(is_task_method(method), "{method}");
        }
        for method in ["tools/call", "tasksget", "resources/read"] {
            assert!(!is_task_method(method), "{method}");
        }
    }
}
