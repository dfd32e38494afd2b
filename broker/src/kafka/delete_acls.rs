//! DeleteAcls (key 31, v1-v3): removes the bindings matching each filter, saved durably
//! before the answer, which lists what each filter removed. Needs ALTER on the cluster
//! (checked in `authorize`).

use std::rc::Rc;

use strand_wire::kafka::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use strand_wire::kafka::messages::{DeleteAclsRequest, DeleteAclsResponse};
use strand_wire::ErrorCode;

use super::acls_common::{change, filter, sorted, str, unavailable};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let mut resp = DeleteAclsResponse::default();
    let result = |code: ErrorCode, message: String| {
        let mut r = DeleteAclsFilterResult::default();
        r.error_code = code.code();
        r.error_message = Some(str(&message));
        r
    };
    if let Some((code, message)) = unavailable(&node.shared) {
        resp.filter_results = req
            .filters
            .iter()
            .map(|_| result(code, message.clone()))
            .collect();
        return resp;
    }
    let filters: Vec<_> = req
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<_> = filters
        .iter()
        .filter_map(|f| f.as_ref().ok().cloned())
        .collect();
    let removed = match change(&node.shared, move |state| {
        valid
            .iter()
            .map(|f| state.authorizer.remove_matching(f))
            .collect::<Vec<_>>()
    })
    .await
    {
        Ok(r) => r,
        Err(why) => {
            resp.filter_results = filters
                .iter()
                .map(|_| result(ErrorCode::UnknownServerError, why.clone()))
                .collect();
            return resp;
        }
    };
    let mut removed = removed.into_iter();
    resp.filter_results = filters
        .into_iter()
        .map(|f| match f {
            Err(why) => result(ErrorCode::InvalidRequest, why),
            Ok(_) => {
                let mut r = DeleteAclsFilterResult::default();
                r.matching_acls = sorted(removed.next().unwrap_or_default())
                    .into_iter()
                    .map(|b| {
                        let mut m = DeleteAclsMatchingAcl::default();
                        m.resource_type = b.resource_type.code();
                        m.resource_name = str(&b.resource_name);
                        m.pattern_type = b.pattern_type.code();
                        m.principal = str(&b.principal);
                        m.host = str(&b.host);
                        m.operation = b.operation.code();
                        m.permission_type = b.permission.code();
                        m
                    })
                    .collect();
                r
            }
        })
        .collect();
    resp
}
