//! Custom resource types of muster (`muster.dev/v1alpha1`).
