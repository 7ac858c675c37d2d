//! Policies: who decides. [`muster::MusterPolicy`] takes every decision
//! from the real planner; the baselines ([`crate::baselines`]) model other
//! systems. All of them act on the same [`crate::world::World`] mechanics.

pub mod lifecycle;
pub mod muster;

use crate::events::Event;
use crate::world::World;

/// A decision-maker plugged into the event loop.
pub trait Policy {
    /// Short name (`muster`, `default-ca`, `kueue-karpenter`).
    fn name(&self) -> &'static str;
    /// Exactly what the policy assumes, for the report.
    fn assumptions(&self) -> String;
    /// Called once before the first event (schedule timers here).
    fn start(&mut self, world: &mut World);
    /// Called after the world applied an event's mechanics.
    fn on_event(&mut self, world: &mut World, event: Event);
    /// Wall-clock milliseconds of each planner call (muster only).
    fn planner_ms(&self) -> &[f64] {
        &[]
    }
    /// Extra counters for the report (name, value).
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Problems met carrying out decisions (plan-application errors).
    fn messages(&self) -> Vec<String> {
        Vec::new()
    }
}
