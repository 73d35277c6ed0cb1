//! Broker errors: which a retry can mend, and where a part may start given the offsets the
//! broker keeps.

use super::*;

/// Whether a consumer error of code `code` can pass if the client tries again: a broker that
/// is down or busy, a leader moving, a timeout. Not one the same request always gets: a
/// feature the client was built without (a compression codec: `NotImplemented`), records it
/// cannot decode, a protocol or version the broker does not speak, refused credentials or
/// permissions, a topic or partition that does not exist, a fatal client state. Those stop the
/// run ([`Error::Broker`], not retryable): a client that retried them would read nothing,
/// forever, even with [`Kafka::until_end`].
pub(super) fn retry_can_succeed(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    !matches!(
        code,
        // What this build of the client lacks, or cannot decode.
        C::NotImplemented
            | C::UnsupportedFeature
            | C::BadCompression
            | C::BadMessage
            | C::InvalidMessage
            | C::InvalidRecord
            | C::UnsupportedCompressionType
            | C::UnsupportedVersion
            | C::UnsupportedForMessageFormat
            | C::UnknownProtocol
            | C::InvalidArgument
            | C::InvalidConfig
            | C::NotConfigured
            | C::InvalidType
            // Credentials and permissions.
            | C::Authentication
            | C::SaslAuthenticationFailed
            | C::UnsupportedSASLMechanism
            | C::IllegalSASLState
            | C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            // What is read does not exist.
            | C::UnknownTopicOrPartition
            | C::UnknownTopic
            | C::UnknownPartition
            | C::UnknownTopicId
            | C::InvalidTopic
            // The client gave up for good.
            | C::Fatal
            | C::Inconsistent
    )
}

pub(super) fn broker_error(op: &'static str, at: &str, e: &KafkaError) -> Error {
    Error::Broker {
        op,
        at: at.to_owned(),
        retryable: true,
        message: e.to_string(),
    }
}

/// Refuses offset `next` of part `part` where the broker does not have it: below the first one a partition keeps
/// (retention deleted records the lake never read), or past its end (the topic was
/// deleted and created again, or the broker lost records). The end is the one the broker
/// lists; a broker that lists less than its end (tansu's `memory://` storage lists the
/// base offset of the last batch) is not one this source runs against.
pub(super) fn check_kept(part: &str, next: u64, low: i64, high: i64) -> Result<()> {
    let next = i64::try_from(next).unwrap_or(i64::MAX);
    if next < low {
        return Err(Error::InputChanged(format!(
            "part `{part}`: the lake read it up to offset {next}, and the broker keeps \
             offsets from {low} on: records {next}..{low} were deleted (retention) before \
             the lake took them; nothing was written (--kafka-offset-reset earliest reads on \
             from offset {low}, reporting the gap as possible loss)"
        )));
    }
    if next > high {
        return Err(Error::InputChanged(format!(
            "part `{part}`: the lake read it up to offset {next}, and it ends at {high}: \
             the topic was deleted and created again, or the broker lost records; nothing \
             was written (read it into a lake of its own, or under another job after \
             checking what it holds)"
        )));
    }
    Ok(())
}

/// Where to start reading part `part`, recorded at next offset `recorded` (`None`: never
/// read), the broker keeping offsets `low..high`: the offset (`None`: its first kept), and the
/// offsets passed over to get there. An offset the broker no longer keeps is refused
/// ([`check_kept`]), unless `reset_earliest` and retention deleted it: then the part starts at
/// its first offset kept, the gap reported.
pub(super) fn start_at(
    part: &str,
    recorded: Option<u64>,
    low: i64,
    high: i64,
    reset_earliest: bool,
) -> Result<(Option<u64>, Option<Skipped>)> {
    let Some(n) = recorded else {
        return Ok((None, None));
    };
    match check_kept(part, n, low, high) {
        Ok(()) => Ok((Some(n), None)),
        Err(_) if reset_earliest && i64::try_from(n).is_ok_and(|n| n < low) => {
            let first = u64::try_from(low).unwrap_or(0);
            let skipped = Skipped {
                part: part.to_owned(),
                from: n,
                to: first,
                reason: "deleted by retention before the lake read them".into(),
            };
            Ok((Some(first), Some(skipped)))
        }
        Err(e) => Err(e),
    }
}
