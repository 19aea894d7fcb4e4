//! `subscriptions/listen` served by the gateway itself for a 2026-07-28 client when the
//! upstream speaks the handshake era: list changes the upstream announces and resource
//! subscriptions held upstream (`resources/subscribe`, once per URI however many listeners
//! name it), delivered on the listen request's stream until it is cancelled.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::modern::UpstreamInfo;
use super::{Inner, id_text};
use crate::{era, wire};

/// How long a handshake-era upstream has to answer a `resources/subscribe` the gateway sends
/// for a `subscriptions/listen`.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most resource URIs one `subscriptions/listen` may name.
const MAX_RESOURCE_SUBSCRIPTIONS: usize = 64;

/// A `subscriptions/listen` the gateway serves itself (handshake-era upstream).
#[derive(Clone, Debug)]
pub(crate) struct Listener {
    /// The listen request's id: the subscription id its notifications carry.
    pub(crate) id: Value,
    /// The list changes acknowledged (`toolsListChanged`, …).
    pub(crate) kinds: Vec<String>,
    /// The resource URIs acknowledged: the gateway holds an upstream `resources/subscribe` for
    /// each while some listener names it.
    pub(crate) resources: Vec<String>,
}

impl Inner {
    /// Serve `subscriptions/listen` for a handshake-era upstream: acknowledge the list changes
    /// the upstream announces and the `resourceSubscriptions` it accepted (`resources/subscribe`
    /// upstream, once per URI however many listeners name it, when the upstream declares
    /// `resources.subscribe`), and deliver them on this request's stream until it is
    /// cancelled.
    pub(super) async fn listen(&self, client_id: Value, message: &Value, info: &UpstreamInfo) {
        let asked = message.pointer("/params/notifications");
        let capabilities = info.init.get("capabilities");
        let mut kinds = Vec::new();
        let mut acknowledged = Map::new();
        for (field, capability) in [
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ] {
            let wanted = asked.and_then(|asked| asked.get(field)) == Some(&json!(true));
            let offered = capabilities
                .and_then(|capabilities| capabilities.get(capability))
                .and_then(|capability| capability.get("listChanged"))
                == Some(&json!(true));
            if wanted && offered {
                kinds.push(field.to_owned());
                acknowledged.insert(field.into(), json!(true));
            }
        }
        let subscribable = capabilities
            .and_then(|capabilities| capabilities.pointer("/resources/subscribe"))
            == Some(&json!(true));
        let mut asked_uris: Vec<String> = Vec::new();
        for uri in asked
            .and_then(|asked| asked.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !asked_uris.iter().any(|seen| seen == uri) {
                asked_uris.push(uri.to_owned());
            }
        }
        asked_uris.truncate(MAX_RESOURCE_SUBSCRIPTIONS);
        let mut resources = Vec::new();
        if subscribable {
            for uri in asked_uris {
                let held = self
                    .state()
                    .listeners
                    .values()
                    .any(|listener| listener.resources.contains(&uri));
                let subscribed = held
                    || self
                        .internal_request(
                            "resources/subscribe",
                            json!({"uri": uri}),
                            SUBSCRIBE_TIMEOUT,
                        )
                        .await
                        .is_ok_and(|reply| reply.get("result").is_some());
                if subscribed {
                    resources.push(uri);
                } else {
                    self.log(format_args!(
                        "subscriptions/listen: the upstream did not accept a subscription to `{uri}`: not acknowledged"
                    ));
                }
            }
        }
        if !resources.is_empty() {
            acknowledged.insert("resourceSubscriptions".into(), json!(resources));
        }
        self.state().listeners.insert(
            id_text(&client_id),
            Listener {
                id: client_id.clone(),
                kinds,
                resources,
            },
        );
        let ack = wire::notification(
            "notifications/subscriptions/acknowledged",
            json!({"_meta": {era::META_SUBSCRIPTION: client_id}, "notifications": acknowledged}),
        );
        self.to_client(ack, Some(client_id));
    }

    /// A listener ended: unsubscribe upstream from the resources no other listener names.
    pub(super) async fn forget_listener(&self, ended: Listener) {
        let orphaned: Vec<String> = {
            let state = self.state();
            ended
                .resources
                .into_iter()
                .filter(|uri| {
                    !state
                        .listeners
                        .values()
                        .any(|listener| listener.resources.contains(uri))
                })
                .collect()
        };
        for uri in orphaned {
            if let Err(detail) = self
                .internal_request(
                    "resources/unsubscribe",
                    json!({"uri": uri}),
                    SUBSCRIBE_TIMEOUT,
                )
                .await
            {
                self.log(format_args!(
                    "subscriptions/listen ended: `resources/unsubscribe` of `{uri}` failed: {detail}"
                ));
            }
        }
    }
}
