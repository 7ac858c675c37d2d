//! What existing capacity takes of a gang's pods.
//!
//! A [`Take`] (pods of one group on one node) is what placing a gang
//! decides (`placement.rs`) and the part of a launch that existing capacity
//! holds (`provisioning.rs`). [`ExistingParts`] are a launch search's takes,
//! and [`KnownExisting`] what a re-plan's check of an earlier launch found
//! of them: the working state keeps it for the try computed right after.

use std::collections::BTreeMap;

use crate::model::GpuModel;

/// `n` pods of group `group` on node `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Take {
    pub node: usize,
    pub group: usize,
    pub n: u32,
}

/// What existing capacity (Ready nodes, and nodes in flight the gang may
/// use) takes of a launch's pods before new nodes are bought: one packing
/// for `Any`, one per zone of the domains for `SameZone`, nothing for
/// `SameNode` and `SamePlacementGroup` (new nodes only). Each part is the
/// takes and the pods left per group.
pub(crate) struct ExistingParts {
    /// The part of an `Any` launch.
    pub(crate) any: Option<(Vec<Take>, Vec<u32>)>,
    /// The parts of a `SameZone` launch, by zone.
    pub(crate) zones: BTreeMap<String, (Vec<Take>, Vec<u32>)>,
}

impl ExistingParts {
    /// The parts as numbers (zones by their index in the domains' zones,
    /// in order): equal encodings are equal parts.
    pub(crate) fn encode(&self) -> Vec<u32> {
        let mut out = Vec::new();
        if let Some(p) = &self.any {
            encode_part(&mut out, u32::MAX, p);
        }
        for (i, p) in self.zones.values().enumerate() {
            encode_part(&mut out, i as u32, p);
        }
        out
    }
}

/// Appends one part, tagged, to an encoding ([`ExistingParts::encode`]).
fn encode_part(out: &mut Vec<u32>, tag: u32, (takes, left): &(Vec<Take>, Vec<u32>)) {
    out.extend([tag, takes.len() as u32, left.len() as u32]);
    for t in takes {
        out.extend([t.node as u32, t.group as u32, t.n]);
    }
    out.extend_from_slice(left);
}

/// A failed check's findings (`provisioning::reads_same_nodes`), for the
/// try computed right after it on the same state: `place` found no room
/// for the whole gang, and existing capacity gives its launch search
/// `parts`.
pub(crate) struct KnownExisting {
    pub(crate) gang: usize,
    pub(crate) counts: Vec<u32>,
    pub(crate) excluded: Vec<GpuModel>,
    pub(crate) parts: ExistingParts,
}

impl KnownExisting {
    /// True when it was found for gang `gi` at `counts` with `excluded`.
    pub fn is_for(&self, gi: usize, counts: &[u32], excluded: &[GpuModel]) -> bool {
        self.gang == gi && self.counts == counts && self.excluded == excluded
    }
}
