//! Unit tests of the group coordinator: rebalances, syncs, timeouts, offsets.

use super::*;

fn join(member: &str, now: i64) -> Join {
    Join {
        group: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"md"))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 5_000 + now - now,
        require_known_member_id: true,
    }
}

fn joined(
    c: &mut Coordinator,
    member: &str,
    now: i64,
) -> (Outcome<JoinResult>, Vec<(Ticket, Answer)>) {
    c.join(join(member, now), now)
}

/// `n` member ids handed out with MEMBER_ID_REQUIRED (not joined yet).
fn member_ids(c: &mut Coordinator, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| match joined(c, "", 0) {
            (Outcome::Now(r), _) => r.member_id,
            _ => panic!("a first join without an id is answered at once"),
        })
        .collect()
}

#[test]
fn two_members_rebalance_sync_and_heartbeat() {
    let mut c = Coordinator::default();
    // v4+: first join without an id gets MEMBER_ID_REQUIRED and an id.
    let (Outcome::Now(r), _) = joined(&mut c, "", 0) else {
        panic!("expected an answer")
    };
    assert_eq!(r.error, ErrorCode::MemberIdRequired);
    let a = r.member_id;
    let (Outcome::Parked(ta), done) = joined(&mut c, &a, 0) else {
        panic!("parked")
    };
    assert_eq!(done.len(), 1, "a lone member completes the join at once");
    let Answer::Join(ja) = &done[0].1 else {
        panic!()
    };
    assert_eq!(
        (done[0].0, ja.generation, ja.leader.as_str()),
        (ta, 1, a.as_str())
    );
    let (_, _) = c.sync(
        "g",
        (&a, None),
        1,
        vec![(a.clone(), Bytes::from_static(b"p0,p1"))],
        0,
    );
    assert_eq!(c.group("g").map(|g| g.state), Some(GroupState::Stable));

    // A second member joins: rebalance until the first rejoins too.
    let (Outcome::Now(r), _) = joined(&mut c, "", 10) else {
        panic!()
    };
    let b = r.member_id;
    let (Outcome::Parked(_), done) = joined(&mut c, &b, 10) else {
        panic!()
    };
    assert!(done.is_empty(), "waits for the first member");
    assert_eq!(
        c.heartbeat("g", (&a, None), 1, 20),
        ErrorCode::RebalanceInProgress
    );
    let (Outcome::Parked(_), done) = joined(&mut c, &a, 30) else {
        panic!()
    };
    assert_eq!(done.len(), 2);
    for (_, ans) in &done {
        let Answer::Join(j) = ans else { panic!() };
        assert_eq!(j.generation, 2);
        assert_eq!(j.members.len(), if j.member_id == j.leader { 2 } else { 0 });
    }
    // Follower syncs first and waits; the leader's sync answers both.
    let follower = if c.group("g").unwrap().leader.as_deref() == Some(a.as_str()) {
        b.clone()
    } else {
        a.clone()
    };
    let leader = if follower == a { b.clone() } else { a.clone() };
    let (Outcome::Parked(tf), none) = c.sync("g", (&follower, None), 2, vec![], 40) else {
        panic!()
    };
    assert!(none.is_empty());
    let assignments = vec![
        (leader.clone(), Bytes::from_static(b"L")),
        (follower.clone(), Bytes::from_static(b"F")),
    ];
    let (Outcome::Parked(_), done) = c.sync("g", (&leader, None), 2, assignments, 41) else {
        panic!()
    };
    let mine = done
        .iter()
        .find(|(t, _)| *t == tf)
        .expect("follower answered");
    assert_eq!(
        mine.1,
        Answer::Sync(SyncResult {
            error: ErrorCode::None,
            protocol_type: Some("consumer".into()),
            protocol: Some("range".into()),
            assignment: Bytes::from_static(b"F"),
        })
    );
    assert_eq!(c.heartbeat("g", (&follower, None), 2, 50), ErrorCode::None);
    assert_eq!(
        c.heartbeat("g", (&follower, None), 1, 50),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        c.heartbeat("g", ("nobody", None), 2, 50),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(c.check_commit("g", (&follower, None), 2), ErrorCode::None);
    assert_eq!(
        c.check_commit("g", (&follower, None), 1),
        ErrorCode::IllegalGeneration
    );
}

#[test]
fn session_expiry_moves_partitions_to_the_others() {
    let mut c = Coordinator::default();
    let (Outcome::Now(r), _) = joined(&mut c, "", 0) else {
        panic!()
    };
    let a = r.member_id;
    joined(&mut c, &a, 0);
    c.sync("g", (&a, None), 1, vec![], 0);
    let (Outcome::Now(r), _) = joined(&mut c, "", 0) else {
        panic!()
    };
    let b = r.member_id;
    joined(&mut c, &b, 0);
    joined(&mut c, &a, 0);
    assert_eq!(c.group("g").unwrap().generation, 2);
    // b keeps heartbeating, a goes silent.
    assert_eq!(c.heartbeat("g", (&b, None), 2, 9_000), ErrorCode::None);
    assert!(c.tick(10_500).is_empty());
    assert_eq!(c.group("g").unwrap().members.len(), 1, "a expired");
    assert_eq!(
        c.heartbeat("g", (&b, None), 2, 10_600),
        ErrorCode::RebalanceInProgress
    );
    let (Outcome::Parked(_), done) = joined(&mut c, &b, 10_700) else {
        panic!()
    };
    assert_eq!(done.len(), 1);
    assert_eq!(c.group("g").unwrap().generation, 3);
}

#[test]
fn delete_and_expire_offsets_only_for_empty_groups() {
    let mut c = Coordinator::default();
    let tp = ("t".to_string(), 0);
    c.commit(
        "idle",
        vec![(
            tp.clone(),
            Committed {
                offset: 5,
                leader_epoch: -1,
                metadata: None,
                commit_ms: 0,
            },
        )],
    );
    let (Outcome::Now(r), _) = joined(&mut c, "", 0) else {
        panic!()
    };
    joined(&mut c, &r.member_id, 0);
    c.commit(
        "g",
        vec![(
            tp.clone(),
            Committed {
                offset: 7,
                leader_epoch: -1,
                metadata: None,
                commit_ms: 0,
            },
        )],
    );
    assert_eq!(c.delete_group("g"), ErrorCode::NonEmptyGroup);
    assert_eq!(
        c.delete_offsets("g", std::slice::from_ref(&tp)),
        Err(ErrorCode::GroupSubscribedToTopic)
    );
    assert_eq!(c.delete_group("nope"), ErrorCode::GroupIdNotFound);
    c.expire_offsets(10_000, 1_000);
    assert!(
        c.committed("idle", &tp).is_none(),
        "empty group's offsets expired"
    );
    assert!(
        c.committed("g", &tp).is_some(),
        "active group's offsets kept"
    );
    assert!(
        c.group("idle").is_some(),
        "an empty group is kept a while (Kafka's cleanup interval)"
    );
    c.expire_offsets(crate::limits::EMPTY_GROUP_KEEP_MS + 1, 1_000);
    assert!(c.group("idle").is_none());
}

#[test]
fn leave_triggers_a_rebalance_and_a_missing_rejoin_times_out() {
    let mut c = Coordinator::default();
    let ids = member_ids(&mut c, 3);
    for id in &ids {
        joined(&mut c, id, 0);
    }
    assert_eq!(c.group("g").unwrap().members.len(), 3);
    let (errs, _) = c.leave("g", &[(ids[0].clone(), None), ("ghost".into(), None)], 100);
    assert_eq!(errs, vec![ErrorCode::None, ErrorCode::UnknownMemberId]);
    // ids[1] rejoins with new metadata (a rejoin with the same metadata gets the current
    // generation back without a rebalance, as in Kafka).
    let changed = Join {
        protocols: vec![("range".into(), Bytes::from_static(b"md2"))],
        ..join(&ids[1], 150)
    };
    let (Outcome::Parked(_), _) = c.join(changed, 150) else {
        panic!("a changed rejoin starts a rebalance")
    };
    // ids[2] never rejoins: after the rebalance timeout it is dropped and ids[1] proceeds.
    let done = c.tick(150 + 5_001);
    assert_eq!(done.len(), 1);
    assert_eq!(c.group("g").unwrap().members.len(), 1);
}

#[test]
fn members_starting_together_share_one_generation_after_the_initial_delay() {
    let mut c = Coordinator {
        initial_rebalance_delay_ms: 3_000,
        ..Coordinator::default()
    };
    let ids = member_ids(&mut c, 3);
    // The first member waits for the delay instead of completing alone.
    let (Outcome::Parked(_), done) = joined(&mut c, &ids[0], 0) else {
        panic!("parked")
    };
    assert!(done.is_empty(), "no generation before the delay");
    assert!(c.tick(2_999).is_empty());
    // A second member at 2 s extends the wait to 5 s (capped by the 5 s rebalance timeout).
    let (_, done) = joined(&mut c, &ids[1], 2_000);
    assert!(done.is_empty());
    assert!(c.tick(4_999).is_empty(), "extended by the new member");
    let (_, done) = joined(&mut c, &ids[2], 4_999);
    assert!(done.is_empty(), "still inside the (capped) window");
    let done = c.tick(5_000);
    assert_eq!(done.len(), 3, "one generation for all three");
    let g = c.group("g").unwrap();
    assert_eq!((g.generation, g.members.len()), (1, 3));
    // Once the group has members, a newcomer's rebalance is not delayed again.
    let newcomer = member_ids(&mut c, 1).remove(0);
    let (Outcome::Parked(_), _) = joined(&mut c, &newcomer, 6_000) else {
        panic!()
    };
    for id in &ids {
        let (Outcome::Parked(_), _) = joined(&mut c, id, 6_000) else {
            panic!()
        };
    }
    assert_eq!(c.group("g").unwrap().generation, 2);
}

#[test]
fn a_follower_parked_in_sync_is_told_to_rejoin_when_a_new_member_arrives() {
    let mut c = Coordinator::default();
    let ids = member_ids(&mut c, 3);
    joined(&mut c, &ids[0], 0);
    c.sync("g", (&ids[0], None), 1, vec![], 0);
    // ids[1] joins: the leader rejoins, generation 2 completes with both.
    joined(&mut c, &ids[1], 10);
    joined(&mut c, &ids[0], 10);
    let g = c.group("g").unwrap();
    assert_eq!(
        (g.state, g.generation),
        (GroupState::CompletingRebalance, 2)
    );
    let follower = if g.leader.as_deref() == Some(ids[0].as_str()) {
        ids[1].clone()
    } else {
        ids[0].clone()
    };
    // The follower's SyncGroup waits for the leader's assignment...
    let (Outcome::Parked(sync_ticket), _) = c.sync("g", (&follower, None), 2, vec![], 20) else {
        panic!("a follower's sync waits for the leader")
    };
    // ...when a third member joins: the follower must hear REBALANCE_IN_PROGRESS now (it does
    // not heartbeat while it waits), not when the new join phase ends.
    let (_, done) = joined(&mut c, &ids[2], 30);
    let answered: Vec<ErrorCode> = done
        .iter()
        .filter(|(t, _)| *t == sync_ticket)
        .map(|(_, a)| match a {
            Answer::Sync(r) => r.error,
            _ => panic!("a sync ticket answered with a join"),
        })
        .collect();
    assert_eq!(answered, vec![ErrorCode::RebalanceInProgress]);
}
