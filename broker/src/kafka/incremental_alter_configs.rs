//! IncrementalAlterConfigs (key 44): SET and DELETE of topic configs, through the controller;
//! every shard applies the new settings to its open partitions.

use std::rc::Rc;

use strand_wire::kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strand_wire::kafka::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::describe_configs::RESOURCE_TOPIC;
use crate::catalog::CatalogOp;
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    let mut changes = Vec::new();
    let mut slots = Vec::new();
    for res in req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        if res.resource_type == RESOURCE_TOPIC {
            let ops = res
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
            slots.push(response.responses.len());
            changes.push((res.resource_name.as_str().to_string(), ops));
        } else {
            r.error_code = ErrorCode::InvalidRequest.code();
            r.error_message = Some(StrBytes::from_static_str(
                "only topic configs can be altered",
            ));
        }
        response.responses.push(r);
    }
    if !changes.is_empty() {
        let outcomes = node
            .change_catalog(CatalogOp::AlterConfigs(changes), req.validate_only)
            .await;
        for (slot, outcome) in slots.into_iter().zip(outcomes) {
            if let Err((code, message)) = outcome {
                response.responses[slot].error_code = code.code();
                response.responses[slot].error_message = Some(StrBytes::from_string(message));
            }
        }
    }
    response
}
