use super::*;
use proptest::prelude::*;

fn record(state: ApprovalState, expires_at: i64) -> ApprovalRecord {
    ApprovalRecord {
        id: ApprovalId::from_stored("apr_aaaaaaaaaaaaaaaaaaaa".into()),
        action_hash: ActionHash::from_stored("sha256:h1"),
        action: "refund".into(),
        arguments: canonical::to_canonical(&serde_json::json!({"order": "o1"})).unwrap(),
        principal: "agent:a".into(),
        resource: None,
        environment: "test".into(),
        effect_key: None,
        policy_hash: "sha256:p".into(),
        entry_fingerprint: "sha256:f".into(),
        state,
        created_at: Timestamp::from_millis(0),
        expires_at: Timestamp::from_millis(expires_at),
        answered_at: None,
        approver: None,
        note: None,
        consumed_at: None,
        consumed_by: None,
    }
}

fn at(millis: i64) -> Timestamp {
    Timestamp::from_millis(millis)
}

#[test]
fn answer_table() {
    use AnswerDecision::*;
    use ApprovalState::*;
    assert_eq!(
        plan_answer(&record(Pending, 100), Approve, "human:a", at(99)),
        AnswerPlan::Apply
    );
    assert_eq!(
        plan_answer(&record(Pending, 100), Approve, "human:a", at(100)),
        AnswerPlan::Expire
    );
    let answered = |state, approver: &str| ApprovalRecord {
        approver: Some(approver.to_owned()),
        ..record(state, 100)
    };
    let plan = |record: ApprovalRecord, decision, approver: &str| {
        plan_answer(&record, decision, approver, at(50))
    };
    // An identical repeat (same decision, same approver) is idempotent.
    assert_eq!(
        plan(answered(Granted, "human:a"), Approve, "human:a"),
        AnswerPlan::Repeat
    );
    assert_eq!(
        plan(answered(Denied, "human:a"), Reject, "human:a"),
        AnswerPlan::Repeat
    );
    // The same decision by someone else is not recorded: they are told who answered first.
    assert_eq!(
        plan(answered(Granted, "human:a"), Approve, "human:b"),
        AnswerPlan::AlreadyDecided { state: Granted }
    );
    assert_eq!(
        plan(answered(Granted, "human:a"), Reject, "human:a"),
        AnswerPlan::AlreadyDecided { state: Granted }
    );
    assert_eq!(
        plan(answered(Denied, "human:a"), Approve, "human:a"),
        AnswerPlan::AlreadyDecided { state: Denied }
    );
    assert_eq!(
        plan(answered(Consumed, "human:a"), Approve, "human:a"),
        AnswerPlan::AlreadyDecided { state: Consumed }
    );
    assert_eq!(
        plan_answer(&record(Expired, 100), Approve, "human:a", at(0)),
        AnswerPlan::Expired
    );
}

#[test]
fn take_table() {
    use ApprovalState::*;
    let h1 = ActionHash::from_stored("sha256:h1");
    let h2 = ActionHash::from_stored("sha256:h2");
    let consume = |state, expires, hash: &ActionHash, fingerprint, now| {
        plan_take(Some(&record(state, expires)), hash, fingerprint, at(now))
    };
    assert_eq!(
        consume(Granted, 100, &h1, "sha256:f", 99),
        TakePlan::Consume
    );
    let refuse = |refusal, mark| TakePlan::Refuse { refusal, mark };
    assert_eq!(
        consume(Granted, 100, &h2, "sha256:f", 99),
        refuse(TakeRefusal::Mismatch, None)
    );
    assert_eq!(
        consume(Granted, 100, &h1, "sha256:f", 100),
        refuse(TakeRefusal::Expired, Some(Expired))
    );
    assert_eq!(
        consume(Granted, 100, &h1, "sha256:g", 99),
        refuse(TakeRefusal::PolicyChanged, Some(Void))
    );
    assert_eq!(
        consume(Pending, 100, &h1, "sha256:f", 99),
        refuse(TakeRefusal::Pending, None)
    );
    assert_eq!(
        consume(Denied, 100, &h1, "sha256:f", 99),
        refuse(TakeRefusal::Denied, None)
    );
    assert_eq!(
        consume(Consumed, 100, &h1, "sha256:f", 99),
        refuse(TakeRefusal::Consumed, None)
    );
    assert_eq!(
        consume(Expired, 100, &h1, "sha256:f", 0),
        refuse(TakeRefusal::Expired, None)
    );
    assert_eq!(
        consume(Void, 100, &h1, "sha256:f", 0),
        refuse(TakeRefusal::PolicyChanged, None)
    );
    assert_eq!(
        plan_take(None, &h1, "sha256:f", at(0)),
        refuse(TakeRefusal::Unknown, None)
    );
}

#[test]
fn an_explicit_no_beats_an_earlier_grant_for_the_same_hash() {
    let mut granted = record(ApprovalState::Granted, 100);
    granted.id = ApprovalId::from_stored("apr_bbbbbbbbbbbbbbbbbbbb".into());
    let mut denied = record(ApprovalState::Denied, 100);
    denied.created_at = at(5);
    let (plan, marks) = plan_open(&[granted, denied.clone()], "sha256:f", at(50));
    assert_eq!(plan, OpenPlan::Denied(denied.id));
    assert!(marks.is_empty());
}

#[test]
fn open_reuses_pending_and_marks_expired_and_changed() {
    let pending = record(ApprovalState::Pending, 100);
    assert_eq!(
        plan_open(std::slice::from_ref(&pending), "sha256:f", at(50)).0,
        OpenPlan::Existing(pending.id.clone())
    );
    let (plan, marks) = plan_open(std::slice::from_ref(&pending), "sha256:f", at(100));
    assert_eq!(
        (plan, marks),
        (
            OpenPlan::Create,
            vec![(pending.id.clone(), ApprovalState::Expired)]
        )
    );
    let (plan, marks) = plan_open(std::slice::from_ref(&pending), "sha256:other", at(50));
    assert_eq!(
        (plan, marks),
        (
            OpenPlan::Create,
            vec![(pending.id.clone(), ApprovalState::Void)]
        )
    );
    // A denial stands until its request would have expired; then a fresh ask is allowed.
    let denied = record(ApprovalState::Denied, 100);
    assert_eq!(
        plan_open(std::slice::from_ref(&denied), "sha256:f", at(99)).0,
        OpenPlan::Denied(denied.id.clone())
    );
    assert_eq!(
        plan_open(std::slice::from_ref(&denied), "sha256:f", at(100)).0,
        OpenPlan::Create
    );
}

#[test]
fn parses_only_well_formed_ids() {
    assert!(ApprovalId::parse("apr_abcdefghijklmnopqrst").is_ok());
    for bad in [
        "",
        "apr_",
        "apr_ABCDEFGHIJKLMNOPQRST",
        "apr_abcdefghijklmnopqrs1",
        "xyz_abcdefghijklmnopqrst",
    ] {
        let error = ApprovalId::parse(bad).unwrap_err();
        assert!(error.contains("countersign pending"), "{error}");
    }
    let generated = ApprovalId::generate();
    assert_eq!(ApprovalId::parse(generated.as_str()), Ok(generated));
}

fn any_state() -> impl Strategy<Value = ApprovalState> {
    prop_oneof![
        Just(ApprovalState::Pending),
        Just(ApprovalState::Granted),
        Just(ApprovalState::Denied),
        Just(ApprovalState::Consumed),
        Just(ApprovalState::Expired),
        Just(ApprovalState::Void),
    ]
}

proptest! {
    /// Only a granted, unexpired request for the same hash and entry is ever consumed.
    #[test]
    fn consumption_needs_every_condition(
        state in any_state(), expires in -100i64..100, now in -100i64..100,
        same_hash in any::<bool>(), same_entry in any::<bool>(),
    ) {
        let hash = ActionHash::from_stored(if same_hash { "sha256:h1" } else { "sha256:h2" });
        let fingerprint = if same_entry { "sha256:f" } else { "sha256:g" };
        let plan = plan_take(Some(&record(state, expires)), &hash, fingerprint, at(now));
        let expected = state == ApprovalState::Granted && now < expires && same_hash && same_entry;
        prop_assert_eq!(plan == TakePlan::Consume, expected);
    }

    /// A model of the request lifecycle: after any sequence of answers at any times, at most one
    /// decision is stored and it is the first one given in time.
    #[test]
    fn first_answer_wins(answers in proptest::collection::vec((any::<bool>(), 0i64..200), 1..8)) {
        let mut current = record(ApprovalState::Pending, 100);
        let mut first: Option<ApprovalState> = None;
        for (approve, now) in answers {
            let decision = if approve { AnswerDecision::Approve } else { AnswerDecision::Reject };
            match plan_answer(&current, decision, "human:a", at(now)) {
                AnswerPlan::Apply => {
                    prop_assert!(first.is_none());
                    current.state = decision.state();
                    current.approver = Some("human:a".to_owned());
                    first = Some(current.state);
                }
                AnswerPlan::Expire => {
                    prop_assert!(first.is_none());
                    current.state = ApprovalState::Expired;
                }
                AnswerPlan::Repeat => prop_assert_eq!(Some(decision.state()), first),
                AnswerPlan::AlreadyDecided { state } => prop_assert_eq!(Some(state), first),
                AnswerPlan::Expired => prop_assert_eq!(current.state, ApprovalState::Expired),
                AnswerPlan::SelfApproval => prop_assert!(false, "human:a is not the principal"),
            }
        }
    }
}

#[test]
fn the_principal_that_asked_never_answers_in_any_state() {
    use AnswerDecision::*;
    use ApprovalState::*;
    for state in [Pending, Granted, Denied, Consumed, Expired, Void] {
        for decision in [Approve, Reject] {
            assert_eq!(
                plan_answer(&record(state, 100), decision, "agent:a", at(50)),
                AnswerPlan::SelfApproval,
                "{state:?} {decision:?}"
            );
        }
    }
    // Another identity with a similar name is a different approver.
    assert_eq!(
        plan_answer(&record(Pending, 100), Approve, "agent:a2", at(50)),
        AnswerPlan::Apply
    );
}
