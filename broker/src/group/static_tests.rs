//! Unit tests of static membership (KIP-345) and of offset commits around rebalances.

use super::*;

fn join_as(member: &str, instance: Option<&str>, md: &'static [u8]) -> Join {
    Join {
        group: "g".into(),
        member_id: member.into(),
        instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: "h".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(md))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 5_000,
        require_known_member_id: true,
    }
}

/// Two static members `i1`, `i2`, Stable at generation 1 with assignments `A1`, `A2`.
fn stable_static_pair(c: &mut Coordinator) -> (String, String) {
    let (Outcome::Parked(_), _) = c.join(join_as("", Some("i1"), b"m"), 0) else {
        panic!("a static member joins without MEMBER_ID_REQUIRED")
    };
    let (Outcome::Parked(_), done) = c.join(join_as("", Some("i2"), b"m"), 0) else {
        panic!("parked")
    };
    // The first join completed alone (generation 1), the second started generation 2.
    let ids: Vec<String> = c.group("g").unwrap().members.keys().cloned().collect();
    assert_eq!(ids.len(), 2);
    let _ = done;
    for id in &ids {
        c.join(
            join_as(
                id,
                c.group("g").unwrap().members[id]
                    .instance_id
                    .clone()
                    .as_deref(),
                b"m",
            ),
            1,
        );
    }
    let g = c.group("g").unwrap();
    let generation = g.generation;
    let leader = g.leader.clone().unwrap();
    let id1 = g.static_member("i1").unwrap().to_string();
    let id2 = g.static_member("i2").unwrap().to_string();
    let follower = if leader == id1 {
        id2.clone()
    } else {
        id1.clone()
    };
    let follower_iid = if follower == id1 { "i1" } else { "i2" };
    c.sync("g", (&follower, Some(follower_iid)), generation, vec![], 2);
    let leader_iid = if leader == id1 { "i1" } else { "i2" };
    let assignments = vec![
        (id1.clone(), Bytes::from_static(b"A1")),
        (id2.clone(), Bytes::from_static(b"A2")),
    ];
    c.sync("g", (&leader, Some(leader_iid)), generation, assignments, 3);
    assert_eq!(c.group("g").unwrap().state, GroupState::Stable);
    (id1, id2)
}

#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    for restarted in ["i1", "i2"] {
        let mut c = Coordinator::default();
        let (id1, id2) = stable_static_pair(&mut c);
        let generation = c.group("g").unwrap().generation;
        let old = if restarted == "i1" { &id1 } else { &id2 };
        // New process, same instance id, no member id, different metadata bytes (owned
        // partitions are gone after a restart): no rebalance, same generation.
        let (Outcome::Now(r), done) = c.join(join_as("", Some(restarted), b"other"), 100) else {
            panic!("answered at once")
        };
        assert!(done.is_empty());
        assert_eq!(r.error, ErrorCode::None);
        assert_eq!(r.generation, generation);
        assert_ne!(&r.member_id, old, "a new member id");
        assert_ne!(r.leader, r.member_id, "never told it leads a stable group");
        assert!(r.members.is_empty());
        let g = c.group("g").unwrap();
        assert_eq!(g.state, GroupState::Stable);
        let (Outcome::Now(s), _) = c.sync(
            "g",
            (&r.member_id, Some(restarted)),
            generation,
            vec![],
            110,
        ) else {
            panic!("a stable group answers a sync at once")
        };
        let want: &[u8] = if restarted == "i1" { b"A1" } else { b"A2" };
        assert_eq!((s.error, &s.assignment[..]), (ErrorCode::None, want));
        // The old process is fenced everywhere it still shows up.
        assert_eq!(
            c.heartbeat("g", (old, Some(restarted)), generation, 120),
            ErrorCode::FencedInstanceId
        );
        assert_eq!(
            c.check_commit("g", (old, Some(restarted)), generation),
            ErrorCode::FencedInstanceId
        );
        let (Outcome::Now(j), _) = c.join(join_as(old, Some(restarted), b"m"), 130) else {
            panic!()
        };
        assert_eq!(j.error, ErrorCode::FencedInstanceId);
        // The other member never noticed.
        let other = if restarted == "i1" {
            (&id2, "i2")
        } else {
            (&id1, "i1")
        };
        assert_eq!(
            c.heartbeat("g", (other.0, Some(other.1)), generation, 140),
            ErrorCode::None
        );
    }
}

#[test]
fn leave_by_instance_id_removes_the_static_member() {
    let mut c = Coordinator::default();
    let (id1, id2) = stable_static_pair(&mut c);
    let (errors, _) = c.leave(
        "g",
        &[
            (String::new(), Some("i1".into())),
            (id1.clone(), Some("i2".into())),
            (String::new(), Some("nobody".into())),
        ],
        200,
    );
    assert_eq!(
        errors,
        vec![
            ErrorCode::None,
            ErrorCode::FencedInstanceId,
            ErrorCode::UnknownMemberId
        ]
    );
    let (errors, _) = c.leave("g", &[(id2.clone(), Some("i2".into()))], 210);
    assert_eq!(errors, vec![ErrorCode::None]);
    c.tick(220);
    assert!(c.group("g").unwrap().members.is_empty());
    assert_eq!(c.delete_group("g"), ErrorCode::None);
}

#[test]
fn commits_are_accepted_while_preparing_a_rebalance_and_refused_while_completing_one() {
    let mut c = Coordinator::default();
    let (id1, id2) = stable_static_pair(&mut c);
    let generation = c.group("g").unwrap().generation;
    // A third member arrives: PreparingRebalance. Members of the current generation commit
    // in their revoke callbacks now; Kafka accepts those commits.
    let (Outcome::Now(r), _) = c.join(join_as("", None, b"m"), 300) else {
        panic!()
    };
    c.join(join_as(&r.member_id, None, b"m"), 300);
    assert_eq!(c.group("g").unwrap().state, GroupState::PreparingRebalance);
    assert_eq!(
        c.check_commit("g", (&id1, Some("i1")), generation),
        ErrorCode::None
    );
    // Everyone rejoins: CompletingRebalance, the new generation is not synced yet.
    c.join(join_as(&id1, Some("i1"), b"m"), 310);
    c.join(join_as(&id2, Some("i2"), b"m"), 310);
    let g = c.group("g").unwrap();
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(
        c.check_commit("g", (&id1, Some("i1")), g.generation),
        ErrorCode::RebalanceInProgress
    );
    assert_eq!(
        c.check_commit("g", (&id1, Some("i1")), generation),
        ErrorCode::IllegalGeneration
    );
}

#[test]
fn commits_to_a_group_that_does_not_exist_need_a_negative_generation() {
    let c = Coordinator::default();
    assert_eq!(c.check_commit("nope", ("", None), -1), ErrorCode::None);
    assert_eq!(
        c.check_commit("nope", ("m", None), 5),
        ErrorCode::IllegalGeneration
    );
}

#[test]
fn group_max_size_and_metadata_size_are_enforced() {
    let mut c = Coordinator {
        max_members: Some(1),
        ..Coordinator::default()
    };
    let (Outcome::Parked(_), _) = c.join(join_as("", Some("a"), b"m"), 0) else {
        panic!("the first member fits")
    };
    let (Outcome::Now(r), _) = c.join(join_as("", Some("b"), b"m"), 0) else {
        panic!()
    };
    assert_eq!(r.error, ErrorCode::GroupMaxSizeReached);
    // A dynamic member is refused when it comes back with its id.
    let (Outcome::Now(r), _) = c.join(join_as("", None, b"m"), 0) else {
        panic!()
    };
    let (Outcome::Now(r), _) = c.join(join_as(&r.member_id, None, b"m"), 0) else {
        panic!()
    };
    assert_eq!(r.error, ErrorCode::GroupMaxSizeReached);
    let mut j = join_as("", Some("big"), b"m");
    j.group = "other".into();
    j.protocols = vec![(
        "range".into(),
        Bytes::from(vec![
            0u8;
            crate::limits::GROUP_MEMBER_METADATA_BYTES_MAX + 1
        ]),
    )];
    let (Outcome::Now(r), _) = c.join(j, 0) else {
        panic!()
    };
    assert_eq!(r.error, ErrorCode::InvalidRequest);
}
