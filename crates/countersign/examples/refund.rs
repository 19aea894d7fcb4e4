//! The README's 20-line example, runnable: `cargo run -p countersign --example refund`.
//!
//! It protects a refund function with the policy in `examples/refunds/countersign.yaml` and a
//! SQLite store in a temporary folder, then calls it three times: an allowed refund, a duplicate,
//! and one large enough to need a human. The store is deleted when the example ends, so the
//! example answers that approval itself (what `countersign approve` does for a store on disk)
//! and sends the identical call again, which then runs once.

use countersign::store::SqliteStore;
use countersign::{
    AnswerDecision, Control, ControlError, ExecutorError, Policy, Principal, StaticIdentity,
};

#[derive(serde::Serialize, serde::Deserialize)]
struct Refund {
    payment_id: String,
    amount: u64,
}

async fn refund_tool(refund: Refund) -> Result<String, ExecutorError> {
    // Call the payment provider here. Return ExecutorError::not_executed(..) only when the
    // refund definitely did not happen; any other error is recorded as ambiguous.
    Ok(format!(
        "refunded {} on {}",
        refund.amount, refund.payment_id
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let policy = Policy::load(&root.join("examples/refunds/countersign.yaml"))?;
    let folder = tempfile::tempdir()?;
    let store = SqliteStore::open(folder.path().join("countersign.db"))?;
    let control = Control::builder(policy, store)
        .identity(StaticIdentity::new(Principal::new("agent:support-bot")?))
        .build();
    let refund = control.protect("stripe.refund", refund_tool);
    for (payment_id, amount) in [("pi_1", 2_500), ("pi_1", 2_500), ("pi_2", 75_000)] {
        let call = Refund {
            payment_id: payment_id.into(),
            amount,
        };
        match refund.call(&call).await {
            Ok(done) => println!("{} (receipt #{})", done.value, done.receipt.seq),
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                println!("waiting for approval {request_id}");
                // With a store on disk, a person answers from any shell:
                //   countersign approve <request id> --store-url sqlite:<path> --as human:alice
                control
                    .answer(&request_id, AnswerDecision::Approve, "human:alice", None)
                    .await?;
                println!("approved by human:alice; sending the identical call again");
                let done = refund.call(&call).await?;
                println!("{} (receipt #{})", done.value, done.receipt.seq);
            }
            Err(refusal) => println!("{refusal} (may retry: {})", refusal.may_retry()),
        }
    }
    Ok(())
}
