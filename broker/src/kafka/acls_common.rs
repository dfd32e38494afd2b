//! What CreateAcls, DescribeAcls and DeleteAcls share: Kafka's refusal when ACLs are off or
//! not served here, the wire <-> binding conversions, and the durable change.

use std::sync::Arc;

use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::NodeShared;
use crate::security::acl::{
    AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType,
};
use crate::security::store::SecurityState;

/// Why ACLs cannot be managed here, if they cannot: Kafka answers SECURITY_DISABLED without
/// an authoriser; in a cluster they would be this node's alone (they are not in the
/// metadata log yet), so they are refused there too.
pub fn unavailable(shared: &NodeShared) -> Option<(ErrorCode, String)> {
    if !shared.security.config.authorizer {
        return Some((
            ErrorCode::SecurityDisabled,
            "No Authorizer is configured (authorizer.class.name).".into(),
        ));
    }
    if shared.config.cluster.is_some() {
        return Some((
            ErrorCode::SecurityDisabled,
            "ACLs are node-local and not served in cluster mode yet".into(),
        ));
    }
    None
}

/// A filter from the wire's fields; `Err` names a field with an unknown code.
#[allow(clippy::too_many_arguments)]
pub fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclBindingFilter, String> {
    Ok(AclBindingFilter {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("unknown resource type {resource_type}"))?,
        resource_name: resource_name.map(|s| s.to_string()),
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or_else(|| format!("unknown pattern type {pattern_type}"))?,
        principal: principal.map(|s| s.to_string()),
        host: host.map(|s| s.to_string()),
        operation: Operation::from_code(operation)
            .ok_or_else(|| format!("unknown operation {operation}"))?,
        permission: Permission::from_code(permission)
            .ok_or_else(|| format!("unknown permission type {permission}"))?,
    })
}

pub fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Applies `change` durably on a blocking thread; the caller's shard sees it at once after.
pub async fn change<T: Send + 'static>(
    shared: &Arc<NodeShared>,
    change: impl FnOnce(&mut SecurityState) -> T + Send + 'static,
) -> Result<T, String> {
    let shared = Arc::clone(shared);
    glommio::executor()
        .spawn_blocking(move || shared.security.store.update(change))
        .await
        .map_err(|e| format!("cannot save {}: {e}", crate::security::store::FILE_NAME))
}

/// Sorted for stable answers: by resource, then the rest.
pub fn sorted(mut bindings: Vec<AclBinding>) -> Vec<AclBinding> {
    bindings.sort();
    bindings
}
