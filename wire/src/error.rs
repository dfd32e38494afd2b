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
    InvalidReplicaAssignment = 39,
    InvalidRequest = 42,
    InvalidConfig = 40,
    UnsupportedForMessageFormat = 43,
    OutOfOrderSequenceNumber = 45,
    DuplicateSequenceNumber = 46,
    InvalidProducerEpoch = 47,
    KafkaStorageError = 56,
    FetchSessionIdNotFound = 70,
    InvalidFetchSessionEpoch = 71,
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
    FencedInstanceId = 82,
    GroupMaxSizeReached = 81,
    GroupSubscribedToTopic = 86,
    CoordinatorNotAvailable = 15,
    CoordinatorLoadInProgress = 14,
    InvalidProducerIdMapping = 49,
    PolicyViolation = 44,
    InvalidTxnState = 48,
    InvalidTransactionTimeout = 50,
    ConcurrentTransactions = 51,
    TransactionCoordinatorFenced = 52,
    OperationNotAttempted = 55,
    UnstableOffsetCommit = 88,
    ProducerFenced = 90,
    TransactionalIdNotFound = 105,
    // The cluster (metadata quorum, leader epochs, broker registration).
    NotController = 41,
    FencedLeaderEpoch = 74,
    UnknownLeaderEpoch = 75,
    StaleBrokerEpoch = 77,
    InvalidUpdateVersion = 95,
    DuplicateBrokerRegistration = 101,
    BrokerIdNotRegistered = 102,
    InconsistentClusterId = 104,
    IneligibleReplica = 107,
    // Leader elections and reassignments (KIP-460, KIP-455).
    PreferredLeaderNotAvailable = 80,
    EligibleLeadersNotAvailable = 83,
    ElectionNotNeeded = 84,
    NoReassignmentInProgress = 85,
    // Security: authentication (SASL) and authorisation (ACLs), SCRAM credentials.
    TopicAuthorizationFailed = 29,
    GroupAuthorizationFailed = 30,
    ClusterAuthorizationFailed = 31,
    UnsupportedSaslMechanism = 33,
    IllegalSaslState = 34,
    TransactionalIdAuthorizationFailed = 53,
    SecurityDisabled = 54,
    SaslAuthenticationFailed = 58,
    ResourceNotFound = 91,
    DuplicateResource = 92,
    UnacceptableCredential = 93,
    // Consumer groups of KIP-848 and share groups of KIP-932.
    UnknownTopicId = 100,
    FencedMemberEpoch = 110,
    UnreleasedInstanceId = 111,
    UnsupportedAssignor = 112,
    StaleMemberEpoch = 113,
    InvalidRecordState = 121,
    ShareSessionNotFound = 122,
    InvalidShareSessionEpoch = 123,
    InvalidRegularExpression = 128,
}

impl ErrorCode {
    /// The value sent on the wire.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// The code for a wire value, if it is one this crate names.
    pub fn from_code(code: i16) -> Option<ErrorCode> {
        Some(match code {
            -1 => ErrorCode::UnknownServerError,
            0 => ErrorCode::None,
            1 => ErrorCode::OffsetOutOfRange,
            2 => ErrorCode::CorruptMessage,
            3 => ErrorCode::UnknownTopicOrPartition,
            4 => ErrorCode::InvalidFetchSize,
            5 => ErrorCode::LeaderNotAvailable,
            6 => ErrorCode::NotLeaderOrFollower,
            7 => ErrorCode::RequestTimedOut,
            10 => ErrorCode::MessageTooLarge,
            17 => ErrorCode::InvalidTopicException,
            18 => ErrorCode::RecordListTooLarge,
            19 => ErrorCode::NotEnoughReplicas,
            20 => ErrorCode::NotEnoughReplicasAfterAppend,
            21 => ErrorCode::InvalidRequiredAcks,
            32 => ErrorCode::InvalidTimestamp,
            29 => ErrorCode::TopicAuthorizationFailed,
            30 => ErrorCode::GroupAuthorizationFailed,
            31 => ErrorCode::ClusterAuthorizationFailed,
            33 => ErrorCode::UnsupportedSaslMechanism,
            34 => ErrorCode::IllegalSaslState,
            53 => ErrorCode::TransactionalIdAuthorizationFailed,
            54 => ErrorCode::SecurityDisabled,
            58 => ErrorCode::SaslAuthenticationFailed,
            91 => ErrorCode::ResourceNotFound,
            92 => ErrorCode::DuplicateResource,
            93 => ErrorCode::UnacceptableCredential,
            100 => ErrorCode::UnknownTopicId,
            110 => ErrorCode::FencedMemberEpoch,
            111 => ErrorCode::UnreleasedInstanceId,
            112 => ErrorCode::UnsupportedAssignor,
            113 => ErrorCode::StaleMemberEpoch,
            121 => ErrorCode::InvalidRecordState,
            122 => ErrorCode::ShareSessionNotFound,
            123 => ErrorCode::InvalidShareSessionEpoch,
            128 => ErrorCode::InvalidRegularExpression,
            35 => ErrorCode::UnsupportedVersion,
            36 => ErrorCode::TopicAlreadyExists,
            37 => ErrorCode::InvalidPartitions,
            38 => ErrorCode::InvalidReplicationFactor,
            39 => ErrorCode::InvalidReplicaAssignment,
            42 => ErrorCode::InvalidRequest,
            40 => ErrorCode::InvalidConfig,
            43 => ErrorCode::UnsupportedForMessageFormat,
            45 => ErrorCode::OutOfOrderSequenceNumber,
            46 => ErrorCode::DuplicateSequenceNumber,
            47 => ErrorCode::InvalidProducerEpoch,
            56 => ErrorCode::KafkaStorageError,
            70 => ErrorCode::FetchSessionIdNotFound,
            71 => ErrorCode::InvalidFetchSessionEpoch,
            87 => ErrorCode::InvalidRecord,
            16 => ErrorCode::NotCoordinator,
            22 => ErrorCode::IllegalGeneration,
            23 => ErrorCode::InconsistentGroupProtocol,
            24 => ErrorCode::InvalidGroupId,
            25 => ErrorCode::UnknownMemberId,
            26 => ErrorCode::InvalidSessionTimeout,
            27 => ErrorCode::RebalanceInProgress,
            69 => ErrorCode::GroupIdNotFound,
            68 => ErrorCode::NonEmptyGroup,
            79 => ErrorCode::MemberIdRequired,
            82 => ErrorCode::FencedInstanceId,
            81 => ErrorCode::GroupMaxSizeReached,
            86 => ErrorCode::GroupSubscribedToTopic,
            15 => ErrorCode::CoordinatorNotAvailable,
            14 => ErrorCode::CoordinatorLoadInProgress,
            49 => ErrorCode::InvalidProducerIdMapping,
            44 => ErrorCode::PolicyViolation,
            48 => ErrorCode::InvalidTxnState,
            50 => ErrorCode::InvalidTransactionTimeout,
            51 => ErrorCode::ConcurrentTransactions,
            52 => ErrorCode::TransactionCoordinatorFenced,
            55 => ErrorCode::OperationNotAttempted,
            88 => ErrorCode::UnstableOffsetCommit,
            90 => ErrorCode::ProducerFenced,
            105 => ErrorCode::TransactionalIdNotFound,
            41 => ErrorCode::NotController,
            74 => ErrorCode::FencedLeaderEpoch,
            75 => ErrorCode::UnknownLeaderEpoch,
            77 => ErrorCode::StaleBrokerEpoch,
            95 => ErrorCode::InvalidUpdateVersion,
            101 => ErrorCode::DuplicateBrokerRegistration,
            102 => ErrorCode::BrokerIdNotRegistered,
            104 => ErrorCode::InconsistentClusterId,
            107 => ErrorCode::IneligibleReplica,
            80 => ErrorCode::PreferredLeaderNotAvailable,
            83 => ErrorCode::EligibleLeadersNotAvailable,
            84 => ErrorCode::ElectionNotNeeded,
            85 => ErrorCode::NoReassignmentInProgress,
            _ => return None,
        })
    }

    /// Whether Kafka marks the error retriable (the same request may succeed later).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ErrorCode::CorruptMessage
                | ErrorCode::UnknownTopicOrPartition
                | ErrorCode::LeaderNotAvailable
                | ErrorCode::NotLeaderOrFollower
                | ErrorCode::RequestTimedOut
                | ErrorCode::NotEnoughReplicas
                | ErrorCode::NotEnoughReplicasAfterAppend
                | ErrorCode::KafkaStorageError
                | ErrorCode::FetchSessionIdNotFound
                | ErrorCode::InvalidFetchSessionEpoch
                | ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::RebalanceInProgress
                | ErrorCode::ConcurrentTransactions
                | ErrorCode::UnstableOffsetCommit
                | ErrorCode::NotController
                | ErrorCode::FencedLeaderEpoch
                | ErrorCode::UnknownLeaderEpoch
                | ErrorCode::PreferredLeaderNotAvailable
                | ErrorCode::EligibleLeadersNotAvailable
                | ErrorCode::ElectionNotNeeded
        )
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn every_known_code_decodes_to_itself() {
        let mut known = 0;
        for code in -1..=200 {
            if let Some(e) = ErrorCode::from_code(code) {
                assert_eq!(e.code(), code);
                known += 1;
            }
        }
        assert!(known > 60, "{known}");
    }
}
