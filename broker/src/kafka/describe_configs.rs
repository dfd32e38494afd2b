//! DescribeConfigs (key 32): topic configs (effective value, and whether the topic overrides
//! the broker default), the broker's own log defaults and its dynamic configs, and group
//! configs (Kafka 4.x's names and defaults).

use std::rc::Rc;

use strand_wire::kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use strand_wire::kafka::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::Node;

/// Kafka's resource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;
/// Read-only broker entries of a cluster node, returned only when named: its metadata
/// image's digest (equal on nodes that applied the same records) and applied offset.
pub const DIGEST_KEY: &str = "strand.metadata.image.digest";
pub const APPLIED_KEY: &str = "strand.metadata.applied.offset";
const CLUSTER_STATUS_KEYS: [&str; 2] = [DIGEST_KEY, APPLIED_KEY];
/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_GROUP: i8 = 8;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's config types.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_LONG: i8 = 5;

fn entry(name: &str, value: String, source: i8) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.config_type = match crate::topic_configs::find(name) {
        Some(def) => def.kind.type_code(),
        None if name == "auto.create.topics.enable" => TYPE_BOOLEAN,
        None => TYPE_LONG,
    };
    e.name = StrBytes::from_string(name.to_string());
    e.value = Some(StrBytes::from_string(value));
    e.config_source = source;
    e
}

pub async fn handle(node: &Rc<Node>, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let catalog = node.catalog();
    let defaults = &node.config().log;
    let mut response = DescribeConfigsResponse::default();
    for res in req.resources {
        let keys: Option<Vec<String>> = res
            .configuration_keys
            .as_ref()
            .map(|k| k.iter().map(|s| s.as_str().to_string()).collect());
        let wanted = |name: &str| keys.as_ref().is_none_or(|k| k.iter().any(|x| x == name));
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        match res.resource_type {
            RESOURCE_TOPIC => match catalog.topics.get(res.resource_name.as_str()) {
                Some(meta) => {
                    r.configs = meta
                        .effective_configs(defaults)
                        .into_iter()
                        .filter(|(k, _, _)| wanted(k))
                        .map(|(k, v, overridden)| {
                            entry(
                                k,
                                v,
                                if overridden {
                                    SOURCE_TOPIC
                                } else {
                                    SOURCE_DEFAULT
                                },
                            )
                        })
                        .collect();
                }
                None => {
                    r.error_code = ErrorCode::UnknownTopicOrPartition.code();
                    r.error_message = Some(StrBytes::from_string(format!(
                        "topic {} does not exist",
                        res.resource_name.as_str()
                    )));
                }
            },
            RESOURCE_BROKER => {
                let c = node.config();
                let broker = [
                    ("log.segment.bytes", defaults.segment_bytes.to_string()),
                    ("log.roll.ms", defaults.segment_ms.to_string()),
                    ("log.retention.ms", defaults.retention_ms.to_string()),
                    ("log.retention.bytes", defaults.retention_bytes.to_string()),
                    ("log.flush.interval.ms", defaults.flush_ms.to_string()),
                    ("num.partitions", c.num_partitions.to_string()),
                    (
                        "auto.create.topics.enable",
                        c.auto_create_topics.to_string(),
                    ),
                ];
                // (In a cluster this node's throttle rates are its own dynamic configs.)
                let mut dynamic = catalog.broker_configs.clone();
                dynamic.extend(node.shared.throttle_rates.described());
                let dynamic = &dynamic;
                let mut status = Vec::new();
                if let (Some(h), Some(keys)) = (&node.shared.cluster, &keys) {
                    // Cluster mode, asked by name only (`strand cluster info`): this node's
                    // metadata image, read-only.
                    if keys
                        .iter()
                        .any(|k| CLUSTER_STATUS_KEYS.contains(&k.as_str()))
                    {
                        if let Some(s) = h.status().await {
                            status.push((DIGEST_KEY, format!("{:016x}", s.image_digest)));
                            status.push((APPLIED_KEY, s.applied_offset.to_string()));
                        }
                    }
                }
                r.configs = broker
                    .into_iter()
                    .filter(|(k, _)| wanted(k) && !dynamic.contains_key(*k))
                    .map(|(k, v)| entry(k, v, SOURCE_STATIC_BROKER))
                    .chain(
                        dynamic
                            .iter()
                            .filter(|(k, _)| wanted(k))
                            .map(|(k, v)| entry(k, v.clone(), SOURCE_DYNAMIC_BROKER)),
                    )
                    .chain(status.into_iter().filter(|(k, _)| wanted(k)).map(|(k, v)| {
                        let mut e = entry(k, v, SOURCE_STATIC_BROKER);
                        e.read_only = true;
                        e
                    }))
                    .collect();
            }
            RESOURCE_GROUP => {
                let set = catalog.group_configs.get(res.resource_name.as_str());
                r.configs = crate::dynamic_configs::GROUP_CONFIGS
                    .iter()
                    .filter(|(k, _)| wanted(k))
                    .map(|&(k, default)| match set.and_then(|s| s.get(k)) {
                        Some(v) => entry(k, v.clone(), SOURCE_GROUP),
                        None => entry(k, default.to_string(), SOURCE_DEFAULT),
                    })
                    .collect();
            }
            _ => {
                r.error_code = ErrorCode::InvalidRequest.code();
                r.error_message = Some(StrBytes::from_static_str("unsupported resource type"));
            }
        }
        response.results.push(r);
    }
    response
}
