//! OffsetFetch (key 9): committed offsets of one group (v1-7) or several (v8+); -1 where
//! nothing was committed. A null topic list means "every partition the group committed".
//! With `require_stable` (v7+), offsets held by an open transaction answer
//! UNSTABLE_OFFSET_COMMIT (retriable) instead. v9+ (KIP-848) carries the asking member and its
//! epoch: a member of a consumer group behind its epoch gets STALE_MEMBER_EPOCH.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strand_wire::kafka::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;

use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

type Found = BTreeMap<String, Vec<(i32, i64, i32, Option<String>)>>;

async fn fetch(
    node: &Rc<Node>,
    group: &str,
    partitions: Option<Vec<(String, i32)>>,
    require_stable: bool,
    member: Option<(String, i32)>,
) -> Result<Found, ErrorCode> {
    let req = GroupRequest::Fetch {
        group: group.to_string(),
        partitions,
        require_stable,
        member,
    };
    let mut out: Found = BTreeMap::new();
    match node.group_request(group, req).await {
        GroupResponse::Offsets(list) => {
            for ((topic, p), offset, epoch, md) in list {
                out.entry(topic).or_default().push((p, offset, epoch, md));
            }
        }
        GroupResponse::Error(code) => return Err(code),
        _ => {}
    }
    Ok(out)
}

pub async fn handle(node: &Rc<Node>, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let mut r = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let group = g.group_id.0.as_str().to_string();
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .flat_map(|t| {
                        let name = t.name.0.as_str().to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| (name.clone(), p))
                    })
                    .collect()
            });
            let mut gr = OffsetFetchResponseGroup::default();
            gr.group_id = g.group_id;
            // v9+ (KIP-848): a member of a consumer group names itself and its epoch.
            let member = g
                .member_id
                .as_ref()
                .map(|id| (id.as_str().to_string(), g.member_epoch));
            let found = match fetch(node, &group, wanted, req.require_stable, member).await {
                Ok(found) => found,
                Err(code) => {
                    gr.error_code = code.code();
                    Found::new()
                }
            };
            gr.topics = found
                .into_iter()
                .map(|(topic, parts)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.name = TopicName(StrBytes::from_string(topic));
                    t.partitions = parts
                        .into_iter()
                        .map(|(p, o, epoch, md)| {
                            let mut pr = OffsetFetchResponsePartitions::default();
                            pr.partition_index = p;
                            pr.committed_offset = o;
                            pr.committed_leader_epoch = epoch;
                            pr.metadata = Some(StrBytes::from_string(md.unwrap_or_default()));
                            pr
                        })
                        .collect();
                    t
                })
                .collect();
            r.groups.push(gr);
        }
        return r;
    }
    let group = req.group_id.0.as_str().to_string();
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.name.0.as_str().to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let found = match fetch(node, &group, wanted, req.require_stable, None).await {
        Ok(found) => found,
        Err(code) => {
            r.error_code = code.code();
            Found::new()
        }
    };
    r.topics = found
        .into_iter()
        .map(|(topic, parts)| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = TopicName(StrBytes::from_string(topic));
            t.partitions = parts
                .into_iter()
                .map(|(p, o, epoch, md)| {
                    let mut pr = OffsetFetchResponsePartition::default();
                    pr.partition_index = p;
                    pr.committed_offset = o;
                    pr.committed_leader_epoch = epoch;
                    pr.metadata = Some(StrBytes::from_string(md.unwrap_or_default()));
                    pr
                })
                .collect();
            t
        })
        .collect();
    r
}
