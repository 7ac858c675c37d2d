//! Custom resource types of muster (`muster.dev/v1alpha1`).

pub mod common;
pub mod nodeclass;
