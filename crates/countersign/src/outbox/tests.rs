use super::*;

const START: Timestamp = Timestamp::from_millis(1_790_000_000_000);

fn wait_after(attempts: u32, random: f64) -> Option<Duration> {
    match after_failure(START, attempts, START, "HTTP 503".to_owned(), random) {
        Settlement::Retry { at, .. } => Some(Duration::from_millis(
            u64::try_from(at.as_millis() - START.as_millis()).expect("after now"),
        )),
        _ => None,
    }
}

#[test]
fn retries_back_off_exponentially_up_to_an_hour() {
    assert_eq!(wait_after(1, 1.0), Some(Duration::from_secs(5)));
    assert_eq!(wait_after(2, 1.0), Some(Duration::from_secs(10)));
    assert_eq!(wait_after(3, 1.0), Some(Duration::from_secs(20)));
    assert_eq!(wait_after(10, 1.0), Some(Duration::from_secs(2_560)));
    assert_eq!(wait_after(11, 1.0), Some(LONGEST_WAIT));
    assert_eq!(wait_after(40, 1.0), Some(LONGEST_WAIT));
}

#[test]
fn jitter_spreads_each_wait_between_half_and_one_and_a_half() {
    assert_eq!(wait_after(2, 0.5), Some(Duration::from_secs(5)));
    assert_eq!(wait_after(2, 1.49), Some(Duration::from_millis(14_900)));
    // Out-of-range factors are clamped, never a zero or a runaway wait.
    assert_eq!(wait_after(2, 0.0), Some(Duration::from_secs(5)));
    assert_eq!(wait_after(2, 9.0), Some(Duration::from_secs(15)));
}

#[test]
fn a_delivery_is_failed_once_its_next_retry_falls_past_a_day() {
    let almost = START.plus(GIVE_UP_AFTER - Duration::from_secs(10));
    assert!(matches!(
        after_failure(START, 3, almost, "HTTP 500".to_owned(), 1.0),
        Settlement::Failed { error } if error == "HTTP 500"
    ));
    // A redelivery starts a new window.
    assert!(matches!(
        after_failure(almost, 3, almost, "HTTP 500".to_owned(), 1.0),
        Settlement::Retry { .. }
    ));
}

#[test]
fn event_kinds_and_delivery_states_round_trip_their_names() {
    for kind in EventKind::ALL {
        assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(EventKind::parse("approval.granted"), None);
    for state in [
        DeliveryState::Pending,
        DeliveryState::Delivered,
        DeliveryState::Failed,
    ] {
        assert_eq!(DeliveryState::parse(state.as_str()), Some(state));
    }
}
