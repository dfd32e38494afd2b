//! Strand's native Kafka client (placeholder).
//!
//! # Layout
//! Empty for now. Issue 7 brings a sans-IO core (request building, batching, Kafka's murmur2
//! partitioner, retries, metadata) and a glommio driver, so the load generator can run it
//! thread-per-core. It will depend only on `strand-wire`.
