"""Storage exceptions, each carrying the Kafka error code a client should see for it."""

from __future__ import annotations

from collections.abc import Callable

from logway.wire.errors import ErrorCode, KafkaError

__all__ = [
    "CorruptRecord",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTimestamp",
    "InvalidTopic",
    "KafkaStorageError",
    "LogDirLocked",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "RecordBatchTooLarge",
    "RecordTooLarge",
    "TopicAlreadyExists",
    "UnknownTopicOrPartition",
]


class OffsetOutOfRange(KafkaError):
    """A fetch or lookup asked for an offset outside [log start, log end]."""

    error_code = ErrorCode.offset_out_of_range


class CorruptRecord(KafkaError):
    """A batch failed its length, magic or CRC-32C check (Kafka's CorruptRecordException)."""

    error_code = ErrorCode.corrupt_message


class RecordTooLarge(KafkaError):
    """A batch is larger than the topic's max.message.bytes (Kafka's RecordTooLargeException)."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLarge(KafkaError):
    """A produce payload larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    error_code = ErrorCode.record_list_too_large


class RecordErrors(KafkaError):
    """An error that can name the offending records of the batch: (index in the batch, message) pairs, which
    Produce v8+ answers as ``record_errors`` (Kafka's RecordValidationException).

    Naming them reads every record of the refused batch in Python (tens of ms for a 1 MiB batch of small
    records), so it is deferred to ``name_records()``, which the caller runs off the event loop and only when
    the answer carries them."""

    def __init__(self, message: str = "", name_records: Callable[[], tuple[tuple[int, str], ...]] | None = None) -> None:
        super().__init__(message)
        self._name_records = name_records

    def name_records(self) -> tuple[tuple[int, str], ...]:
        """The offending records' (index, message) pairs; () when the error is about the batch as a whole."""
        return self._name_records() if self._name_records is not None else ()

    def message_with(self, named: tuple[tuple[int, str], ...]) -> str:
        """The message once the records are named: Kafka's RecordValidationException for a rule broken by records
        (not timestamps) lists the first three."""
        if not named or self.error_code != ErrorCode.invalid_record:
            return str(self)
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in named[:3])
        return f"{self}: [{shown}]"


class InvalidRecord(RecordErrors):
    """Well-formed bytes that break a record rule (Kafka's InvalidRecordException)."""

    error_code = ErrorCode.invalid_record


class InvalidTimestamp(RecordErrors):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms of the broker clock."""

    error_code = ErrorCode.invalid_timestamp


class OutOfOrderSequence(KafkaError):
    """An idempotent producer's batch does not follow its last sequence number."""

    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(KafkaError):
    """An idempotent producer wrote with an epoch older than the one already seen (fenced)."""

    error_code = ErrorCode.invalid_producer_epoch


class UnknownTopicOrPartition(KafkaError):
    """The topic or partition does not exist on this broker."""

    error_code = ErrorCode.unknown_topic_or_partition


class TopicAlreadyExists(KafkaError):
    """CreateTopics for a name that is already taken."""

    error_code = ErrorCode.topic_already_exists


class InvalidPartitions(KafkaError):
    """A partition count that is not allowed (less than one, or not larger than the current count)."""

    error_code = ErrorCode.invalid_partitions


class InvalidConfig(KafkaError):
    """An unknown topic config name or a value its definition rejects."""

    error_code = ErrorCode.invalid_config


class InvalidTopic(KafkaError):
    """A topic name Kafka would not accept (characters, length, '.'/'..', or a '.'/'_' collision)."""

    error_code = ErrorCode.invalid_topic_exception


class KafkaStorageError(KafkaError):
    """An I/O error on a log directory; the client should retry (possibly elsewhere)."""

    error_code = ErrorCode.kafka_storage_error


class LogDirLocked(KafkaStorageError):
    """Another process holds a log dir's ``.lock`` (Kafka refuses to start: "Failed to acquire lock ...")."""
