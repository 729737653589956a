//! Kafka's error codes, as one enum. Each layer maps its own error into it.

/// The Kafka protocol error codes rutomq returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(i16)]
pub enum ErrorCode {
    #[default]
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    MessageTooLarge = 10,
    RequestTimedOut = 7,
    OffsetMetadataTooLarge = 12,
    CoordinatorLoadInProgress = 14,
    CoordinatorNotAvailable = 15,
    NotCoordinator = 16,
    InvalidTopicException = 17,
    TopicAuthorizationFailed = 29,
    GroupAuthorizationFailed = 30,
    ClusterAuthorizationFailed = 31,
    RecordListTooLarge = 18,
    InvalidRequiredAcks = 21,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    InvalidTimestamp = 32,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidReplicaAssignment = 39,
    InvalidConfig = 40,
    InvalidRequest = 42,
    OutOfOrderSequenceNumber = 45,
    InvalidProducerEpoch = 47,
    InvalidTxnState = 48,
    InvalidProducerIdMapping = 49,
    InvalidTransactionTimeout = 50,
    ConcurrentTransactions = 51,
    TransactionalIdAuthorizationFailed = 53,
    OperationNotAttempted = 55,
    UnstableOffsetCommit = 88,
    ProducerFenced = 90,
    TransactionalIdNotFound = 105,
    TransactionAbortable = 120,
    KafkaStorageError = 56,
    UnknownServerError = -1,
    UnknownTopicId = 100,
    InvalidRecord = 87,
    InconsistentTopicId = 103,
    TopicDeletionDisabled = 73,
    NonEmptyGroup = 68,
    DelegationTokenAuthDisabled = 61,
    DelegationTokenNotFound = 62,
    DelegationTokenOwnerMismatch = 63,
    DelegationTokenRequestNotAllowed = 64,
    DelegationTokenAuthorizationFailed = 65,
    DelegationTokenExpired = 66,
    InvalidPrincipalType = 67,
    GroupIdNotFound = 69,
    MemberIdRequired = 79,
    GroupMaxSizeReached = 81,
    FencedInstanceId = 82,
    GroupSubscribedToTopic = 86,
    FencedMemberEpoch = 110,
    UnreleasedInstanceId = 111,
    UnsupportedAssignor = 112,
    StaleMemberEpoch = 113,
    InvalidRegularExpression = 128,
    UnsupportedSaslMechanism = 33,
    IllegalSaslState = 34,
    SaslAuthenticationFailed = 58,
    SecurityDisabled = 54,
    ResourceNotFound = 91,
    DuplicateResource = 92,
    UnacceptableCredential = 93,
    ThrottlingQuotaExceeded = 89,
    UnsupportedCompressionType = 76,
    UnknownSubscriptionId = 117,
    TelemetryTooLarge = 118,
    LogDirNotFound = 57,
    FencedLeaderEpoch = 74,
    UnknownLeaderEpoch = 75,
    ElectionNotNeeded = 84,
    NoReassignmentInProgress = 85,
    InvalidUpdateVersion = 95,
    InvalidRecordState = 121,
    ShareSessionNotFound = 122,
    InvalidShareSessionEpoch = 123,
    FencedStateEpoch = 124,
    ShareSessionLimitReached = 133,
    StreamsInvalidTopology = 130,
}

impl ErrorCode {
    pub fn code(self) -> i16 {
        self as i16
    }
}

impl From<&rutomq_meta::MetaError> for ErrorCode {
    fn from(e: &rutomq_meta::MetaError) -> Self {
        if e.is_retriable() {
            // Retriable for every Kafka client: metadata is briefly unreachable.
            ErrorCode::KafkaStorageError
        } else {
            ErrorCode::InvalidRequest
        }
    }
}

impl From<&rutomq_storage::StorageError> for ErrorCode {
    fn from(_: &rutomq_storage::StorageError) -> Self {
        ErrorCode::KafkaStorageError
    }
}

impl From<rutomq_meta::BatchOutcome> for ErrorCode {
    fn from(o: rutomq_meta::BatchOutcome) -> Self {
        use rutomq_meta::BatchOutcome as B;
        match o {
            B::Appended { .. } | B::Duplicate { .. } => ErrorCode::None,
            B::UnknownTopicOrPartition => ErrorCode::UnknownTopicOrPartition,
            B::OutOfOrderSequence => ErrorCode::OutOfOrderSequenceNumber,
            B::InvalidProducerEpoch => ErrorCode::InvalidProducerEpoch,
            B::InvalidProducerIdMapping => ErrorCode::InvalidProducerIdMapping,
            B::InvalidTxnState | B::PlainBatchInTransaction => ErrorCode::InvalidTxnState,
        }
    }
}
