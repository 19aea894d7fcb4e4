//! `serve --checkpoint-key FILE [--checkpoint-every DURATION]` (issue #23): the approval
//! service, the one process holding the log's key, signs a checkpoint of the receipt log on a
//! timer and writes each new one to the outbox as a `log.checkpoint` event, which its webhooks
//! deliver outside the store (`docs/evidence.md`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use countersign::audit::checkpoint::{LogFollower, SignLogError, publish_checkpoint};
use countersign::evidence::ChainHead;
use countersign::store::{self, Store};
use countersign::token::SigningKey;
use countersign::{Clock, SystemClock};

use crate::Failure;

/// Load the log's key for the timer, so that a wrong path fails before the service starts.
pub(super) fn load_key(path: &Path) -> Result<SigningKey, Failure> {
    SigningKey::load(path).map_err(|error| {
        Failure(format!(
            "the --checkpoint-key `{}`: {error}: make one with `countersign keygen --out FILE`",
            path.display()
        ))
    })
}

/// Start the timer: every `every`, if the log's head moved since the last checkpoint, read and
/// verify the receipts since the last tick (a [`LogFollower`] kept for the service's life: the
/// whole log only on the first tick), sign the tree and write its `log.checkpoint` event. Each new trouble is said once on standard
/// error; an empty log waits quietly.
pub(super) fn spawn(url: String, key: SigningKey, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut signed_at: Option<ChainHead> = None;
        let mut follower = LogFollower::new();
        let mut last_warning: Option<String> = None;
        let mut opened: Option<Arc<dyn Store>> = None;
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let store = match &opened {
                Some(store) => store.clone(),
                None => match store::open_url_async(&url).await {
                    Ok(store) => opened.insert(store).clone(),
                    Err(error) => {
                        let warning =
                            format!("no checkpoint was made: {error}; the next tick tries again");
                        if last_warning.as_ref() != Some(&warning) {
                            countersign::stderr_line!("warning: {warning}");
                            last_warning = Some(warning);
                        }
                        continue;
                    }
                },
            };
            match tick(store.as_ref(), &key, &mut follower, signed_at.as_ref()).await {
                Ok(Some(head)) => {
                    signed_at = Some(head);
                    last_warning = None;
                }
                Ok(None) => last_warning = None,
                Err(warning) if last_warning.as_ref() != Some(&warning) => {
                    countersign::stderr_line!("warning: {warning}");
                    last_warning = Some(warning);
                }
                Err(_) => {}
            }
        }
    })
}

/// One tick: the head it signed, `None` when there was nothing new to sign.
async fn tick(
    store: &dyn Store,
    key: &SigningKey,
    follower: &mut LogFollower,
    signed_at: Option<&ChainHead>,
) -> Result<Option<ChainHead>, String> {
    let cannot =
        |error: String| format!("no checkpoint was made: {error}; the next tick tries again");
    let head = store
        .chain_head()
        .await
        .map_err(|error| cannot(error.to_string()))?;
    let Some(head) = head else { return Ok(None) };
    if signed_at == Some(&head) {
        return Ok(None);
    }
    follower
        .catch_up(store)
        .await
        .map_err(|error| cannot(error.to_string()))?;
    let made = match follower.sign(key, None) {
        Ok(made) => made,
        Err(SignLogError::Empty) => return Ok(None),
        // Start over on the next tick: the whole log is read again, so a restored store is
        // signed once it verifies.
        Err(error @ SignLogError::Broken(_)) => {
            *follower = LogFollower::new();
            return Err(cannot(error.to_string()));
        }
        Err(error) => return Err(cannot(error.to_string())),
    };
    publish_checkpoint(store, &made, SystemClock.now())
        .await
        .map_err(|error| cannot(format!("its outbox event could not be written: {error}")))?;
    Ok(Some(head))
}
