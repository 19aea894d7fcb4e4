//! The receipt chain's status from the last verification, kept in memory so that a page view
//! never walks the chain.
//!
//! A background task started by [`crate::serve`] verifies the chain with the kernel's
//! [`Verifier`]: every [`REFRESH`] it checks only the receipts written since its last check
//! (continuing from the head it reached), and every [`FULL_WALK`] it starts again from receipt 1,
//! so an edit to an old receipt is found too. The receipts page shows the last result and when
//! it was reached; it never verifies anything itself.

use std::sync::Mutex;
use std::time::Duration;

use countersign::Timestamp;
use countersign::evidence::{ChainBreak, Verifier};
use countersign::store::Store;

use crate::Service;

/// How often the chain is checked for new receipts.
pub const REFRESH: Duration = Duration::from_secs(15);
/// How often the whole chain is verified again from its first receipt.
pub const FULL_WALK: Duration = Duration::from_secs(600);
/// Receipts read per store call while verifying.
const PAGE: usize = 2_000;

/// What the last verification found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainStatus {
    /// No verification has finished yet.
    NotYet,
    /// Intact from receipt 1 to `head_seq`.
    Intact {
        /// Receipts verified (the head's `seq`; 0 for an empty log).
        head_seq: u64,
        /// When this result was reached (the service's clock).
        verified_at: Timestamp,
    },
    /// Broken: the first break found.
    Broken {
        /// Where and how it breaks.
        first_break: ChainBreak,
        /// When this result was reached.
        verified_at: Timestamp,
    },
    /// The last attempt could not read the store; `previous` is what was known before.
    Unreadable {
        /// The store's error.
        detail: String,
        /// When the attempt failed.
        at: Timestamp,
        /// The last result before it, if any.
        previous: Option<Box<ChainStatus>>,
    },
}

/// A verifier in progress, continued by each refresh.
struct Progress {
    /// `None` once the walk found a break: nothing more is fed until the next full walk.
    verifier: Option<Verifier>,
    /// The last receipt fed (`seq`), 0 before the first.
    after: u64,
    /// When this walk started from receipt 1.
    started: Timestamp,
}

/// The cached status and the verifier that continues it.
pub struct ChainCache {
    status: Mutex<ChainStatus>,
    progress: tokio::sync::Mutex<Option<Progress>>,
}

impl Default for ChainCache {
    fn default() -> ChainCache {
        ChainCache {
            status: Mutex::new(ChainStatus::NotYet),
            progress: tokio::sync::Mutex::new(None),
        }
    }
}

impl ChainCache {
    /// The last result (cheap: a clone under a lock).
    pub fn status(&self) -> ChainStatus {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, status: ChainStatus) {
        *self
            .status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }

    /// Verify the receipts written since the last check (or the whole chain when the last full
    /// walk is older than [`FULL_WALK`], or none has been made), and keep the result.
    ///
    /// # Cancel safety
    ///
    /// Read-only on the store; a dropped call leaves the last result in place.
    pub async fn refresh(&self, store: &dyn Store, now: Timestamp) {
        let mut progress = self.progress.lock().await;
        let stale = progress.as_ref().is_none_or(|current| {
            now.as_millis() - current.started.as_millis()
                >= i64::try_from(FULL_WALK.as_millis()).unwrap_or(i64::MAX)
        });
        if stale {
            *progress = Some(Progress {
                verifier: Some(Verifier::new().keeping_lanes(store.lanes())),
                after: 0,
                started: now,
            });
        }
        let Some(current) = progress.as_mut() else {
            return;
        };
        let Some(verifier) = current.verifier.as_mut() else {
            return;
        };
        loop {
            let page = match store.receipts(current.after, PAGE).await {
                Ok(page) => page,
                Err(error) => {
                    let previous = match self.status() {
                        ChainStatus::NotYet => None,
                        ChainStatus::Unreadable { previous, .. } => previous,
                        known => Some(Box::new(known)),
                    };
                    self.set(ChainStatus::Unreadable {
                        detail: error.to_string(),
                        at: now,
                        previous,
                    });
                    // Start again from receipt 1 next time: the store may have changed.
                    *progress = None;
                    return;
                }
            };
            for receipt in &page {
                verifier.feed(receipt, None);
                if verifier.is_broken() {
                    break;
                }
                current.after = receipt.position;
            }
            if verifier.is_broken() {
                if let Some(finished) = current.verifier.take()
                    && let Some(first_break) = finished.finish(None).first_break
                {
                    self.set(ChainStatus::Broken {
                        first_break,
                        verified_at: now,
                    });
                }
                return;
            }
            if page.len() < PAGE {
                break;
            }
        }
        self.set(ChainStatus::Intact {
            head_seq: current.after,
            verified_at: now,
        });
    }
}

/// Keep verifying the chain of `service`'s store until the service stops.
pub(crate) async fn keep_verifying(service: Service) {
    let mut ticker = tokio::time::interval(REFRESH);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        service.verify_chain_now().await;
    }
}

impl Service {
    /// Verify the receipts written since the last check now (the background task does this
    /// every [`REFRESH`]); the receipts page shows the result.
    ///
    /// # Cancel safety
    ///
    /// Read-only on the store.
    pub async fn verify_chain_now(&self) {
        let Ok(store) = self.inner.store.get().await else {
            return;
        };
        let now = self.inner.clock.now();
        self.inner.chain.refresh(store.as_ref(), now).await;
    }

    /// The chain's status from the last verification.
    pub fn chain_status(&self) -> ChainStatus {
        self.inner.chain.status()
    }
}

/// Start the background verification for `service` (called by [`crate::serve`]).
pub(crate) fn spawn(service: &Service) -> tokio::task::JoinHandle<()> {
    tokio::spawn(keep_verifying(service.clone()))
}
