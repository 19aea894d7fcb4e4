//! What the approval service does in the background besides answering (issue #17): the
//! expiry sweeper, the delivery of outbox events to webhooks, and pruning the outbox.
//!
//! Every [`Notifications::tick`] the task
//!
//! 1. expires every request past its `expires_at` ([`countersign::Store::sweep_expired`]), so
//!    the `approval.expired` event leaves at `expires_at`, not when the request is next touched;
//! 2. claims the deliveries due for its endpoints under a lease
//!    ([`countersign::Store::claim_deliveries`]; another `countersign serve` on the same store
//!    claims none of them meanwhile), POSTs each ([`crate::webhook`]) and settles it:
//!    `delivered` on a 2xx, otherwise retried with exponential backoff and jitter
//!    ([`countersign::outbox::after_failure`]) until a day has passed, then `failed`;
//! 3. once an hour, prunes delivered events older than [`Notifications::retention`].
//!
//! A delivery is sent only while its lease outlasts the attempt's timeout, so a lease never
//! lapses mid-send and two replicas never both send one. A process killed mid-send leaves the
//! delivery `pending` under a lease that lapses: it is sent again, with the same `webhook-id`,
//! by whichever replica claims it next (at least once, never lost).

use std::time::{Duration, Instant};

use countersign::Timestamp;
use countersign::outbox::{ClaimedDelivery, GIVE_UP_AFTER, Settlement, after_failure};
use countersign::store::{DeliveryClaim, Store};
use rand::Rng;

use crate::Service;
use crate::webhook::WebhookEndpoint;

/// How often outbox pruning runs.
const PRUNE_EVERY: Duration = Duration::from_secs(3_600);
/// Deliveries claimed per round.
const CLAIM_LIMIT: usize = 32;

/// What the background task does.
#[derive(Clone, Debug)]
pub struct Notifications {
    /// The webhook endpoints events are delivered to (none: events stay in the outbox and are
    /// pruned after the retention).
    pub webhooks: Vec<WebhookEndpoint>,
    /// How long one delivery attempt may take (default 10 s). A claim's lease is three times
    /// this.
    pub timeout: Duration,
    /// How often the sweeper and the dispatcher run (default 1 s).
    pub tick: Duration,
    /// How long delivered events are kept (default 7 days,
    /// [`countersign::outbox::DEFAULT_RETENTION`]).
    pub retention: Duration,
    /// Run the expiry sweeper (default true).
    pub sweep: bool,
    /// The certificate authorities an `https://` webhook's certificate must chain to (default:
    /// the system's trust store; `serve --notify-ca FILE` or a notify file's `ca_file`: only
    /// those in one PEM file). Slack has its own ([`crate::slack::SlackConfig::with_trust`]).
    pub trust: countersign_http::Trust,
}

impl Default for Notifications {
    fn default() -> Notifications {
        Notifications {
            webhooks: Vec::new(),
            timeout: Duration::from_secs(10),
            tick: Duration::from_secs(1),
            retention: countersign::outbox::DEFAULT_RETENTION,
            sweep: true,
            trust: countersign_http::Trust::system(),
        }
    }
}

impl Notifications {
    /// The lease a claim holds: long enough for one attempt, with room to settle it.
    fn lease(&self) -> Duration {
        self.timeout * 3
    }
}

/// Start the background task for `service`; it runs until aborted.
pub fn spawn(service: &Service, notifications: Notifications) -> tokio::task::JoinHandle<()> {
    let service = service.clone();
    tokio::spawn(async move { run(service, notifications).await })
}

async fn run(service: Service, notifications: Notifications) {
    let owner = countersign_owner();
    let client = match countersign_http::client(&notifications.trust) {
        Ok(client) => client,
        Err(error) => {
            countersign::stderr_line!("warning: webhooks and Slack are not delivered: {error}");
            return;
        }
    };
    let mut last_prune: Option<Instant> = None;
    let mut last_warning: Option<String> = None;
    loop {
        let result = round(&service, &notifications, &client, &owner, &mut last_prune).await;
        // One line per new trouble (a store that is down is said once, not every second).
        match result {
            Err(warning) if last_warning.as_ref() != Some(&warning) => {
                countersign::stderr_line!("warning: {warning}");
                last_warning = Some(warning);
            }
            Err(_) => {}
            Ok(()) => last_warning = None,
        }
        tokio::time::sleep(notifications.tick).await;
    }
}

/// A random name for this sender's leases.
fn countersign_owner() -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..16)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz234567"[rng.random_range(0..32)]))
        .collect();
    format!("srv_{suffix}")
}

/// One round: sweep, deliver, maybe prune.
async fn round(
    service: &Service,
    notifications: &Notifications,
    client: &reqwest::Client,
    owner: &str,
    last_prune: &mut Option<Instant>,
) -> Result<(), String> {
    let store = service
        .inner
        .store
        .get()
        .await
        .map_err(|error| format!("notifications wait for the store: {error}"))?;
    let clock = &service.inner.clock;
    if notifications.sweep {
        store
            .sweep_expired(clock.now())
            .await
            .map_err(|error| format!("the expiry sweeper could not run: {error}"))?;
    }
    if !notifications.webhooks.is_empty() || service.inner.slack.get().is_some() {
        deliver(store.as_ref(), service, notifications, client, owner)
            .await
            .map_err(|error| format!("webhook deliveries wait: {error}"))?;
    }
    if last_prune.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
        let before = Timestamp::from_millis(clock.now().as_millis().saturating_sub(
            i64::try_from(notifications.retention.as_millis()).unwrap_or(i64::MAX),
        ));
        store
            .prune_outbox(before)
            .await
            .map_err(|error| format!("pruning the outbox failed: {error}"))?;
        *last_prune = Some(Instant::now());
    }
    Ok(())
}

/// Claim what is due for the webhooks, send it, settle it.
async fn deliver(
    store: &dyn Store,
    service: &Service,
    notifications: &Notifications,
    client: &reqwest::Client,
    owner: &str,
) -> Result<(), countersign::StoreError> {
    let clock = &service.inner.clock;
    let now = clock.now();
    let mut endpoints: Vec<String> = notifications
        .webhooks
        .iter()
        .map(|endpoint| endpoint.url().to_owned())
        .collect();
    if service.inner.slack.get().is_some() {
        endpoints.push(crate::slack::ENDPOINT.to_owned());
    }
    let claim = DeliveryClaim {
        endpoints,
        since: Timestamp::from_millis(
            now.as_millis()
                .saturating_sub(i64::try_from(GIVE_UP_AFTER.as_millis()).unwrap_or(i64::MAX)),
        ),
        owner: owner.to_owned(),
        lease: notifications.lease(),
        limit: CLAIM_LIMIT,
    };
    for held in store.claim_deliveries(claim, now).await? {
        if let Some(settlement) = attempt(service, store, notifications, client, &held).await {
            store
                .settle_delivery(held.delivery.id, owner, settlement, clock.now())
                .await?;
        }
    }
    Ok(())
}

/// One attempt at one claimed delivery, or `None` when its lease would lapse before the
/// attempt could end (then it is left to lapse and is claimed again).
async fn attempt(
    service: &Service,
    store: &dyn Store,
    notifications: &Notifications,
    client: &reqwest::Client,
    held: &ClaimedDelivery,
) -> Option<Settlement> {
    let clock = &service.inner.clock;
    let started = clock.now();
    // INVARIANT (one-sender): never send what another replica may claim before we are done.
    if started.plus(notifications.timeout) >= held.lease_until {
        return None;
    }
    let timestamp = started.as_millis().div_euclid(1_000);
    let sent = if held.delivery.endpoint == crate::slack::ENDPOINT {
        tokio::time::timeout(
            notifications.timeout,
            crate::slack::deliver(service, store, held),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within {}s",
                notifications.timeout.as_secs_f64()
            ))
        })
    } else {
        // A delivery row for an endpoint no longer configured waits for it to come back.
        let endpoint = notifications
            .webhooks
            .iter()
            .find(|endpoint| endpoint.url() == held.delivery.endpoint)?;
        endpoint
            .post(
                client,
                &notifications.trust,
                &held.delivery.event_id,
                &held.body,
                timestamp,
                notifications.timeout,
            )
            .await
            .map(|()| Settlement::Delivered { reference: None })
    };
    Some(match sent {
        Ok(settlement) => settlement,
        Err(error) => after_failure(
            held.delivery.window_start,
            held.delivery.attempts.saturating_add(1),
            clock.now(),
            error,
            rand::rng().random_range(0.5..1.5),
        ),
    })
}
