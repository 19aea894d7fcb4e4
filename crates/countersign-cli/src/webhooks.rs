//! `countersign webhooks`: the outbox's deliveries (issue #17), and sending one again.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use countersign::outbox::{Delivery, DeliveryState};
use countersign::{Clock, SystemClock};
use serde_json::json;

use crate::commands::write_json;
use crate::render::{self, Table};
use crate::store_access::open_existing;
use crate::{Failure, Global};

/// Arguments of `webhooks`.
#[derive(Debug, Args)]
pub struct WebhooksArgs {
    /// Only deliveries in this state.
    #[arg(long, value_name = "STATE", value_parser = ["pending", "delivered", "failed"])]
    state: Option<String>,
    /// At most this many, newest first.
    #[arg(long, value_name = "N", default_value_t = 50)]
    last: usize,
    /// Send delivery ID again (the same event, the same `webhook-id`): it is due at once, with
    /// a new day of retries. `countersign serve` sends it.
    #[arg(long, value_name = "ID", conflicts_with_all = ["state", "last"])]
    redeliver: Option<u64>,
}

/// One delivery as `--json` prints it (documented in docs/approvals.md).
fn delivery_json(delivery: &Delivery) -> serde_json::Value {
    json!({
        "id": delivery.id,
        "event_id": delivery.event_id,
        "type": delivery.kind.as_str(),
        "request_id": delivery.request_id.as_ref().map(|id| id.as_str()),
        "endpoint": delivery.endpoint,
        "state": delivery.state.as_str(),
        "attempts": delivery.attempts,
        "next_attempt_at": delivery.next_attempt_at,
        "last_error": delivery.last_error,
        "delivered_at": delivery.delivered_at,
        "event_at": delivery.event_at,
    })
}

/// What a delivery's event is about: its request, or `the log` (a `log.checkpoint`).
fn subject(delivery: &Delivery) -> String {
    delivery
        .request_id
        .as_ref()
        .map_or_else(|| "the log".to_owned(), ToString::to_string)
}

/// `countersign webhooks`.
pub async fn webhooks(
    global: &Global,
    args: &WebhooksArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    if let Some(id) = args.redeliver {
        let Some(delivery) = store.redeliver(id, SystemClock.now()).await? else {
            return Err(Failure(format!(
                "there is no delivery {id}: list them with `countersign webhooks`"
            )));
        };
        if global.json {
            write_json(out, &delivery_json(&delivery))?;
        } else {
            writeln!(
                out,
                "delivery {id} ({} of {} to {}) is due again; `countersign serve` sends it with the same webhook-id",
                delivery.kind,
                subject(&delivery),
                delivery.endpoint
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let state = args.state.as_deref().and_then(DeliveryState::parse);
    let deliveries = store.deliveries(state, args.last).await?;
    if global.json {
        let list: Vec<serde_json::Value> = deliveries.iter().map(delivery_json).collect();
        write_json(out, &list)?;
    } else if deliveries.is_empty() {
        writeln!(
            out,
            "no deliveries: `countersign serve --webhook URL --webhook-secret-file FILE` delivers each event of the outbox"
        )?;
    } else {
        let mut table = Table::new([
            "ID",
            "STATE",
            "ATTEMPTS",
            "EVENT",
            "REQUEST",
            "ENDPOINT",
            "WHEN",
            "LAST ERROR",
        ]);
        for delivery in &deliveries {
            let when = match delivery.state {
                DeliveryState::Delivered => delivery
                    .delivered_at
                    .map(|at| at.to_string())
                    .unwrap_or_default(),
                DeliveryState::Pending => format!("next {}", delivery.next_attempt_at),
                DeliveryState::Failed => String::new(),
            };
            table.row([
                delivery.id.to_string(),
                delivery.state.to_string(),
                delivery.attempts.to_string(),
                delivery.kind.to_string(),
                subject(delivery),
                delivery.endpoint.clone(),
                when,
                render::truncate(delivery.last_error.as_deref().unwrap_or(""), 40),
            ]);
        }
        table.write(out)?;
        if deliveries
            .iter()
            .any(|delivery| delivery.state == DeliveryState::Failed)
        {
            writeln!(
                out,
                "\nfailed deliveries were retried for a day: fix the receiver, then `countersign webhooks --redeliver ID`"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
