//! The `muster plan -f` input: a [`PlanInput`] document in YAML (or JSON),
//! read with the path of any offending field in the error.

use muster_planner::PlanInput;

/// Reads a `PlanInput`, naming the path of any offending field.
pub fn parse(text: &str) -> Result<PlanInput, String> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            format!("{inner}")
        } else {
            format!("{path}: {inner}")
        }
    })
}
