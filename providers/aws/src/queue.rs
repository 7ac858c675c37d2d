//! The interruption queue: EventBridge rules (spot interruption warnings,
//! rebalance recommendations, instance state changes, AWS Health scheduled
//! changes) deliver to an SQS
//! queue; each call receives what is waiting (up to 10 messages per
//! receive, without long polling), reads the notices and deletes every
//! message it received, notices or not. A notice is handed to the
//! controller once; a controller that dies between the delete and its
//! handling loses that notice, and the node's loss is then seen as a Node
//! going away.

use muster_provider_api::ProviderError;

use crate::errors::{Failure, classify};
use crate::events::{Notice, parse};

fn sqs_failure<E>(
    e: &aws_sdk_sqs::error::SdkError<E, aws_sdk_sqs::config::http::HttpResponse>,
) -> Failure
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    use aws_sdk_sqs::error::ProvideErrorMetadata;
    Failure {
        code: e.code().map(String::from),
        message: e
            .message()
            .map(String::from)
            .unwrap_or_else(|| aws_sdk_sqs::error::DisplayErrorContext(e).to_string()),
        status: e.raw_response().map(|r| r.status().as_u16()),
    }
}

/// Receives and deletes what is waiting; returns the notices.
pub async fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<Vec<Notice>, ProviderError> {
    let mut out = Vec::new();
    loop {
        let resp = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .send()
            .await
            .map_err(|e| classify(&sqs_failure(&e), None))?;
        let messages = resp.messages();
        if messages.is_empty() {
            return Ok(out);
        }
        for m in messages {
            if let Some(body) = m.body() {
                out.extend(parse(body));
            }
            if let Some(handle) = m.receipt_handle() {
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| classify(&sqs_failure(&e), None))?;
            }
        }
    }
}
