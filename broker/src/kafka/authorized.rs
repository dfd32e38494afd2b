//! Authorized operations (KIP-430) as Kafka reports them without an authorizer: every
//! operation the resource type supports. A bit per `AclOperation` code: READ 3, WRITE 4,
//! CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
//! ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12. With the ACLs of the security issue these become
//! the principal's.

const fn bits(codes: &[u32]) -> i32 {
    let mut out = 0i32;
    let mut i = 0;
    while i < codes.len() {
        out |= 1 << codes[i];
        i += 1;
    }
    out
}

/// A topic: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
pub const TOPIC: i32 = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
/// The cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
/// IDEMPOTENT_WRITE.
pub const CLUSTER: i32 = bits(&[5, 7, 8, 9, 10, 11, 12]);
/// A group: READ, DELETE, DESCRIBE.
pub const GROUP: i32 = bits(&[3, 6, 8]);

#[cfg(test)]
mod tests {
    #[test]
    fn match_kafkas_values() {
        // What Apache Kafka 4.x answers without an authorizer.
        assert_eq!(super::TOPIC, 3576);
        assert_eq!(super::CLUSTER, 8096);
        assert_eq!(super::GROUP, 328);
    }
}
