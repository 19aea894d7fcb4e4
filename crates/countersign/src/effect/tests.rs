use super::*;
use proptest::prelude::*;

fn record(state: EffectState, lease_until: i64) -> EffectRecord {
    EffectRecord {
        key: EffectKey::new("k").unwrap(),
        state,
        action_hash: crate::id::ActionHash::from_stored("sha256:00".to_owned()),
        attempt_id: crate::id::AttemptId::from_stored("att_1".to_owned()),
        attempts: 1,
        lease_until: Timestamp::from_millis(lease_until),
        updated_at: Timestamp::from_millis(0),
        resolved_by: None,
        detail: None,
        attempt: None,
    }
}

fn check(state: Option<(EffectState, i64)>, now: i64, expected: RetryDecision) {
    let current = state.map(|(state, lease)| record(state, lease));
    assert_eq!(
        retry_decision(current.as_ref(), Timestamp::from_millis(now)),
        expected,
        "state {state:?} at {now}"
    );
}

#[test]
fn retry_table() {
    use EffectState::*;
    check(None, 0, RetryDecision::Reserve);
    check(Some((Failed, 0)), 10, RetryDecision::Reserve);
    check(Some((Reserved, 100)), 99, RetryDecision::InProgress);
    check(Some((Reserved, 100)), 100, RetryDecision::LeaseExpired);
    check(Some((Reserved, 100)), 5_000, RetryDecision::LeaseExpired);
    check(Some((Committed, 100)), 50, RetryDecision::Committed);
    check(Some((Ambiguous, 100)), 50, RetryDecision::Ambiguous);
}

#[test]
fn resolves_only_from_ambiguous_or_lapsed_lease() {
    use EffectState::*;
    let now = Timestamp::from_millis(50);
    assert_eq!(
        resolution_allowed(&record(Ambiguous, 0), Committed, now),
        Ok(())
    );
    assert_eq!(
        resolution_allowed(&record(Ambiguous, 0), Failed, now),
        Ok(())
    );
    assert_eq!(
        resolution_allowed(&record(Reserved, 10), Failed, now),
        Ok(())
    );
    assert_eq!(
        resolution_allowed(&record(Reserved, 100), Failed, now),
        Err(ResolveRefusal::NotAmbiguous { state: Reserved })
    );
    assert_eq!(
        resolution_allowed(&record(Committed, 0), Failed, now),
        Err(ResolveRefusal::NotAmbiguous { state: Committed })
    );
    assert_eq!(
        resolution_allowed(&record(Ambiguous, 0), Ambiguous, now),
        Err(ResolveRefusal::BadTarget { to: Ambiguous })
    );
}

#[test]
fn refuses_empty_and_oversized_keys() {
    assert_eq!(EffectKey::new(""), Err(EffectKeyError::Empty));
    assert_eq!(
        EffectKey::new("x".repeat(513)),
        Err(EffectKeyError::TooLong { length: 513 })
    );
    assert!(EffectKey::new("x".repeat(512)).is_ok());
    // A NUL, which PostgreSQL cannot store, is refused on every store alike; the six
    // characters `\u{0}` are an ordinary key.
    assert_eq!(
        EffectKey::new("job:a\u{0}b"),
        Err(EffectKeyError::HoldsNul { at: 5 })
    );
    assert!(EffectKey::new("job:a\\u{0}b").is_ok());
}

fn any_state() -> impl Strategy<Value = EffectState> {
    prop_oneof![
        Just(EffectState::Reserved),
        Just(EffectState::Committed),
        Just(EffectState::Failed),
        Just(EffectState::Ambiguous),
    ]
}

proptest! {
    /// Only "no record" and "failed" ever let a new attempt reserve: an effect that may have
    /// happened is never handed to a second executor, whatever the clock says.
    #[test]
    fn only_definite_non_execution_permits_a_reservation(
        state in any_state(), lease in -1_000i64..1_000, now in -1_000i64..1_000,
    ) {
        let decision = retry_decision(Some(&record(state, lease)), Timestamp::from_millis(now));
        prop_assert_eq!(decision == RetryDecision::Reserve, state == EffectState::Failed);
    }

    /// Time moving forward never turns a refusal into permission.
    #[test]
    fn later_time_never_unlocks(
        state in any_state(), lease in -1_000i64..1_000, now in -1_000i64..1_000, step in 0i64..10_000,
    ) {
        let current = record(state, lease);
        let before = retry_decision(Some(&current), Timestamp::from_millis(now));
        let after = retry_decision(Some(&current), Timestamp::from_millis(now + step));
        if before != RetryDecision::Reserve {
            prop_assert_ne!(after, RetryDecision::Reserve);
        }
    }
}

/// B23: four executor fakes for the same key. Only a definite non-execution permits a retry.
#[test]
fn http_failures_are_definite_only_when_nothing_could_have_happened() {
    let definite = |error: ExecutorError| matches!(error, ExecutorError::NotExecuted(_));
    // (a) connection refused before any byte is sent
    assert!(definite(classify_http_failure(false, None, false, false)));
    // (b) 400 validation error: definite (the documented choice)
    assert!(definite(classify_http_failure(
        true,
        Some(400),
        false,
        false
    )));
    // (c) 504, or a read timeout after the request was fully written
    assert!(!definite(classify_http_failure(
        true,
        Some(504),
        false,
        false
    )));
    assert!(!definite(classify_http_failure(true, None, false, false)));
    // (d) 503 with a "not processed" marker: definite only when the marker is trusted
    assert!(definite(classify_http_failure(true, Some(503), true, true)));
    assert!(!definite(classify_http_failure(
        true,
        Some(503),
        true,
        false
    )));
    // Rate limits and request timeouts may have been processed.
    assert!(!definite(classify_http_failure(
        true,
        Some(429),
        false,
        false
    )));
    assert!(!definite(classify_http_failure(
        true,
        Some(408),
        false,
        false
    )));
}

/// Issue #19: what an executor kept comes back with its error, classified as the error it
/// wraps; never through a side channel.
#[test]
fn evidence_travels_with_the_executor_error() {
    let not_run = ExecutorError::not_executed("refused upstream")
        .with_evidence(serde_json::json!({"upstream": {"code": 400}}));
    assert_eq!(not_run.not_executed_reason(), Some("refused upstream"));
    assert_eq!(not_run.to_string(), "not executed: refused upstream");
    let maybe = ExecutorError::may_have_run("cut connection")
        .with_evidence(serde_json::json!("inner"))
        .with_evidence(serde_json::json!("outer"));
    assert_eq!(maybe.not_executed_reason(), None);
    match maybe.into_parts() {
        (BareExecutorError::MayHaveRun(error), Some(evidence)) => {
            assert_eq!(error.to_string(), "cut connection");
            assert_eq!(evidence, serde_json::json!("outer"));
        }
        _ => panic!("expected may-have-run with the outer evidence"),
    }
}

#[tokio::test]
async fn a_refusal_hands_back_the_executors_evidence() {
    use crate::control::{ActionRequest, Control, StaticIdentity};
    use crate::error::ControlError;
    use crate::store::MemoryStore;
    use crate::{Policy, Principal};

    let policy = Policy::from_yaml_str(
        "schema: countersign.policy/v1\nactions:\n  send:\n    effect: \"send:{to}\"\n    decision: allow\n",
        None,
    )
    .expect("policy");
    let control = Control::builder(policy, MemoryStore::new())
        .identity(StaticIdentity::new(
            Principal::new("agent:a").expect("principal"),
        ))
        .build();
    let not_run = control
        .execute(
            ActionRequest::new("send", &serde_json::json!({"to": "a"})),
            |_| async {
                Err::<(), _>(
                    ExecutorError::not_executed("rejected")
                        .with_evidence(serde_json::json!({"status": 422})),
                )
            },
        )
        .await;
    match not_run {
        Err(ControlError::NotExecuted { evidence, .. }) => {
            assert_eq!(evidence, Some(serde_json::json!({"status": 422})));
        }
        other => panic!("expected not_executed, got {other:?}"),
    }
    let unknown = control
        .execute(
            ActionRequest::new("send", &serde_json::json!({"to": "b"})),
            |_| async {
                Err::<(), _>(
                    ExecutorError::may_have_run("timeout").with_evidence(serde_json::json!("raw")),
                )
            },
        )
        .await;
    match unknown {
        Err(ControlError::OutcomeUnknown { evidence, .. }) => {
            assert_eq!(evidence, Some(serde_json::json!("raw")));
        }
        other => panic!("expected outcome_unknown, got {other:?}"),
    }
}
