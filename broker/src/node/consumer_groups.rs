//! KIP-848 consumer groups and KIP-932 share groups on their coordinating shard: runs the
//! sans-IO state machines (`group::consumer`, `group::share`) for ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe, ShareGroupHeartbeat and ShareGroupDescribe. Nothing waits:
//! a heartbeat is answered at once with what changed, and members learn the rest on their
//! next heartbeat.

use tracing::debug;

use super::group_service::{GroupRequest, GroupResponse};
use super::Node;
use crate::group::consumer;
use strand_wire::ErrorCode;

impl Node {
    pub(super) fn consumer_group_local(&self, req: GroupRequest, now_ms: i64) -> GroupResponse {
        match req {
            GroupRequest::ConsumerHeartbeat {
                group,
                heartbeat,
                topics,
            } => {
                let (member, epoch) = (heartbeat.member_id.clone(), heartbeat.member_epoch);
                let r = self
                    .groups
                    .borrow_mut()
                    .coordinator
                    .consumer_heartbeat(&group, *heartbeat, &topics, now_ms);
                if r.error != ErrorCode::None {
                    debug!(group, member, epoch, error = ?r.error, message = r.message.as_deref().unwrap_or(""), "consumer heartbeat refused");
                } else if r.assignment.is_some() {
                    debug!(
                        group,
                        member,
                        from = epoch,
                        to = r.member_epoch,
                        "consumer assignment sent"
                    );
                }
                GroupResponse::ConsumerHeartbeat(r)
            }
            GroupRequest::ConsumerDescribe { group } => {
                let g = self.groups.borrow();
                GroupResponse::ConsumerDescribed(
                    g.coordinator
                        .group(&group)
                        .and_then(|g| g.consumer.as_ref())
                        .map(|c| (consumer::state_name(c), c.clone())),
                )
            }
            GroupRequest::ShareHeartbeat {
                group,
                heartbeat,
                topics,
            } => {
                let (member, epoch) = (heartbeat.member_id.clone(), heartbeat.member_epoch);
                let r = self
                    .groups
                    .borrow_mut()
                    .coordinator
                    .share_heartbeat(&group, *heartbeat, &topics, now_ms);
                if r.error != ErrorCode::None {
                    debug!(group, member, epoch, error = ?r.error, "share heartbeat refused");
                }
                GroupResponse::ConsumerHeartbeat(r)
            }
            GroupRequest::ShareDescribe { group } => {
                let g = self.groups.borrow();
                GroupResponse::ShareDescribed(
                    g.coordinator
                        .group(&group)
                        .and_then(|g| g.share.as_ref())
                        .map(|s| (crate::group::share::state_name(s), s.clone())),
                )
            }
            _ => GroupResponse::Error(ErrorCode::UnknownServerError),
        }
    }
}
