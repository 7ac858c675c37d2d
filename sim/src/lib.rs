//! Discrete-event simulator of muster and of the usual stacks.
