//! Deterministic runs of the KIP-848 consumer-group state machine.

use super::*;

fn topics(list: &[(&str, u128, i32)]) -> TopicsView {
    TopicsView {
        by_name: list
            .iter()
            .map(|(n, id, p)| (n.to_string(), (Uuid::from_u128(*id), *p)))
            .collect(),
    }
}

fn join(member: &str, names: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 10_000,
        subscribed_names: Some(names.iter().map(|s| s.to_string()).collect()),
        owned: Some(Assignment::new()),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<&Assignment>) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.cloned(),
        ..Default::default()
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(|p| p.len()).sum()
}

fn t1() -> TopicsView {
    topics(&[("t", 1, 8)])
}

#[test]
fn a_lone_member_gets_every_partition() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    let r = g.heartbeat(join("a", &["t"]), &t1(), &s, 0);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 8);
    assert_eq!(state_name(&g), "Stable");
    // Nothing changed: no assignment in the answer.
    let owned = r.assignment.clone().unwrap();
    let r = g.heartbeat(beat("a", 1, None), &t1(), &s, 100);
    assert_eq!((r.member_epoch, r.assignment), (1, None));
    let r = g.heartbeat(beat("a", 1, Some(&owned)), &t1(), &s, 200);
    assert_eq!(r.assignment, Some(owned));
}

/// The second member gets partitions only after the first gave them up; the first keeps
/// the others throughout.
#[test]
fn partitions_move_only_after_revocation() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    let a0 = g
        .heartbeat(join("a", &["t"]), &t1(), &s, 0)
        .assignment
        .unwrap();
    let rb = g.heartbeat(join("b", &["t"]), &t1(), &s, 10);
    assert_eq!(rb.member_epoch, 2);
    assert_eq!(
        count(rb.assignment.as_ref().unwrap()),
        0,
        "all still owned by a"
    );
    assert_eq!(state_name(&g), "Reconciling");
    // a is asked to revoke four, keeping four at epoch 1.
    let ra = g.heartbeat(beat("a", 1, None), &t1(), &s, 20);
    assert_eq!(ra.member_epoch, 1);
    let kept = ra.assignment.unwrap();
    assert_eq!(count(&kept), 4);
    assert!(kept[&Uuid::from_u128(1)].is_subset(&a0[&Uuid::from_u128(1)]));
    // b asks again before a revoked: still nothing.
    let rb = g.heartbeat(beat("b", 2, None), &t1(), &s, 30);
    assert!(rb.assignment.is_none());
    // a acknowledges: it moves to epoch 2 with the same four.
    let ra = g.heartbeat(beat("a", 1, Some(&kept)), &t1(), &s, 40);
    assert_eq!(ra.member_epoch, 2);
    assert_eq!(ra.assignment.as_ref(), Some(&kept));
    // Now b gets the other four.
    let rb = g.heartbeat(beat("b", 2, None), &t1(), &s, 50);
    let got = rb.assignment.unwrap();
    assert_eq!(count(&got), 4);
    assert!(got[&Uuid::from_u128(1)].is_disjoint(&kept[&Uuid::from_u128(1)]));
    assert_eq!(state_name(&g), "Stable");
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_and_its_partitions_reassigned() {
    let mut g = ConsumerGroup::default();
    let s = Settings {
        session_timeout_ms: 1_000,
        ..Settings::default()
    };
    g.heartbeat(join("a", &["t"]), &t1(), &s, 0);
    g.heartbeat(join("b", &["t"]), &t1(), &s, 0);
    let ra = g
        .heartbeat(beat("a", 1, None), &t1(), &s, 0)
        .assignment
        .unwrap();
    g.heartbeat(beat("a", 1, Some(&ra)), &t1(), &s, 0);
    let rb = g
        .heartbeat(beat("b", 2, None), &t1(), &s, 0)
        .assignment
        .unwrap();
    assert_eq!(count(&rb), 4);
    // b keeps beating, a goes silent.
    g.heartbeat(beat("b", 2, Some(&rb)), &t1(), &s, 900);
    let gone = g.tick(&s, 1_500);
    assert_eq!(gone, vec![("a".to_string(), "session timeout")]);
    let rb = g.heartbeat(beat("b", 2, None), &t1(), &s, 1_600);
    assert_eq!(rb.member_epoch, 3);
    assert_eq!(count(rb.assignment.as_ref().unwrap()), 8);
}

#[test]
fn fencing_and_unknown_members() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    g.heartbeat(join("a", &["t"]), &t1(), &s, 0);
    assert_eq!(
        g.heartbeat(beat("a", 7, None), &t1(), &s, 1).error,
        ErrorCode::FencedMemberEpoch
    );
    assert_eq!(
        g.heartbeat(beat("zz", 1, None), &t1(), &s, 1).error,
        ErrorCode::UnknownMemberId
    );
    // Rejoining at epoch 0 with the same id starts over.
    let r = g.heartbeat(join("a", &["t"]), &t1(), &s, 2);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 8);
    // Leaving.
    let r = g.heartbeat(beat("a", LEAVE_EPOCH, None), &t1(), &s, 3);
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    assert!(g.members.is_empty());
    assert_eq!(state_name(&g), "Empty");
}

#[test]
fn a_lost_answer_lets_the_previous_epoch_through() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    let a = g
        .heartbeat(join("a", &["t"]), &t1(), &s, 0)
        .assignment
        .unwrap();
    // a moved 0 -> 1; it repeats epoch 0? No: 0 is a join. Grow the group to move a 1 -> 3.
    g.heartbeat(join("b", &["t"]), &t1(), &s, 0);
    let kept = g
        .heartbeat(beat("a", 1, None), &t1(), &s, 0)
        .assignment
        .unwrap();
    let r = g.heartbeat(beat("a", 1, Some(&kept)), &t1(), &s, 0);
    assert_eq!(r.member_epoch, 2);
    // The answer was lost: a sends epoch 1 again with what it owns (within its assignment).
    let r = g.heartbeat(beat("a", 1, Some(&kept)), &t1(), &s, 0);
    assert_eq!(r.error, ErrorCode::None);
    // With more than it has, it is fenced.
    let r = g.heartbeat(beat("a", 1, Some(&a)), &t1(), &s, 0);
    assert_eq!(r.error, ErrorCode::FencedMemberEpoch);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    g.heartbeat(join("a", &["t"]), &t1(), &s, 0);
    g.heartbeat(join("b", &["t"]), &t1(), &s, 0);
    let r = g.heartbeat(beat("a", 1, None), &t1(), &s, 0);
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    assert_eq!(count(&r.assignment.unwrap()), 4);
    g.heartbeat(beat("b", 2, None), &t1(), &s, 9_000);
    g.heartbeat(beat("a", 1, None), &t1(), &s, 9_000);
    assert!(g.tick(&s, 9_500).is_empty());
    let gone = g.tick(&s, 10_001);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].0, "a");
    let rb = g.heartbeat(beat("b", 2, None), &t1(), &s, 10_002);
    assert_eq!(count(&rb.assignment.unwrap()), 8);
}

#[test]
fn a_static_member_comes_back_to_its_partitions() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    let mut hb = join("a1", &["t"]);
    hb.instance_id = Some("i".into());
    g.heartbeat(hb, &t1(), &s, 0);
    g.heartbeat(join("b", &["t"]), &t1(), &s, 0);
    let kept = g
        .heartbeat(beat("a1", 1, None), &t1(), &s, 0)
        .assignment
        .unwrap();
    g.heartbeat(beat("a1", 1, Some(&kept)), &t1(), &s, 0);
    g.heartbeat(beat("b", 2, None), &t1(), &s, 0);
    let epoch = g.epoch;
    let mut leave = beat("a1", STATIC_LEAVE_EPOCH, None);
    leave.instance_id = Some("i".into());
    assert_eq!(
        g.heartbeat(leave, &t1(), &s, 1).member_epoch,
        STATIC_LEAVE_EPOCH
    );
    // Another process may not take the instance while it is held...
    let mut other = join("x", &["t"]);
    other.instance_id = Some("i".into());
    // ...but once left with -2 it may, and gets the same partitions, no new group epoch.
    let r = g.heartbeat(other, &t1(), &s, 2);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.assignment.as_ref(), Some(&kept));
    assert_eq!(g.epoch, epoch);
    let mut again = join("y", &["t"]);
    again.instance_id = Some("i".into());
    assert_eq!(
        g.heartbeat(again, &t1(), &s, 3).error,
        ErrorCode::UnreleasedInstanceId
    );
}

#[test]
fn a_regex_subscription_follows_new_topics() {
    let mut g = ConsumerGroup::default();
    let s = Settings::default();
    let mut hb = join("a", &[]);
    hb.subscribed_names = None;
    hb.subscribed_regex = Some("orders-.*".into());
    let view = topics(&[("orders-eu", 1, 2), ("payments", 2, 4)]);
    let r = g.heartbeat(hb, &view, &s, 0);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
    let view = topics(&[("orders-eu", 1, 2), ("orders-us", 3, 3), ("payments", 2, 4)]);
    let r = g.heartbeat(beat("a", 1, None), &view, &s, 10);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 5);
    let bad = Heartbeat {
        subscribed_regex: Some("(".into()),
        ..join("b", &[])
    };
    assert_eq!(
        validate(&bad, 1).map_err(|e| e.0),
        Err(ErrorCode::InvalidRegularExpression)
    );
}

#[test]
fn validation_follows_kafka() {
    let mut hb = join("", &["t"]);
    assert!(validate(&hb, 0).is_ok(), "v0: the broker names the member");
    assert_eq!(
        validate(&hb, 1).map_err(|e| e.0),
        Err(ErrorCode::InvalidRequest)
    );
    hb.member_id = "m".into();
    hb.rebalance_timeout_ms = -1;
    assert!(validate(&hb, 1).is_err());
    let no_sub = Heartbeat {
        subscribed_names: None,
        ..join("m", &[])
    };
    assert!(validate(&no_sub, 1).is_err());
}

#[test]
fn range_gives_contiguous_ranges_per_topic() {
    let t = Uuid::from_u128(1);
    let subs: BTreeMap<String, BTreeSet<TopicId>> = ["a", "b", "c"]
        .iter()
        .map(|m| (m.to_string(), BTreeSet::from([t])))
        .collect();
    let out = assignor::range(&subs, &BTreeMap::from([(t, 8)]), &BTreeMap::new());
    let got: Vec<Vec<i32>> = out
        .values()
        .map(|a| a[&t].iter().copied().collect())
        .collect();
    assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
    // A fourth member: the others keep what fits their quota (2 each) and only give up.
    let mut four = subs.clone();
    four.insert("d".into(), BTreeSet::from([t]));
    let next = assignor::range(&four, &BTreeMap::from([(t, 8)]), &out);
    for m in ["a", "b", "c"] {
        assert!(next[m][&t].is_subset(&out[m][&t]), "{m}: {next:?}");
        assert_eq!(next[m][&t].len(), 2);
    }
    assert_eq!(next["d"][&t].len(), 2);
}

#[test]
fn uniform_is_balanced_and_sticky() {
    let t = Uuid::from_u128(1);
    let parts = BTreeMap::from([(t, 8)]);
    let subs = |ms: &[&str]| -> BTreeMap<String, BTreeSet<TopicId>> {
        ms.iter()
            .map(|m| (m.to_string(), BTreeSet::from([t])))
            .collect()
    };
    let three = assignor::uniform(&subs(&["a", "b", "c"]), &parts, &BTreeMap::new());
    let mut sizes: Vec<usize> = three.values().map(count).collect();
    sizes.sort();
    assert_eq!(sizes, vec![2, 3, 3]);
    // "d" joins: nobody loses a partition it could keep.
    let four = assignor::uniform(&subs(&["a", "b", "c", "d"]), &parts, &three);
    for m in ["a", "b", "c"] {
        assert!(four[m][&t].is_subset(&three[m][&t]), "{m}");
        assert_eq!(count(&four[m]), 2);
    }
    assert_eq!(count(&four["d"]), 2);
    // Every partition exactly once.
    let all: Vec<i32> = four.values().flat_map(|a| a[&t].iter().copied()).collect();
    assert_eq!(all.len(), 8);
    assert_eq!(all.iter().copied().collect::<BTreeSet<_>>().len(), 8);
}

#[test]
fn heterogeneous_subscriptions_stay_within_each_members_topics() {
    let (x, y) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let subs = BTreeMap::from([
        ("a".to_string(), BTreeSet::from([x])),
        ("b".to_string(), BTreeSet::from([x, y])),
    ]);
    let out = assignor::uniform(&subs, &BTreeMap::from([(x, 2), (y, 4)]), &BTreeMap::new());
    assert!(!out["a"].contains_key(&y));
    assert_eq!(count(&out["a"]) + count(&out["b"]), 6);
}
