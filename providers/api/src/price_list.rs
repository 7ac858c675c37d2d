//! The dated public price lists muster ships with, in one place: the AWS
//! provider's on-demand table, the GCP provider's machine table and the
//! simulated cloud's built-in catalog all read these, so a price cannot
//! differ between the simulator and a real cloud's provider (a test in the
//! simulated cloud checks its catalog against them). Operators override
//! entries in the providers; spot prices on AWS come from
//! `DescribeSpotPriceHistory`, never from here.

/// The date of the AWS figures (us-east-1 Linux on-demand list prices, as
/// generated into Karpenter's AWS provider pricing table that day).
pub const AWS_TABLE_DATE: &str = "2026-07-20";

/// AWS (instance type, on-demand USD per hour) in us-east-1.
pub const AWS_ON_DEMAND: &[(&str, f64)] = &[
    ("g4dn.xlarge", 0.526),
    ("g4dn.2xlarge", 0.752),
    ("g4dn.4xlarge", 1.204),
    ("g4dn.8xlarge", 2.176),
    ("g4dn.12xlarge", 3.912),
    ("g4dn.16xlarge", 4.352),
    ("g4dn.metal", 7.824),
    ("g5.xlarge", 1.006),
    ("g5.2xlarge", 1.212),
    ("g5.4xlarge", 1.624),
    ("g5.8xlarge", 2.448),
    ("g5.12xlarge", 5.672),
    ("g5.16xlarge", 4.096),
    ("g5.24xlarge", 8.144),
    ("g5.48xlarge", 16.288),
    ("g6.xlarge", 0.8048),
    ("g6.2xlarge", 0.9776),
    ("g6.4xlarge", 1.3232),
    ("g6.8xlarge", 2.0144),
    ("g6.12xlarge", 4.6016),
    ("g6.16xlarge", 3.3968),
    ("g6.24xlarge", 6.6752),
    ("g6.48xlarge", 13.3504),
    ("g6e.xlarge", 1.861),
    ("g6e.2xlarge", 2.24208),
    ("g6e.4xlarge", 3.00424),
    ("g6e.8xlarge", 4.52856),
    ("g6e.12xlarge", 10.49264),
    ("g6e.16xlarge", 7.57719),
    ("g6e.24xlarge", 15.06559),
    ("g6e.48xlarge", 30.13118),
    ("p3.2xlarge", 3.06),
    ("p3.8xlarge", 12.24),
    ("p3dn.24xlarge", 31.212),
    ("p4d.24xlarge", 21.957642),
    ("p4de.24xlarge", 27.44705),
    ("p5.4xlarge", 6.88),
    ("p5.48xlarge", 55.04),
    ("p5en.48xlarge", 63.296),
    ("p6-b200.48xlarge", 113.9328),
];

/// The date of the GCP figures (us-central1 whole-machine prices, GPUs
/// included, as published in the price file of the GCP Karpenter provider
/// that day).
pub const GCP_TABLE_DATE: &str = "2026-08-03";

/// GCP machine types with built-in GPUs in us-central1: (type, on-demand,
/// spot) USD per hour. `a3-megagpu-8g` is not sold in us-central1 and is
/// not listed.
pub const GCP_MACHINES: &[(&str, f64, f64)] = &[
    ("a2-highgpu-1g", 3.673385, 1.92802),
    ("a2-highgpu-2g", 7.34677, 3.85604),
    ("a2-highgpu-4g", 14.69354, 7.71208),
    ("a2-highgpu-8g", 29.38708, 15.42416),
    ("a2-megagpu-16g", 55.739504, 29.25568),
    ("a2-ultragpu-1g", 5.068798, 2.759546),
    ("a2-ultragpu-2g", 10.137596, 5.519093),
    ("a2-ultragpu-4g", 20.275192, 11.038185),
    ("a2-ultragpu-8g", 40.550383, 22.07637),
    ("a3-highgpu-1g", 11.06125, 6.326193),
    ("a3-highgpu-2g", 22.1225, 12.652385),
    ("a3-highgpu-4g", 44.245, 25.30477),
    ("a3-highgpu-8g", 88.49, 50.609541),
    ("g2-standard-4", 0.706832, 0.397336),
    ("g2-standard-8", 0.853624, 0.479872),
    ("g2-standard-12", 1.000416, 0.562408),
    ("g2-standard-16", 1.147208, 0.644944),
    ("g2-standard-24", 2.000833, 1.124816),
    ("g2-standard-32", 1.734376, 0.975088),
    ("g2-standard-48", 4.001665, 2.249632),
    ("g2-standard-96", 8.00333, 4.499264),
];

/// The AWS on-demand price of an instance type, if listed.
pub fn aws_on_demand(instance_type: &str) -> Option<f64> {
    AWS_ON_DEMAND
        .iter()
        .find(|(t, _)| *t == instance_type)
        .map(|(_, p)| *p)
}

/// The GCP (on-demand, spot) prices of a machine type, if listed.
pub fn gcp_machine(machine_type: &str) -> Option<(f64, f64)> {
    GCP_MACHINES
        .iter()
        .find(|(t, _, _)| *t == machine_type)
        .map(|(_, od, spot)| (*od, *spot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_unique_positive_and_spot_below_on_demand() {
        let mut names: Vec<&str> = AWS_ON_DEMAND.iter().map(|(t, _)| *t).collect();
        names.extend(GCP_MACHINES.iter().map(|(t, _, _)| *t));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "no type listed twice");
        assert!(AWS_ON_DEMAND.iter().all(|(_, p)| *p > 0.0));
        for (t, od, spot) in GCP_MACHINES {
            assert!(*spot > 0.0 && spot < od, "{t}: {spot} vs {od}");
        }
        assert_eq!(gcp_machine("a2-highgpu-8g"), Some((29.38708, 15.42416)));
        assert_eq!(aws_on_demand("p4d.24xlarge"), Some(21.957642));
        assert_eq!(aws_on_demand("m5.large"), None);
    }
}
