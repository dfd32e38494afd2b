//! Committed offsets of a group (sans-IO): which commits are accepted, in Kafka's order
//! (`ClassicGroup.validateOffsetCommit`; a KIP-848 group checks member epochs instead), and
//! the offsets themselves.

use strand_wire::ErrorCode;

use super::{Committed, Coordinator, Group, GroupState};

impl Coordinator {
    /// Validates an OffsetCommit (and a TxnOffsetCommit's group part), as Kafka does:
    /// - a group that does not exist accepts only "simple" commits (generation < 0, consumers
    ///   using assign, admin tools); a generation >= 0 is ILLEGAL_GENERATION (OffsetCommit
    ///   v0-8);
    /// - generation < 0 is accepted while the group is empty;
    /// - otherwise the member must be known (static members: the instance's current id, else
    ///   FENCED_INSTANCE_ID) and of the current generation;
    /// - commits are refused (REBALANCE_IN_PROGRESS) only while the group completes a
    ///   rebalance. While it prepares one, members of the current generation may still
    ///   commit: clients commit in their revoke callbacks exactly then, and a refusal there
    ///   makes the partition's next owner read those records again.
    pub fn check_commit(
        &self,
        group_id: &str,
        member: (&str, Option<&str>),
        generation: i32,
    ) -> ErrorCode {
        let (member_id, instance_id) = member;
        if let Some(c) = self.groups.get(group_id).and_then(|g| g.consumer.as_ref()) {
            return c
                .check_member_epoch(member_id, generation)
                .err()
                .unwrap_or(ErrorCode::None);
        }
        let Some(g) = self.groups.get(group_id) else {
            return if generation < 0 {
                ErrorCode::None
            } else {
                ErrorCode::IllegalGeneration
            };
        };
        let empty = g.members.is_empty();
        if generation < 0 && empty {
            return ErrorCode::None;
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Err(e) = g.validate_member(member_id, instance_id) {
                return e;
            }
            if generation != g.generation {
                return ErrorCode::IllegalGeneration;
            }
        } else if !empty {
            return ErrorCode::UnknownMemberId;
        }
        if g.state == GroupState::CompletingRebalance {
            return ErrorCode::RebalanceInProgress;
        }
        ErrorCode::None
    }

    /// Stores committed offsets (after `check_commit` and after they are durable).
    pub fn commit(&mut self, group_id: &str, offsets: Vec<((String, i32), Committed)>) {
        let g = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        for (tp, c) in offsets {
            g.offsets.insert(tp, c);
        }
    }

    /// DeleteGroups: only a group without members can go (NON_EMPTY_GROUP otherwise).
    pub fn delete_group(&mut self, group_id: &str) -> ErrorCode {
        match self.groups.get(group_id) {
            None => ErrorCode::GroupIdNotFound,
            Some(g) if !g.is_empty() => ErrorCode::NonEmptyGroup,
            Some(_) => {
                self.groups.remove(group_id);
                ErrorCode::None
            }
        }
    }

    /// OffsetDelete: drops committed offsets of a group that is not consuming.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        tps: &[(String, i32)],
    ) -> Result<(), ErrorCode> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(ErrorCode::GroupIdNotFound)?;
        if !g.is_empty() {
            return Err(ErrorCode::GroupSubscribedToTopic);
        }
        for tp in tps {
            g.offsets.remove(tp);
        }
        Ok(())
    }

    /// `offsets.retention.minutes`: committed offsets of groups without members expire this
    /// long after their last commit; a group with neither members nor offsets disappears.
    pub fn expire_offsets(&mut self, now_ms: i64, retention_ms: i64) {
        for g in self.groups.values_mut() {
            if g.is_empty() {
                g.offsets
                    .retain(|_, c| now_ms - c.commit_ms <= retention_ms);
            }
        }
        self.groups.retain(|_, g| {
            !g.is_empty()
                || !g.offsets.is_empty()
                || !g.pending_ids.is_empty()
                || now_ms - g.last_change_ms < crate::limits::EMPTY_GROUP_KEEP_MS
        });
    }

    pub fn committed(&self, group_id: &str, tp: &(String, i32)) -> Option<&Committed> {
        self.groups.get(group_id).and_then(|g| g.offsets.get(tp))
    }
}
