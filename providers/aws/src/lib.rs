//! Amazon EC2 for muster: the `CloudProvider` of AWS NodeClasses.
//!
//! - [`client`]: the EC2 and SQS clients (default credential chain, region,
//!   endpoint override, bounded retries with backoff and jitter).
//! - [`catalog`] and [`shapes`]: instance types, their zones and spot prices
//!   → offerings; [`prices`]: the dated on-demand price table.
//! - [`resolve`]: subnets, security groups and AMIs from selector terms;
//!   [`alias`]: AMI aliases through the public SSM parameters.
//! - [`eks`]: the EKS cluster the nodes join (`DescribeCluster`).
//! - [`instances`]: launch (`RunInstances` with the idempotency key as
//!   `ClientToken`), describe, list by cluster tag, terminate; [`bootstrap`]:
//!   tags and user data by image family ([`nodeadm`] MIME for AL2023,
//!   [`bottlerocket`] TOML).
//! - [`placement_groups`]: one EC2 cluster placement group per gang launch
//!   that needs one, made before the launch and deleted once unused.
//! - [`reservations`]: the capacity reservations the NodeClass selects
//!   (`DescribeCapacityReservations`), offered as `reserved` capacity.
//! - [`topology`]: instances' network nodes (`DescribeInstanceTopology`).
//! - [`queue`] and [`events`]: interruption events from SQS.
//! - [`errors`]: EC2 error codes → typed errors.
//! - [`provider`]: [`AwsProvider`], which ties them together.
//!
//! Calls per launch: one `RunInstances` (and `CreatePlacementGroup` first
//! for a gang in a placement group; `DescribeInstanceTypes` for a type the
//! catalog has not listed; `DescribeCapacityReservations` for a reserved
//! offering whose reservation the last reading lacks). NodeClass resolution
//! (`DescribeSubnets`, `DescribeSecurityGroups`, `DescribeImages` one per
//! selector term, or `GetParameter` per architecture for an alias; EKS
//! `DescribeCluster` when the NodeClass names a cluster) and the catalog (`DescribeInstanceTypes`,
//! `DescribeInstanceTypeOfferings`, `DescribeSpotPriceHistory`) are cached
//! for [`AwsOptions::catalog_ttl`]; the capacity reservations
//! (`DescribeCapacityReservations`, one call for the id terms and one per
//! tags term, only for pools that take `reserved` capacity) for
//! [`AwsOptions::reservation_ttl`]. `describe` adds one
//! `DescribeInstanceTopology` for a running instance of a type that has a
//! topology.

pub mod alias;
pub mod bootstrap;
pub mod bottlerocket;
pub mod catalog;
pub mod client;
pub mod eks;
pub mod errors;
pub mod events;
pub mod instances;
#[cfg(feature = "test-support")]
pub mod moto;
pub mod nodeadm;
pub mod placement_groups;
pub mod prices;
pub mod provider;
pub mod queue;
pub mod reservations;
pub mod resolve;
pub mod shapes;
pub mod topology;

pub use client::AwsOptions;
pub use provider::{AwsProvider, SetupError};
