//! Kafka error codes, by their protocol names (see Kafka's `Errors.java`).
//!
//! Only the codes Strand returns are listed; the numeric values are the wire values.

/// A Kafka protocol error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    UnknownServerError = -1,
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    InvalidFetchSize = 4,
    LeaderNotAvailable = 5,
    NotLeaderOrFollower = 6,
    RequestTimedOut = 7,
    MessageTooLarge = 10,
    InvalidTopicException = 17,
    RecordListTooLarge = 18,
    NotEnoughReplicas = 19,
    NotEnoughReplicasAfterAppend = 20,
    InvalidRequiredAcks = 21,
    InvalidTimestamp = 32,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidRequest = 42,
    InvalidConfig = 40,
    UnsupportedForMessageFormat = 43,
    OutOfOrderSequenceNumber = 45,
    DuplicateSequenceNumber = 46,
    InvalidProducerEpoch = 47,
    KafkaStorageError = 56,
    InvalidRecord = 87,
    NotCoordinator = 16,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    GroupIdNotFound = 69,
    NonEmptyGroup = 68,
    MemberIdRequired = 79,
    GroupSubscribedToTopic = 86,
    CoordinatorNotAvailable = 15,
    InvalidProducerIdMapping = 49,
    PolicyViolation = 44,
}

impl ErrorCode {
    /// The value sent on the wire.
    pub fn code(self) -> i16 {
        self as i16
    }
}
