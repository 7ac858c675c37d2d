//! A simulated cloud.
