//! Amazon EC2 for muster.
