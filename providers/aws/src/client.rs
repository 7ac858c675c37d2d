//! The EC2, SQS, EKS and SSM clients: credentials from the default chain (IRSA,
//! instance profile, environment) unless static ones are given, the
//! NodeClass's region, an optional endpoint override, and the SDK's standard
//! retry mode — bounded attempts with exponential backoff and jitter for
//! throttling (`RequestLimitExceeded`) and 5xx answers; each retry is logged
//! by the SDK at debug level.

use std::time::Duration;

use aws_config::{BehaviorVersion, Region, retry::RetryConfig};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

use crate::errors::Failure;

/// How the provider reaches AWS.
#[derive(Debug, Clone)]
pub struct AwsOptions {
    /// Endpoint override for every service (tests, private endpoints).
    pub endpoint: Option<String>,
    /// Static credentials (access key, secret); the default chain otherwise.
    pub static_credentials: Option<(String, String)>,
    /// SQS queue URL of the EventBridge rule for interruption events.
    pub interruption_queue: Option<String>,
    /// Attempts per call, the first included.
    pub max_attempts: u32,
    /// Backoff before the first retry (doubles, with jitter).
    pub initial_backoff: Duration,
    /// How long listed instance types, zones and spot prices are reused.
    pub catalog_ttl: Duration,
    /// How long the selected capacity reservations are reused; launches
    /// into one count against the reused figure meanwhile.
    pub reservation_ttl: Duration,
}

impl Default for AwsOptions {
    fn default() -> Self {
        AwsOptions {
            endpoint: None,
            static_credentials: None,
            interruption_queue: None,
            max_attempts: 5,
            initial_backoff: Duration::from_millis(200),
            catalog_ttl: Duration::from_secs(600),
            reservation_ttl: Duration::from_secs(60),
        }
    }
}

/// EC2, SQS, EKS and SSM clients for one region.
#[derive(Debug, Clone)]
pub struct Clients {
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
    /// EKS (`DescribeCluster`).
    pub eks: aws_sdk_eks::Client,
    /// SSM (`GetParameter`, the public AMI parameters).
    pub ssm: aws_sdk_ssm::Client,
}

/// Builds the clients.
pub async fn connect(region: &str, options: &AwsOptions) -> Clients {
    let retry = RetryConfig::standard()
        .with_max_attempts(options.max_attempts.max(1))
        .with_initial_backoff(options.initial_backoff);
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .retry_config(retry);
    if let Some(url) = &options.endpoint {
        loader = loader.endpoint_url(url);
    }
    if let Some((key, secret)) = &options.static_credentials {
        loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
            key.clone(),
            secret.clone(),
            None,
            None,
            "muster-static",
        ));
    }
    let config = loader.load().await;
    Clients {
        ec2: aws_sdk_ec2::Client::new(&config),
        sqs: aws_sdk_sqs::Client::new(&config),
        eks: aws_sdk_eks::Client::new(&config),
        ssm: aws_sdk_ssm::Client::new(&config),
    }
}

/// What a failed SDK call says.
pub fn failure<E>(e: &SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    Failure {
        code: e.code().map(String::from),
        message: e
            .message()
            .map(String::from)
            .unwrap_or_else(|| aws_sdk_ec2::error::DisplayErrorContext(e).to_string()),
        status: e.raw_response().map(|r| r.status().as_u16()),
    }
}
