//! Why an append to a [`super::PartitionLog`] was refused, and the Kafka error code each
//! reason is answered with.

use std::io;

use strand_wire::batch::BatchError;
use strand_wire::ErrorCode;

use crate::storage::types::Offset;

#[derive(Debug)]
pub enum AppendError {
    /// The batch failed validation; nothing was written.
    Invalid(BatchError),
    /// The disk failed; the partition refuses further appends (Kafka's KAFKA_STORAGE_ERROR).
    Io(io::Error),
    /// An idempotent producer resent a batch already in the log, at this base offset.
    Duplicate(Offset),
    /// An idempotent producer skipped or rewound sequence numbers.
    OutOfOrderSequence { expected: i32 },
    /// An idempotent producer with an older epoch than the partition has seen (a zombie), or
    /// a transaction marker at one.
    Fenced,
    /// A transaction marker from an older coordinator than the producer's last marker here.
    CoordinatorFenced,
    /// A replicated batch that does not follow on: its base offset is not the log end, or its
    /// leader epoch is older than the latest here (the follower must truncate first).
    Replica(String),
}

impl AppendError {
    pub fn error_code(&self) -> ErrorCode {
        match self {
            AppendError::Invalid(e) => e.error_code(),
            AppendError::Io(_) => ErrorCode::KafkaStorageError,
            AppendError::Duplicate(_) => ErrorCode::DuplicateSequenceNumber,
            AppendError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
            AppendError::Fenced => ErrorCode::InvalidProducerEpoch,
            AppendError::CoordinatorFenced => ErrorCode::TransactionCoordinatorFenced,
            AppendError::Replica(_) => ErrorCode::UnknownServerError,
        }
    }
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendError::Invalid(e) => write!(f, "invalid batch: {e}"),
            AppendError::Io(e) => write!(f, "storage error: {e}"),
            AppendError::Duplicate(o) => write!(f, "duplicate of the batch at offset {o}"),
            AppendError::OutOfOrderSequence { expected } => {
                write!(f, "out of order sequence number (expected {expected})")
            }
            AppendError::Fenced => f.write_str("producer epoch is older than the current one"),
            AppendError::CoordinatorFenced => {
                f.write_str("transaction marker from an older coordinator than the last one")
            }
            AppendError::Replica(why) => write!(f, "replicated batch refused: {why}"),
        }
    }
}

impl std::error::Error for AppendError {}
