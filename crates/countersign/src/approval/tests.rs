use super::*;
use proptest::prelude::*;

fn record(state: ApprovalState, expires_at: i64) -> ApprovalRecord {
    ApprovalRecord {
        id: ApprovalId::from_stored("apr_aaaaaaaaaaaaaaaaaaaa".into()),
        action_hash: ActionHash::from_stored("sha256:h1".into()),
        action: "refund".into(),
        arguments: canonical::to_canonical(&serde_json::json!({"order": "o1"})).unwrap(),
        principal: crate::id::Principal::from_stored("agent:a".to_owned()),
        resource: None,
        environment: "test".into(),
        effect_key: None,
        policy_hash: crate::id::PolicyHash::from_stored("sha256:p".to_owned()),
        entry_fingerprint: "sha256:f".into(),
        state,
        created_at: Timestamp::from_millis(0),
        expires_at: Timestamp::from_millis(expires_at),
        answered_at: None,
        approver: None,
        note: None,
        consumed_at: None,
        consumed_by: None,
        run: None,
        rule: ApprovalRule::default(),
        answers: Vec::new(),
    }
}

/// `record` with these answers already counted (each by `human:<name>`, at time 0).
fn with_answers(state: ApprovalState, answers: &[(&str, AnswerDecision)]) -> ApprovalRecord {
    let mut record = record(state, 100);
    record.answers = answers
        .iter()
        .map(|(name, decision)| RecordedAnswer {
            approver: Approver {
                id: ApproverId::from_stored(format!("human:{name}")),
                groups: Vec::new(),
                channel: Channel::Cli,
                authentication: crate::approver::Authentication::Asserted,
            },
            decision: *decision,
            answered_at: at(0),
            note: None,
            hash_confirmed: false,
        })
        .collect();
    record.approver = answers.last().map(|(name, _)| format!("human:{name}"));
    record
}

fn at(millis: i64) -> Timestamp {
    Timestamp::from_millis(millis)
}

#[test]
fn answer_table() {
    use AnswerDecision::*;
    use ApprovalState::*;
    let granted = AnswerPlan::Decide { to: Granted };
    assert_eq!(
        plan_answer(&record(Pending, 100), Approve, "human:a", at(99)),
        granted
    );
    assert_eq!(
        plan_answer(&record(Pending, 100), Deny, "human:a", at(99)),
        AnswerPlan::Decide { to: Denied }
    );
    assert_eq!(
        plan_answer(&record(Pending, 100), Approve, "human:a", at(100)),
        AnswerPlan::Expire
    );
    let plan = |record: ApprovalRecord, decision, approver: &str| {
        plan_answer(&record, decision, approver, at(50))
    };
    // An identical repeat (same decision, same approver) is idempotent.
    assert_eq!(
        plan(with_answers(Granted, &[("a", Approve)]), Approve, "human:a"),
        AnswerPlan::Repeat
    );
    assert_eq!(
        plan(with_answers(Denied, &[("a", Deny)]), Deny, "human:a"),
        AnswerPlan::Repeat
    );
    // The same decision by someone else is not recorded: they are told who answered first.
    assert_eq!(
        plan(with_answers(Granted, &[("a", Approve)]), Approve, "human:b"),
        AnswerPlan::AlreadyDecided { state: Granted }
    );
    assert_eq!(
        plan(with_answers(Granted, &[("a", Approve)]), Deny, "human:a"),
        AnswerPlan::AlreadyDecided { state: Granted }
    );
    assert_eq!(
        plan(with_answers(Denied, &[("a", Deny)]), Approve, "human:a"),
        AnswerPlan::AlreadyDecided { state: Denied }
    );
    assert_eq!(
        plan(
            with_answers(Consumed, &[("a", Approve)]),
            Approve,
            "human:b"
        ),
        AnswerPlan::AlreadyDecided { state: Consumed }
    );
    assert_eq!(
        plan_answer(&record(Expired, 100), Approve, "human:a", at(0)),
        AnswerPlan::Expired
    );
}

#[test]
fn a_quorum_of_two_needs_two_distinct_approvers() {
    use AnswerDecision::*;
    use ApprovalState::*;
    let mut pending = record(Pending, 100);
    pending.rule.quorum = 2;
    assert_eq!(
        plan_answer(&pending, Approve, "human:a", at(1)),
        AnswerPlan::Count {
            given: 1,
            needed: 2
        }
    );
    let mut one = with_answers(Pending, &[("a", Approve)]);
    one.rule.quorum = 2;
    // The same approver twice is one approval (an idempotent repeat), never the second.
    assert_eq!(
        plan_answer(&one, Approve, "human:a", at(1)),
        AnswerPlan::Repeat
    );
    // In another ASCII case it is still the same person (found by a first-time user:
    // `human:alice` and `human:ALICE` granted a quorum of two).
    assert_eq!(
        plan_answer(&one, Approve, "HUMAN:A", at(1)),
        AnswerPlan::Repeat
    );
    // A different decision by the same approver is refused.
    assert_eq!(
        plan_answer(&one, Deny, "human:a", at(1)),
        AnswerPlan::AlreadyDecided { state: Pending }
    );
    assert_eq!(
        plan_answer(&one, Approve, "human:b", at(1)),
        AnswerPlan::Decide { to: Granted }
    );
    // One no from anyone else denies it, whatever was counted.
    assert_eq!(
        plan_answer(&one, Deny, "human:c", at(1)),
        AnswerPlan::Decide { to: Denied }
    );
}

#[test]
fn take_table() {
    use ApprovalState::*;
    let h1 = ActionHash::from_stored("sha256:h1".into());
    let h2 = ActionHash::from_stored("sha256:h2".into());
    let consume = |state, expires, hash: &ActionHash, fingerprint, now| {
        plan_take(
            Some(&record(state, expires)),
            hash,
            fingerprint,
            None,
            at(now),
        )
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
        plan_take(None, &h1, "sha256:f", None, at(0)),
        refuse(TakeRefusal::Unknown, None)
    );
}

#[test]
fn an_explicit_no_beats_an_earlier_grant_for_the_same_hash() {
    let mut granted = record(ApprovalState::Granted, 100);
    granted.id = ApprovalId::from_stored("apr_bbbbbbbbbbbbbbbbbbbb".into());
    let mut denied = record(ApprovalState::Denied, 100);
    denied.created_at = at(5);
    let (plan, marks) = plan_open(&[granted, denied.clone()], "sha256:f", None, true, at(50));
    assert_eq!(plan, OpenPlan::Denied(denied.id));
    assert!(marks.is_empty());
}

#[test]
fn open_reuses_pending_and_marks_expired_and_changed() {
    let pending = record(ApprovalState::Pending, 100);
    assert_eq!(
        plan_open(
            std::slice::from_ref(&pending),
            "sha256:f",
            None,
            true,
            at(50)
        )
        .0,
        OpenPlan::Existing(pending.id.clone())
    );
    let (plan, marks) = plan_open(
        std::slice::from_ref(&pending),
        "sha256:f",
        None,
        true,
        at(100),
    );
    assert_eq!(
        (plan, marks),
        (
            OpenPlan::Create,
            vec![(pending.id.clone(), ApprovalState::Expired)]
        )
    );
    let (plan, marks) = plan_open(
        std::slice::from_ref(&pending),
        "sha256:other",
        None,
        true,
        at(50),
    );
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
        plan_open(
            std::slice::from_ref(&denied),
            "sha256:f",
            None,
            true,
            at(99)
        )
        .0,
        OpenPlan::Denied(denied.id.clone())
    );
    assert_eq!(
        plan_open(
            std::slice::from_ref(&denied),
            "sha256:f",
            None,
            true,
            at(100)
        )
        .0,
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
        assert!(error.to_string().contains("countersign pending"), "{error}");
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
        Just(ApprovalState::Revoked),
        Just(ApprovalState::Cancelled),
    ]
}

proptest! {
    /// Only a granted, unexpired request for the same hash and entry is ever consumed.
    #[test]
    fn consumption_needs_every_condition(
        state in any_state(), expires in -100i64..100, now in -100i64..100,
        same_hash in any::<bool>(), same_entry in any::<bool>(),
    ) {
        let hash = ActionHash::from_stored(if same_hash { "sha256:h1" } else { "sha256:h2" }.to_owned());
        let fingerprint = if same_entry { "sha256:f" } else { "sha256:g" };
        let plan = plan_take(Some(&record(state, expires)), &hash, fingerprint, None, at(now));
        let expected = state == ApprovalState::Granted && now < expires && same_hash && same_entry;
        prop_assert_eq!(plan == TakePlan::Consume, expected);
    }

    /// A model of the request lifecycle with a quorum: after any sequence of answers by any
    /// approvers at any times, the request is granted exactly when `quorum` distinct approvers
    /// said yes before any no and before expiry; denied exactly when a no came first; and once
    /// decided it never changes.
    #[test]
    fn the_first_decisive_answer_wins(
        quorum in 1u32..4,
        answers in proptest::collection::vec((0usize..4, any::<bool>(), 0i64..200), 1..12),
    ) {
        let mut current = record(ApprovalState::Pending, 100);
        current.rule.quorum = quorum;
        let mut yes: Vec<usize> = Vec::new();
        let mut decided: Option<ApprovalState> = None;
        for (who, approve, now) in answers {
            let approver = format!("human:{who}");
            let decision = if approve { AnswerDecision::Approve } else { AnswerDecision::Deny };
            let earlier = current.answers.iter().find(|a| a.approver.id == approver).map(|a| a.decision);
            match plan_answer(&current, decision, &approver, at(now)) {
                AnswerPlan::Decide { to } => {
                    prop_assert!(decided.is_none());
                    prop_assert!(now < 100);
                    prop_assert!(earlier.is_none());
                    if to == ApprovalState::Granted {
                        prop_assert!(approve);
                        prop_assert_eq!(yes.len() + 1, quorum as usize);
                    } else {
                        prop_assert!(!approve);
                    }
                    current.state = to;
                    decided = Some(to);
                    yes.push(who);
                    current.answers.push(answer_by(&approver, decision));
                }
                AnswerPlan::Count { given, needed } => {
                    prop_assert!(approve && decided.is_none() && earlier.is_none());
                    prop_assert_eq!(needed, quorum);
                    prop_assert!(given < quorum);
                    yes.push(who);
                    prop_assert_eq!(given as usize, yes.len());
                    current.answers.push(answer_by(&approver, decision));
                }
                AnswerPlan::Expire => {
                    // Pending or granted-but-unused past its TTL: it expires (never a decision).
                    prop_assert!(now >= 100);
                    prop_assert!(decided.is_none() || decided == Some(ApprovalState::Granted));
                    current.state = ApprovalState::Expired;
                    decided = None;
                }
                AnswerPlan::Repeat => prop_assert_eq!(earlier, Some(decision)),
                AnswerPlan::AlreadyDecided { state } => {
                    prop_assert!(decided == Some(state) || earlier.is_some_and(|e| e != decision));
                }
                AnswerPlan::Expired => prop_assert_eq!(current.state, ApprovalState::Expired),
            }
        }
        // Never more yes answers than the quorum, each approver at most once.
        let mut ids: Vec<&str> = current.answers.iter().map(|a| a.approver.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), current.answers.len());
        prop_assert!(current.approvals_given() <= quorum);
    }
}

fn answer_by(id: &str, decision: AnswerDecision) -> RecordedAnswer {
    RecordedAnswer {
        approver: Approver {
            id: ApproverId::from_stored(id),
            groups: Vec::new(),
            channel: Channel::Api,
            authentication: crate::approver::Authentication::Asserted,
        },
        decision,
        answered_at: at(0),
        note: None,
        hash_confirmed: false,
    }
}

#[test]
fn a_verified_credential_keeps_its_authentication_and_groups() {
    use crate::approver::{Authentication, Credential};
    let mut rule = ApprovalRule::default();
    rule.directory
        .insert("human:alice".to_owned(), vec!["ops".to_owned()]);
    let verified = Credential::Verified {
        id: "human:alice".to_owned(),
        groups: vec!["finance".to_owned()],
        authentication: Authentication::ProxyHeader,
    };
    let approver = approver_of(&rule, &verified, Channel::Service, at(0)).unwrap();
    assert_eq!(approver.authentication, Authentication::ProxyHeader);
    assert_eq!(
        approver.groups,
        vec!["finance".to_owned(), "ops".to_owned()]
    );
    // Vouched for as asserted: the claimed groups count for nothing.
    let asserted = Credential::Verified {
        id: "human:alice".to_owned(),
        groups: vec!["finance".to_owned()],
        authentication: Authentication::Asserted,
    };
    let approver = approver_of(&rule, &asserted, Channel::Service, at(0)).unwrap();
    assert_eq!(approver.groups, vec!["ops".to_owned()]);
    // An empty id is anonymous.
    let anonymous = Credential::Verified {
        id: " ".to_owned(),
        groups: Vec::new(),
        authentication: Authentication::ProxyHeader,
    };
    assert_eq!(
        approver_of(&rule, &anonymous, Channel::Service, at(0)),
        Err(ApproverFault::Anonymous)
    );
    // Issue #19: one shape for every id, asserted or verified.
    for malformed in ["human:", ":", "human: bob"] {
        let asserted = Credential::Asserted(malformed.to_owned());
        let verified = Credential::Verified {
            id: malformed.to_owned(),
            groups: Vec::new(),
            authentication: Authentication::ProxyHeader,
        };
        for credential in [asserted, verified] {
            match approver_of(&rule, &credential, Channel::Service, at(0)) {
                Err(ApproverFault::Malformed(error)) => {
                    assert!(error.to_string().contains("`human:alice`"), "{error}");
                }
                other => panic!("{malformed:?} gave {other:?}"),
            }
        }
    }
}

proptest! {
    /// Issue #31: whatever the state, clock and who asks, a withdrawal never grants anything,
    /// never leaves a consumed, denied, expired or void request other than it was, and only
    /// ever moves a request to `revoked`, `cancelled`, `expired`, or (a withdrawn quorum yes)
    /// keeps it `pending` with one yes fewer.
    #[test]
    fn a_withdrawal_only_ever_takes_back(
        state in any_state(), now in 0i64..200, cancel in any::<bool>(),
        who in prop::sample::select(vec!["alice", "bob", "agent-self"]),
        alice_said_yes in any::<bool>(),
    ) {
        use crate::approval::withdraw::{Withdrawal, WithdrawalKind};
        use crate::store::plan::withdraw::{AnswerStep as WithdrawStep, withdraw_step};
        let answers: Vec<(&str, AnswerDecision)> = if alice_said_yes {
            vec![("alice", AnswerDecision::Approve)]
        } else {
            Vec::new()
        };
        let before = with_answers(state, &answers);
        let approver = if who == "agent-self" { "agent:a".to_owned() } else { format!("human:{who}") };
        let kind = if cancel {
            WithdrawalKind::Cancel { operator: "ops:dana".into(), channel: Channel::Cli }
        } else {
            WithdrawalKind::Revoke { approver: Credential::Asserted(approver.clone()), channel: Channel::Cli }
        };
        let withdrawal = Withdrawal { request_id: before.id.clone(), kind, reason: None };
        match withdraw_step(Some(before.clone()), withdrawal, at(now), at(now)) {
            WithdrawStep::Write { record, receipt } => {
                prop_assert!(matches!(before.state, ApprovalState::Pending | ApprovalState::Granted));
                prop_assert!(now < before.expires_at.as_millis());
                match record.state {
                    ApprovalState::Cancelled => prop_assert!(cancel),
                    ApprovalState::Revoked => {
                        prop_assert!(!cancel && before.state == ApprovalState::Granted);
                        prop_assert!(before.principal != approver);
                    }
                    ApprovalState::Pending => {
                        prop_assert!(!cancel && alice_said_yes && who == "alice");
                        prop_assert_eq!(record.approvals_given() + 1, before.approvals_given());
                    }
                    other => prop_assert!(false, "moved to {other}"),
                }
                prop_assert!(receipt.kind.is_some());
            }
            WithdrawStep::Repeat(record) => {
                prop_assert!(cancel && before.state == ApprovalState::Cancelled);
                prop_assert_eq!(record, before);
            }
            WithdrawStep::Expire { record, .. } => {
                prop_assert!(matches!(record.state, ApprovalState::Pending | ApprovalState::Granted));
                prop_assert!(now >= before.expires_at.as_millis());
            }
            WithdrawStep::Refuse { error, .. } => {
                prop_assert!(!matches!(error, crate::error::AnswerError::Store(_)));
            }
        }
    }
}
