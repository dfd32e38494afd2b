//! DescribeUserScramCredentials (key 50, v0, KIP-554): each user's SCRAM mechanisms and
//! iterations (never a key or salt); every user when none is named. RESOURCE_NOT_FOUND for a
//! user without credentials, DUPLICATE_RESOURCE for one named twice. Needs DESCRIBE on the
//! cluster (checked in `authorize`).

use std::rc::Rc;

use strand_wire::kafka::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use strand_wire::kafka::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use strand_wire::ErrorCode;

use super::acls_common::str;
use crate::node::Node;

pub fn handle(
    node: &Rc<Node>,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let state = node.shared.security.store.state();
    let mut names: Vec<String> = match &req.users {
        Some(users) if !users.is_empty() => users.iter().map(|u| u.name.to_string()).collect(),
        _ => {
            let mut all: Vec<String> = state.credentials.keys().map(|(u, _)| u.clone()).collect();
            all.dedup();
            all
        }
    };
    let mut resp = DescribeUserScramCredentialsResponse::default();
    let mut done: Vec<String> = Vec::new();
    for name in names.drain(..) {
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = str(&name);
        if done.contains(&name) {
            r.error_code = ErrorCode::DuplicateResource.code();
            r.error_message = Some(str(&format!("user {name} named twice")));
            resp.results.push(r);
            continue;
        }
        done.push(name.clone());
        for ((user, m), c) in &state.credentials {
            if *user == name {
                let mut info = CredentialInfo::default();
                info.mechanism = m.kafka_code();
                info.iterations = i32::try_from(c.iterations).unwrap_or(i32::MAX);
                r.credential_infos.push(info);
            }
        }
        if r.credential_infos.is_empty() {
            r.error_code = ErrorCode::ResourceNotFound.code();
            r.error_message = Some(str(&format!(
                "Attempt to describe a user credential that does not exist: {name}"
            )));
        }
        resp.results.push(r);
    }
    resp
}
