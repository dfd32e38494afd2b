//! DescribeAcls (key 29, v1-v3): the bindings matching a filter, grouped by resource pattern.
//! Needs DESCRIBE on the cluster (checked in `authorize`).

use std::rc::Rc;

use strand_wire::kafka::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use strand_wire::kafka::messages::{DescribeAclsRequest, DescribeAclsResponse};
use strand_wire::ErrorCode;

use super::acls_common::{filter, sorted, str, unavailable};
use crate::node::Node;

pub fn handle(node: &Rc<Node>, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let mut resp = DescribeAclsResponse::default();
    if let Some((code, message)) = unavailable(&node.shared) {
        resp.error_code = code.code();
        resp.error_message = Some(str(&message));
        return resp;
    }
    let f = match filter(
        req.resource_type_filter,
        req.resource_name_filter.as_ref(),
        req.pattern_type_filter,
        req.principal_filter.as_ref(),
        req.host_filter.as_ref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => {
            resp.error_code = ErrorCode::InvalidRequest.code();
            resp.error_message = Some(str(&why));
            return resp;
        }
    };
    let state = node.shared.security.store.state();
    for b in sorted(state.authorizer.describe(&f)) {
        let same = resp
            .resources
            .last()
            .is_some_and(|r: &DescribeAclsResource| {
                r.resource_type == b.resource_type.code()
                    && r.resource_name.as_str() == b.resource_name
                    && r.pattern_type == b.pattern_type.code()
            });
        if !same {
            let mut r = DescribeAclsResource::default();
            r.resource_type = b.resource_type.code();
            r.resource_name = str(&b.resource_name);
            r.pattern_type = b.pattern_type.code();
            resp.resources.push(r);
        }
        let mut d = AclDescription::default();
        d.principal = str(&b.principal);
        d.host = str(&b.host);
        d.operation = b.operation.code();
        d.permission_type = b.permission.code();
        if let Some(r) = resp.resources.last_mut() {
            r.acls.push(d);
        }
    }
    resp
}
