//! DescribeClientQuotas (key 48, v0-v1, KIP-546): Strand has no client quotas, so every
//! filter matches nothing and the answer is an empty list — what Kafka answers where none are
//! set. `kafka-configs --describe --entity-type users` asks it before the users' SCRAM
//! credentials. Needs DESCRIBE_CONFIGS on the cluster (checked in `authorize`).

use strand_wire::kafka::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

pub fn handle(_req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    let mut resp = DescribeClientQuotasResponse::default();
    resp.entries = Some(Vec::new());
    resp
}
