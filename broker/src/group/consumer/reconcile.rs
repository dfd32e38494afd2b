//! One member's step towards its target assignment (Kafka's `CurrentAssignmentBuilder`).
//!
//! Partitions the member keeps stay assigned throughout. Partitions its target no longer
//! has are revoked first: the member stays at its epoch until what it reports owning no
//! longer includes them. Partitions new to it are assigned once no other member owns them
//! (until then they are "unreleased" and the member waits at the new epoch).

use super::{Assignment, ConsumerMember, TopicId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// At the target epoch with its whole target.
    Stable,
    /// Must give up partitions before its epoch advances.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Next {
    pub state: MemberState,
    pub epoch: i32,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

fn add(a: &mut Assignment, t: TopicId, p: i32) {
    a.entry(t).or_default().insert(p);
}

/// Whether the member still reports owning any of `partitions` (not reporting counts as
/// owning: it sent nothing new).
fn still_owns(owned: Option<&Assignment>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    partitions.iter().any(|(t, ps)| {
        owned
            .get(t)
            .is_some_and(|o| ps.iter().any(|p| o.contains(p)))
    })
}

/// The member's next state, given the target (`target_epoch`, its part `target`), which
/// partitions other members own, and what the member reported owning.
pub fn next(
    m: &ConsumerMember,
    target_epoch: i32,
    target: &Assignment,
    owned_elsewhere: impl Fn(&TopicId, i32) -> bool,
    owned: Option<&Assignment>,
) -> Next {
    if m.state == MemberState::UnrevokedPartitions && still_owns(owned, &m.pending_revocation) {
        return Next {
            state: m.state,
            epoch: m.epoch,
            assigned: m.assigned.clone(),
            pending_revocation: m.pending_revocation.clone(),
        };
    }
    if m.state == MemberState::Stable && m.epoch == target_epoch {
        return Next {
            state: MemberState::Stable,
            epoch: m.epoch,
            assigned: m.assigned.clone(),
            pending_revocation: Assignment::new(),
        };
    }
    let mut assigned = Assignment::new();
    let mut revoke = Assignment::new();
    let mut unreleased = Assignment::new();
    for (t, ps) in &m.assigned {
        for p in ps {
            if target.get(t).is_some_and(|tp| tp.contains(p)) {
                add(&mut assigned, *t, *p);
            } else {
                add(&mut revoke, *t, *p);
            }
        }
    }
    for (t, ps) in target {
        for p in ps {
            if m.assigned.get(t).is_some_and(|a| a.contains(p)) {
                continue;
            }
            if owned_elsewhere(t, *p) {
                add(&mut unreleased, *t, *p);
            } else {
                add(&mut assigned, *t, *p);
            }
        }
    }
    if !revoke.is_empty() && still_owns(owned, &revoke) {
        // Revoke first; the epoch waits. Partitions that are free now are not handed out
        // until it advances (Kafka's order: a member never gains and loses at once).
        let kept: Assignment = m
            .assigned
            .iter()
            .filter_map(|(t, ps)| {
                let keep: std::collections::BTreeSet<i32> = ps
                    .iter()
                    .filter(|p| target.get(t).is_some_and(|tp| tp.contains(p)))
                    .copied()
                    .collect();
                (!keep.is_empty()).then_some((*t, keep))
            })
            .collect();
        return Next {
            state: MemberState::UnrevokedPartitions,
            epoch: m.epoch,
            assigned: kept,
            pending_revocation: revoke,
        };
    }
    Next {
        state: if unreleased.is_empty() {
            MemberState::Stable
        } else {
            MemberState::UnreleasedPartitions
        },
        epoch: target_epoch,
        assigned,
        pending_revocation: Assignment::new(),
    }
}
