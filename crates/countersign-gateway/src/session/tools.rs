//! What the gateway knows about each upstream tool, from the `tools/list` replies it relays or
//! fetches itself (issue #27): its input schema, which becomes part of the action
//! ([`countersign::ActionRequest::with_tool_schema`]), and its annotations, which may only
//! ever raise a pattern entry's `allow` to `approve` ([`countersign::policy::Raise`]).
//!
//! A tool the session has not seen listed is looked up with the gateway's own `tools/list`
//! before its call is decided; one still unknown is decided without a schema and as
//! destructive (MCP's default for a missing `destructiveHint`), so not knowing never loosens.

use std::sync::Arc;
use std::time::Duration;

use countersign::policy::Raise;
use serde_json::{Value, json};

use super::Inner;
use crate::era;

/// The most pages of the gateway's own `tools/list` it follows (`nextCursor`).
const MAX_LIST_PAGES: usize = 16;

/// How long the gateway's own `tools/list` may take, or `--call-timeout` if that is shorter: a
/// call waiting on the list is never held longer than it would wait for its own reply.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// One upstream tool as last listed.
#[derive(Clone, Debug)]
pub(crate) struct ToolInfo {
    /// Its `inputSchema`, as listed.
    pub(crate) schema: Option<Value>,
    /// Its `annotations`, as listed (`null` when it had none).
    pub(crate) annotations: Value,
    /// Does it run only as an MCP task (`execution.taskSupport: "required"`), which the gateway
    /// does not offer ([`crate::tasks`])?
    pub(crate) task_required: bool,
}

impl ToolInfo {
    /// Why to ask a human even where a pattern entry allows the call: the tool does not say it
    /// is harmless. MCP defines `destructiveHint` (default `true`) only for a tool that is not
    /// `readOnlyHint: true`; so a tool is taken as destructive unless it says `readOnlyHint:
    /// true` or `destructiveHint: false` (docs/gateway.md, "Annotations").
    pub(crate) fn raise(&self) -> Option<Raise> {
        let flag = |name: &str| self.annotations.get(name).and_then(Value::as_bool);
        let harmless = flag("readOnlyHint") == Some(true) || flag("destructiveHint") == Some(false);
        (!harmless).then_some(Raise::DestructiveHint)
    }
}

/// The tools of a `tools/list` result: name to what it says.
fn listed(result: &Value) -> Vec<(String, ToolInfo)> {
    result
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| {
            let name = tool.get("name").and_then(Value::as_str)?;
            Some((
                name.to_owned(),
                ToolInfo {
                    schema: tool.get("inputSchema").cloned(),
                    annotations: tool.get("annotations").cloned().unwrap_or(Value::Null),
                    task_required: crate::tasks::required(tool),
                },
            ))
        })
        .collect()
}

impl Inner {
    /// Learn the tools of a `tools/list` reply (before it is filtered for the client), and
    /// void the open approval requests of every tool whose input schema is not the one this
    /// gateway last saw (`tool_changed`).
    pub(super) fn learn_tools(&self, message: &Value) {
        let Some(result) = message.get("result") else {
            return;
        };
        let tools = listed(result);
        let mut changed = Vec::new();
        {
            let mut seen = self
                .shared
                .tool_schemas
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for (name, info) in &tools {
                let digest = info
                    .schema
                    .as_ref()
                    .and_then(|schema| countersign::action::tool_schema_digest(schema).ok());
                if seen.get(name) != Some(&digest) {
                    seen.insert(name.clone(), digest);
                    if let Some(schema) = &info.schema {
                        changed.push((name.clone(), schema.clone()));
                    }
                }
            }
        }
        self.state().tools.extend(tools);
        if changed.is_empty() {
            return;
        }
        let control = self.control.clone();
        let alias = self.shared.config.alias.clone();
        let log = self.shared.config.log;
        tokio::spawn(async move {
            let operator = format!("gateway:{alias}");
            for (name, schema) in changed {
                let action = format!("mcp.{alias}.{name}");
                let line = match control
                    .void_for_changed_tool(&action, &schema, &operator)
                    .await
                {
                    Ok(voided) if voided.is_empty() => continue,
                    Ok(voided) => format!(
                        "{action}: its input schema changed: voided {} open approval request(s) (tool_changed)",
                        voided.len()
                    ),
                    Err(error) => format!(
                        "{action}: its input schema changed, but its open requests could not be voided: {error}"
                    ),
                };
                if log {
                    countersign::stderr_line!(
                        "countersign-gateway[{}]: {}",
                        countersign::evidence::printable(&alias),
                        countersign::evidence::printable(&line)
                    );
                }
            }
        });
    }

    /// What the gateway knows of `tool`: from the last list relayed, else from a `tools/list`
    /// of its own; `None` when the upstream does not list it.
    pub(super) async fn tool_info(self: &Arc<Self>, tool: &str) -> Option<ToolInfo> {
        if let Some(info) = self.state().tools.get(tool).cloned() {
            return Some(info);
        }
        self.fetch_tools().await;
        self.state().tools.get(tool).cloned()
    }

    /// List the upstream's tools with the gateway's own requests, following `nextCursor`.
    async fn fetch_tools(self: &Arc<Self>) {
        let modern = match self.upstream_info.get() {
            Some(info) => info.modern,
            None => false,
        };
        let wait = LIST_TIMEOUT.min(self.shared.config.call_timeout);
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = json!({});
            if modern {
                params["_meta"] = era::own_meta();
            }
            if let Some(cursor) = cursor.take() {
                params["cursor"] = cursor;
            }
            let Ok(reply) = self.internal_request("tools/list", params, wait).await else {
                return;
            };
            self.learn_tools(&reply);
            match reply.pointer("/result/nextCursor") {
                Some(next) if next.is_string() => cursor = Some(next.clone()),
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(annotations: Value) -> ToolInfo {
        ToolInfo {
            schema: None,
            annotations,
            task_required: false,
        }
    }

    #[test]
    fn only_a_tool_that_says_it_is_harmless_is_not_raised() {
        let raised = Some(Raise::DestructiveHint);
        assert_eq!(
            info(Value::Null).raise(),
            raised,
            "no annotations: MCP's default"
        );
        assert_eq!(info(json!({})).raise(), raised);
        assert_eq!(info(json!({"destructiveHint": true})).raise(), raised);
        assert_eq!(info(json!({"readOnlyHint": false})).raise(), raised);
        assert_eq!(
            info(json!({"destructiveHint": "false"})).raise(),
            raised,
            "not a boolean"
        );
        assert_eq!(info(json!({"readOnlyHint": true})).raise(), None);
        assert_eq!(
            info(json!({"readOnlyHint": false, "destructiveHint": false})).raise(),
            None
        );
    }
}
