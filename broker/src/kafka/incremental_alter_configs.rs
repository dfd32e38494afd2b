//! IncrementalAlterConfigs (key 44): SET, DELETE, APPEND and SUBTRACT (list configs) of topic
//! configs, validated against Kafka's table (`topic_configs`), through the controller;
//! every shard applies the new settings to its open partitions.

use std::rc::Rc;

use strand_wire::kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strand_wire::kafka::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use crate::catalog::{CatalogOp, Resource};
use crate::node::Node;

/// The catalog's name for a config resource of Kafka's type `resource_type`: a topic, this
/// broker (by its id `me`, or "" for the cluster default) or a group.
pub fn resource(resource_type: i8, name: &str, me: i32) -> Result<Resource, &'static str> {
    match resource_type {
        RESOURCE_TOPIC => Ok(Resource::Topic(name.to_string())),
        RESOURCE_BROKER if name.is_empty() || name == me.to_string() => Ok(Resource::Broker),
        RESOURCE_BROKER => Err("no such broker"),
        RESOURCE_GROUP => Ok(Resource::Group(name.to_string())),
        _ => Err("only topic, broker and group configs can be altered"),
    }
}

/// Runs config changes through the controller (shared with the legacy AlterConfigs): for
/// each resource `(type, name, change)`, the error code and message to answer with.
pub async fn alter_resources<C>(
    node: &Rc<Node>,
    resources: Vec<(i8, String, C)>,
    validate_only: bool,
    op: impl FnOnce(Vec<(Resource, C)>) -> CatalogOp,
) -> Vec<(i16, Option<StrBytes>)> {
    let mut answers = Vec::with_capacity(resources.len());
    let mut changes = Vec::new();
    let mut slots = Vec::new();
    let cluster = node.shared.cluster.is_some();
    for (resource_type, name, change) in resources {
        if cluster && resource_type == RESOURCE_BROKER && name.is_empty() {
            answers.push((
                ErrorCode::InvalidRequest.code(),
                Some(StrBytes::from_static_str(
                    "the cluster-wide broker default cannot be changed in a cluster yet: \
                     name a broker id",
                )),
            ));
            continue;
        }
        match resource(resource_type, &name, node.node_id()) {
            Ok(r) => {
                slots.push(answers.len());
                changes.push((r, change));
                answers.push((ErrorCode::None.code(), None));
            }
            Err(why) => answers.push((
                ErrorCode::InvalidRequest.code(),
                Some(StrBytes::from_static_str(why)),
            )),
        }
    }
    if !changes.is_empty() {
        let outcomes = node.change_catalog(op(changes), validate_only).await;
        super::fill_errors(&mut answers, slots, outcomes, |a, code, message| {
            *a = (code, Some(message));
        });
    }
    answers
}

pub async fn handle(
    node: &Rc<Node>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources = req
        .resources
        .iter()
        .map(|res| {
            let ops: Vec<_> = res
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.as_str().to_string(),
                        c.config_operation,
                        c.value.as_ref().map(|v| v.as_str().to_string()),
                    )
                })
                .collect();
            (
                res.resource_type,
                res.resource_name.as_str().to_string(),
                ops,
            )
        })
        .collect();
    let answers =
        alter_resources(node, resources, req.validate_only, CatalogOp::AlterConfigs).await;
    let mut response = IncrementalAlterConfigsResponse::default();
    for (res, (code, message)) in req.resources.into_iter().zip(answers) {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name;
        r.error_code = code;
        r.error_message = message;
        response.responses.push(r);
    }
    response
}
