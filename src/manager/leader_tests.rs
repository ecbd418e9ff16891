use super::*;

const ME: &str = "capd-controller-manager-7d9f_00000000000000aa";
const OTHER: &str = "capd-controller-manager-5c4b_00000000000000bb";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn wall(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_750_000_000 + seconds).unwrap()
}

/// A Lease record held by `holder` with a 15s duration, as a test reads it.
fn lease_held_by(holder: &str) -> LeaseRecord {
    LeaseRecord {
        holder: Some(holder.to_owned()),
        lease_duration: secs(15),
        acquire_time: Some(wall(0)),
        renew_time: Some(wall(0)),
        transitions: 3,
    }
}

fn free_lease() -> LeaseRecord {
    LeaseRecord {
        holder: None,
        ..lease_held_by(OTHER)
    }
}

fn seen_at(record: LeaseRecord, since: Instant) -> Observation {
    Observation { record, since }
}

#[test]
fn no_lease_means_create_it_holding_it() {
    let now = Instant::now();
    assert_eq!(decide(None, ME, now), Decision::Create);
    let record = next_record(&Decision::Create, None, ME, secs(15), wall(5)).unwrap();
    assert_eq!(record.holder.as_deref(), Some(ME));
    assert_eq!(record.lease_duration, secs(15));
    assert_eq!(record.acquire_time, Some(wall(5)));
    assert_eq!(record.renew_time, Some(wall(5)));
    assert_eq!(record.transitions, 0);
}

#[test]
fn our_own_lease_is_renewed_keeping_acquire_time_and_transitions() {
    let t0 = Instant::now();
    let mine = lease_held_by(ME);
    let decision = decide(Some(&seen_at(mine.clone(), t0)), ME, t0 + secs(60));
    assert_eq!(decision, Decision::Renew);
    let renewed = next_record(&decision, Some(&mine), ME, secs(15), wall(60)).unwrap();
    assert_eq!(renewed.acquire_time, Some(wall(0)));
    assert_eq!(renewed.renew_time, Some(wall(60)));
    assert_eq!(renewed.transitions, 3);
}

#[test]
fn a_lease_held_by_another_is_respected_until_it_stops_changing_for_its_duration() {
    let t0 = Instant::now();
    let observation = seen_at(lease_held_by(OTHER), t0);
    assert_eq!(
        decide(Some(&observation), ME, t0 + secs(10)),
        Decision::Wait {
            holder: OTHER.to_owned(),
            expires_in: secs(5)
        }
    );
    assert_eq!(
        next_record(
            &decide(Some(&observation), ME, t0),
            None,
            ME,
            secs(15),
            wall(0)
        ),
        None
    );
}

#[test]
fn an_expired_lease_is_taken_over_with_one_more_transition() {
    let t0 = Instant::now();
    let theirs = lease_held_by(OTHER);
    let decision = decide(Some(&seen_at(theirs.clone(), t0)), ME, t0 + secs(15));
    assert_eq!(
        decision,
        Decision::TakeOver {
            previous_holder: Some(OTHER.to_owned())
        }
    );
    let taken = next_record(&decision, Some(&theirs), ME, secs(15), wall(20)).unwrap();
    assert_eq!(taken.holder.as_deref(), Some(ME));
    assert_eq!(taken.acquire_time, Some(wall(20)));
    assert_eq!(taken.transitions, 4);
}

#[test]
fn a_renewal_by_the_holder_restarts_the_expiry_clock() {
    let t0 = Instant::now();
    let first = observe(None, lease_held_by(OTHER), t0);
    let unchanged = observe(Some(first.clone()), lease_held_by(OTHER), t0 + secs(10));
    assert_eq!(
        unchanged.since, t0,
        "an unchanged record keeps its first sighting"
    );
    let renewed_record = LeaseRecord {
        renew_time: Some(wall(10)),
        ..lease_held_by(OTHER)
    };
    let renewed = observe(Some(unchanged), renewed_record, t0 + secs(12));
    assert_eq!(renewed.since, t0 + secs(12));
    assert!(matches!(
        decide(Some(&renewed), ME, t0 + secs(20)),
        Decision::Wait { .. }
    ));
    assert!(matches!(
        decide(Some(&renewed), ME, t0 + secs(27)),
        Decision::TakeOver { .. }
    ));
}

#[test]
fn the_holders_wall_clock_does_not_matter() {
    // The holder's renewTime is far in the past by our clock (skewed nodes), but we only just
    // saw this record: we must wait its full duration.
    let t0 = Instant::now();
    let skewed = LeaseRecord {
        renew_time: Some(wall(-86_400)),
        ..lease_held_by(OTHER)
    };
    assert!(matches!(
        decide(Some(&seen_at(skewed, t0)), ME, t0 + secs(1)),
        Decision::Wait { .. }
    ));
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let t0 = Instant::now();
    let released_record = released(&lease_held_by(OTHER), wall(30));
    assert_eq!(released_record.holder, None);
    assert_eq!(released_record.lease_duration, secs(1));
    assert_eq!(released_record.transitions, 3);
    let decision = decide(Some(&seen_at(released_record.clone(), t0)), ME, t0);
    assert_eq!(
        decision,
        Decision::TakeOver {
            previous_holder: None
        }
    );
    let taken = next_record(&decision, Some(&free_lease()), ME, secs(15), wall(31)).unwrap();
    assert_eq!(taken.holder.as_deref(), Some(ME));
}

#[test]
fn records_round_trip_through_the_lease_spec() {
    let record = lease_held_by(OTHER);
    assert_eq!(LeaseRecord::from_spec(&record.to_spec()), record);
    let released_spec = released(&record, wall(1)).to_spec();
    assert_eq!(released_spec.holder_identity.as_deref(), Some(""));
    assert_eq!(
        LeaseRecord::from_spec(&released_spec).holder,
        None,
        "empty holder is free"
    );
    let empty = LeaseRecord::from_spec(&LeaseSpec::default());
    assert_eq!(empty.holder, None);
    assert_eq!(empty.lease_duration, Duration::ZERO);
}

#[test]
fn the_leader_gives_up_once_the_renew_deadline_passes() {
    let t0 = Instant::now();
    assert!(!renew_deadline_passed(
        t0,
        t0 + Duration::from_millis(9_999),
        secs(10)
    ));
    assert!(renew_deadline_passed(t0, t0 + secs(10), secs(10)));
}

#[test]
fn timings_are_validated_like_client_go() {
    let config = |lease, renew, retry| {
        LeaderElectionConfig::new(
            "capd-system".into(),
            ME.into(),
            secs(lease),
            secs(renew),
            secs(retry),
        )
    };
    let ok = config(15, 10, 2).unwrap();
    assert_eq!(ok.name, "controller-leader-election-capd");
    assert_eq!(
        config(10, 10, 2).unwrap_err().to_string(),
        "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"
    );
    assert_eq!(
        config(15, 10, 9).unwrap_err(),
        LeaderConfigError::RetryPeriodTooLong {
            renew: "10s".into(),
            retry: "9s".into()
        }
    );
    assert_eq!(
        config(15, 10, 0).unwrap_err(),
        LeaderConfigError::ZeroRetryPeriod
    );
}

#[test]
fn identity_comes_from_the_pod_environment() {
    let id = holder_identity(
        Some("capd-controller-manager-7d9f".into()),
        Some("node-1".into()),
    );
    let (base, suffix) = id.rsplit_once('_').unwrap();
    assert_eq!(base, "capd-controller-manager-7d9f");
    assert_eq!(suffix.len(), 16);
    assert!(holder_identity(None, Some("node-1".into())).starts_with("node-1_"));
    assert!(holder_identity(Some(" ".into()), None).starts_with("capd-manager_"));
    assert_ne!(
        holder_identity(None, None),
        holder_identity(None, None),
        "restarts get new identities"
    );
}
