//! AlterConfigs (key 33), the legacy API that librdkafka's `AlterConfigs` and older tools
//! use: each topic's overrides are replaced by the set given (configs not named return to
//! their defaults), validated like CreateTopics, through the controller.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::alter_configs_response::AlterConfigsResourceResponse;
use strand_wire::kafka::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::incremental_alter_configs::alter_resources;
use crate::catalog::CatalogOp;
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources = req
        .resources
        .iter()
        .map(|res| {
            let configs: BTreeMap<String, String> = res
                .configs
                .iter()
                .filter_map(|c| {
                    let value = c.value.as_ref()?.as_str().to_string();
                    Some((c.name.as_str().to_string(), value))
                })
                .collect();
            (
                res.resource_type,
                res.resource_name.as_str().to_string(),
                configs,
            )
        })
        .collect();
    let answers = alter_resources(node, resources, req.validate_only, CatalogOp::SetConfigs).await;
    let mut response = AlterConfigsResponse::default();
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
