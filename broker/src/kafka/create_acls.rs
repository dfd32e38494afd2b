//! CreateAcls (key 30, v1-v3): adds ACL bindings, each validated (INVALID_REQUEST with the
//! reason) and saved durably before the answer. Re-adding an existing binding succeeds, as
//! in Kafka. Needs ALTER on the cluster (checked in `authorize`).

use std::rc::Rc;

use strand_wire::kafka::messages::create_acls_response::AclCreationResult;
use strand_wire::kafka::messages::{CreateAclsRequest, CreateAclsResponse};
use strand_wire::ErrorCode;

use super::acls_common::{change, str, unavailable};
use crate::node::Node;
use crate::security::acl::{
    validate, AclBinding, AclError, Operation, PatternType, Permission, ResourceType,
};

fn binding(
    c: &strand_wire::kafka::messages::create_acls_request::AclCreation,
) -> Result<AclBinding, AclError> {
    let invalid = |what: &str| AclError {
        code: ErrorCode::InvalidRequest.code(),
        message: format!("unknown {what}"),
    };
    let b = AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| invalid("resource type"))?,
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| invalid("pattern type"))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation).ok_or_else(|| invalid("operation"))?,
        permission: Permission::from_code(c.permission_type)
            .ok_or_else(|| invalid("permission type"))?,
    };
    validate(&b)?;
    Ok(b)
}

pub async fn handle(node: &Rc<Node>, req: CreateAclsRequest) -> CreateAclsResponse {
    let mut resp = CreateAclsResponse::default();
    let result = |code: i16, message: Option<String>| {
        let mut r = AclCreationResult::default();
        r.error_code = code;
        r.error_message = message.map(|m| str(&m));
        r
    };
    if let Some((code, message)) = unavailable(&node.shared) {
        resp.results = req
            .creations
            .iter()
            .map(|_| result(code.code(), Some(message.clone())))
            .collect();
        return resp;
    }
    let parsed: Vec<Result<AclBinding, AclError>> = req.creations.iter().map(binding).collect();
    let valid: Vec<AclBinding> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let saved = change(&node.shared, move |state| {
        valid
            .into_iter()
            .map(|b| state.authorizer.add(b).map(|_| ()))
            .collect::<Vec<_>>()
    })
    .await;
    let mut outcomes = match saved {
        Ok(o) => o.into_iter(),
        Err(why) => {
            resp.results = parsed
                .iter()
                .map(|_| result(ErrorCode::UnknownServerError.code(), Some(why.clone())))
                .collect();
            return resp;
        }
    };
    resp.results = parsed
        .into_iter()
        .map(|p| match p {
            Err(e) => result(e.code, Some(e.message)),
            Ok(_) => match outcomes.next() {
                Some(Ok(())) => result(0, None),
                Some(Err(e)) => result(e.code, Some(e.message)),
                None => result(ErrorCode::UnknownServerError.code(), None),
            },
        })
        .collect();
    resp
}
