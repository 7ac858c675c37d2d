//! IAM policy evaluation for the policy test.

pub mod calls;
pub mod policy;
