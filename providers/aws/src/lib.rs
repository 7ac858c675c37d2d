//! Amazon EC2 for muster: the `CloudProvider` of AWS NodeClasses.
//!
//! - [`client`]: the EC2 and SQS clients (default credential chain, region,
//!   endpoint override, bounded retries with backoff and jitter).
//! - [`catalog`] and [`shapes`]: instance types, their zones and spot prices
//!   → offerings; [`prices`]: the dated on-demand price table.
//! - [`resolve`]: subnets, security groups and AMIs from selector terms.
//! - [`instances`]: launch (`RunInstances` with the idempotency key as
//!   `ClientToken`), describe, list by cluster tag, terminate; [`bootstrap`]:
//!   tags and user data.
//! - [`queue`] and [`events`]: interruption events from SQS.
//! - [`errors`]: EC2 error codes → typed errors.
//! - [`provider`]: [`AwsProvider`], which ties them together.
//!
//! Calls per launch: one `RunInstances`. NodeClass resolution
//! (`DescribeSubnets`, `DescribeSecurityGroups`, `DescribeImages`, one per
//! selector term) and the catalog (`DescribeInstanceTypes`,
//! `DescribeInstanceTypeOfferings`, `DescribeSpotPriceHistory`) are cached
//! for [`AwsOptions::catalog_ttl`].

pub mod bootstrap;
pub mod catalog;
pub mod client;
pub mod errors;
pub mod events;
pub mod instances;
#[cfg(feature = "test-support")]
pub mod moto;
pub mod prices;
pub mod provider;
pub mod queue;
pub mod resolve;
pub mod shapes;

pub use client::AwsOptions;
pub use provider::{AwsProvider, SetupError};
