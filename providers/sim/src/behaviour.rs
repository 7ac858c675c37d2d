//! How the simulated cloud behaves: boot times per instance family,
//! insufficient-capacity errors (a probability, a time schedule or a
//! capacity limit per offering pattern) and spot interruption rates.
//!
//! Capacity errors are a property of the *world*, not of a caller: an
//! offering with `capacityErrorProbability: p` is out of capacity a fraction
//! `p` of the time, in outages of `outageMean` on average, drawn from the
//! seed and the offering's identity. Every policy replayed with the same seed
//! meets the very same outages.

use muster_planner::{CapacityType, Dur, OfferingKey, Time};
use serde::{Deserialize, Serialize};

use crate::reservations::{NetworkLayout, Reservation};
use crate::rng::Rng;

/// A time window `[from, to)` in seconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Window {
    /// Start (inclusive).
    pub from: Dur,
    /// End (exclusive).
    pub to: Dur,
}

/// A range of boot-to-Ready times; actual boots are uniform in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootRange {
    /// Fastest boot.
    pub min: Dur,
    /// Slowest boot.
    pub max: Dur,
}

/// Behaviour of the offerings whose key matches `match`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OfferingRule {
    /// `instanceType[/zone[/capacityType]]`, each part a glob with `*`
    /// (`p4d.*/us-east-1a/spot`, `a3-*`, `*/*/spot`).
    #[serde(rename = "match")]
    pub pattern: String,
    /// Fraction of time the offering is out of capacity (0–1).
    #[serde(default)]
    pub capacity_error_probability: Option<f64>,
    /// Mean length of one capacity outage.
    #[serde(default)]
    pub outage_mean: Option<Dur>,
    /// Fixed windows during which every launch fails.
    #[serde(default)]
    pub unavailable: Vec<Window>,
    /// Most machines of the offering alive at once; launches beyond fail.
    #[serde(default)]
    pub capacity_limit: Option<u32>,
    /// Interruptions per machine-hour (spot offerings only).
    #[serde(default)]
    pub interruption_rate_per_hour: Option<f64>,
    /// Boot-to-Ready range.
    #[serde(default)]
    pub boot: Option<BootRange>,
}

/// The cloud's behaviour: defaults and rules per offering pattern. Later
/// rules override what earlier ones set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudBehaviour {
    /// Interruptions per machine-hour of every spot offering without a rule.
    #[serde(default = "default_spot_rate")]
    pub spot_interruption_rate_per_hour: f64,
    /// Default mean outage length.
    #[serde(default = "default_outage_mean")]
    pub outage_mean: Dur,
    /// Rules, applied in order.
    #[serde(default)]
    pub rules: Vec<OfferingRule>,
    /// Capacity reservations and Capacity Blocks: one `reserved` offering
    /// each (rules do not apply to them: a reservation's capacity is held).
    #[serde(default)]
    pub reservations: Vec<Reservation>,
    /// Blocks of racks the machines land in; none: machines say nothing of
    /// their network.
    #[serde(default)]
    pub topology: Option<NetworkLayout>,
}

/// Interruptions per spot machine-hour by default: AWS's Spot Instance
/// Advisor puts the most interrupted instance types in its "> 20 %" band
/// (more than one in five instances reclaimed over the trailing month);
/// 20 % over a 730-hour month is about 0.0003 per machine-hour.
pub const DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR: f64 = 0.0003;

fn default_spot_rate() -> f64 {
    DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR
}
fn default_outage_mean() -> Dur {
    Dur::mins(20)
}

impl Default for CloudBehaviour {
    fn default() -> Self {
        CloudBehaviour {
            spot_interruption_rate_per_hour: default_spot_rate(),
            outage_mean: default_outage_mean(),
            rules: Vec::new(),
            reservations: Vec::new(),
            topology: None,
        }
    }
}

/// Why a behaviour is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BehaviourError {
    /// A probability outside 0–1.
    #[error("rule {index} ({pattern}): capacityErrorProbability {value} must be in [0, 1)")]
    Probability {
        /// Rule index.
        index: usize,
        /// Its pattern.
        pattern: String,
        /// The value.
        value: f64,
    },
    /// A negative or non-finite rate.
    #[error(
        "rule {index} ({pattern}): interruptionRatePerHour {value} must be a finite number ≥ 0"
    )]
    Rate {
        /// Rule index (or `usize::MAX` for the default).
        index: usize,
        /// Its pattern.
        pattern: String,
        /// The value.
        value: f64,
    },
    /// A reservation or the topology is wrong.
    #[error("{0}")]
    Capacity(String),
    /// Boot range or window reversed.
    #[error("rule {index} ({pattern}): {what}")]
    Range {
        /// Rule index.
        index: usize,
        /// Its pattern.
        pattern: String,
        /// What is wrong.
        what: String,
    },
}

impl CloudBehaviour {
    /// Checks values.
    pub fn validate(&self) -> Result<(), BehaviourError> {
        if !self.spot_interruption_rate_per_hour.is_finite()
            || self.spot_interruption_rate_per_hour < 0.0
        {
            return Err(BehaviourError::Rate {
                index: usize::MAX,
                pattern: "spotInterruptionRatePerHour".into(),
                value: self.spot_interruption_rate_per_hour,
            });
        }
        for (index, r) in self.rules.iter().enumerate() {
            let pattern = r.pattern.clone();
            if let Some(p) = r.capacity_error_probability
                && !(0.0..1.0).contains(&p)
            {
                return Err(BehaviourError::Probability {
                    index,
                    pattern,
                    value: p,
                });
            }
            if let Some(v) = r.interruption_rate_per_hour
                && (!v.is_finite() || v < 0.0)
            {
                return Err(BehaviourError::Rate {
                    index,
                    pattern,
                    value: v,
                });
            }
            if let Some(b) = r.boot
                && (b.min > b.max || b.min.as_secs() == 0)
            {
                return Err(BehaviourError::Range {
                    index,
                    pattern,
                    what: format!("boot min {} must be > 0 and ≤ max {}", b.min, b.max),
                });
            }
            for w in &r.unavailable {
                if w.from >= w.to {
                    return Err(BehaviourError::Range {
                        index,
                        pattern: pattern.clone(),
                        what: format!(
                            "unavailable window from {} must be before to {}",
                            w.from, w.to
                        ),
                    });
                }
            }
            if r.outage_mean.is_some_and(|d| d.as_secs() == 0) {
                return Err(BehaviourError::Range {
                    index,
                    pattern,
                    what: "outageMean must be > 0".into(),
                });
            }
        }
        let mut ids: Vec<&str> = Vec::new();
        for (i, r) in self.reservations.iter().enumerate() {
            r.validate()
                .map_err(|e| BehaviourError::Capacity(format!("reservations[{i}]: {e}")))?;
            if ids.contains(&r.id.as_str()) {
                return Err(BehaviourError::Capacity(format!(
                    "reservations[{i}]: id {} listed twice",
                    r.id
                )));
            }
            ids.push(&r.id);
        }
        if let Some(t) = &self.topology {
            t.validate()
                .map_err(|e| BehaviourError::Capacity(format!("topology: {e}")))?;
        }
        Ok(())
    }

    /// The behaviour of one offering after every matching rule.
    pub fn resolve(&self, key: &OfferingKey) -> OfferingBehaviour {
        let mut b = OfferingBehaviour {
            capacity_error_probability: 0.0,
            outage_mean: self.outage_mean,
            unavailable: Vec::new(),
            capacity_limit: None,
            interruption_rate_per_hour: match key.capacity_type {
                CapacityType::Spot => self.spot_interruption_rate_per_hour,
                CapacityType::OnDemand | CapacityType::Reserved | CapacityType::FlexStart => 0.0,
            },
            boot: {
                let (min, max) = default_boot_range(&key.instance_type);
                BootRange { min, max }
            },
        };
        for r in &self.rules {
            if !pattern_matches(&r.pattern, key) {
                continue;
            }
            if let Some(p) = r.capacity_error_probability {
                b.capacity_error_probability = p;
            }
            if let Some(m) = r.outage_mean {
                b.outage_mean = m;
            }
            b.unavailable.extend(r.unavailable.iter().copied());
            if let Some(l) = r.capacity_limit {
                b.capacity_limit = Some(l);
            }
            if let Some(v) = r.interruption_rate_per_hour
                && key.capacity_type == CapacityType::Spot
            {
                b.interruption_rate_per_hour = v;
            }
            if let Some(boot) = r.boot {
                b.boot = boot;
            }
        }
        b
    }
}

/// The resolved behaviour of one offering.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferingBehaviour {
    /// Fraction of time out of capacity.
    pub capacity_error_probability: f64,
    /// Mean outage length.
    pub outage_mean: Dur,
    /// Fixed outage windows.
    pub unavailable: Vec<Window>,
    /// Most machines alive at once.
    pub capacity_limit: Option<u32>,
    /// Interruptions per machine-hour.
    pub interruption_rate_per_hour: f64,
    /// Boot range.
    pub boot: BootRange,
}

/// Default boot-to-Ready range of an instance family: small GPU shapes
/// 2–5 min, A100 machines 4–8 min, H100 machines 6–12 min.
pub fn default_boot_range(instance_type: &str) -> (Dur, Dur) {
    let family = muster_planner::model::offering::family_of(instance_type);
    match family {
        "p5" | "p5e" | "p5en" | "a3-highgpu" | "a3-megagpu" => (Dur::mins(6), Dur::mins(12)),
        "p4d" | "p4de" | "p3dn" | "a2-highgpu" | "a2-ultragpu" | "a2-megagpu" => {
            (Dur::mins(4), Dur::mins(8))
        }
        _ => (Dur::mins(2), Dur::mins(5)),
    }
}

/// Glob match with `*` (any run of characters).
pub fn glob(pattern: &str, text: &str) -> bool {
    let p = pattern.as_bytes();
    let t = text.as_bytes();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != b'*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = ti;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// True when `instanceType[/zone[/capacityType]]` matches the key.
pub fn pattern_matches(pattern: &str, key: &OfferingKey) -> bool {
    let mut parts = pattern.split('/');
    let ty = parts.next().unwrap_or("*");
    let zone = parts.next().unwrap_or("*");
    let cap = parts.next().unwrap_or("*");
    glob(ty, &key.instance_type) && glob(zone, &key.zone) && glob(cap, key.capacity_type.as_str())
}

/// The outage timeline of one offering, generated lazily from its stream.
#[derive(Debug, Clone)]
pub struct Outages {
    rng: Rng,
    p: f64,
    mean_down: f64,
    /// Generated outages `[start, end)`, in order.
    spans: Vec<(i64, i64)>,
    /// Time up to which the timeline is generated.
    generated_to: i64,
    fixed: Vec<Window>,
}

impl Outages {
    /// The timeline of an offering with behaviour `b`, drawn from `rng`.
    pub fn new(rng: Rng, b: &OfferingBehaviour) -> Outages {
        Outages {
            rng,
            p: b.capacity_error_probability,
            mean_down: b.outage_mean.as_secs().max(1) as f64,
            spans: Vec::new(),
            generated_to: 0,
            fixed: b.unavailable.clone(),
        }
    }

    /// True when the offering is out of capacity at `t`.
    pub fn down_at(&mut self, t: Time) -> bool {
        let secs = t.0;
        if self
            .fixed
            .iter()
            .any(|w| secs >= w.from.as_secs() as i64 && secs < w.to.as_secs() as i64)
        {
            return true;
        }
        if self.p <= 0.0 {
            return false;
        }
        let mean_up = self.mean_down * (1.0 - self.p) / self.p;
        while self.generated_to <= secs {
            let up = self.rng.exp(mean_up).ceil() as i64;
            let down = self.rng.exp(self.mean_down).ceil().max(1.0) as i64;
            let start = self.generated_to + up;
            self.spans.push((start, start + down));
            self.generated_to = start + down;
        }
        let i = self.spans.partition_point(|(_, end)| *end <= secs);
        self.spans
            .get(i)
            .is_some_and(|(s, e)| *s <= secs && secs < *e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::Provider;

    fn key(ty: &str, zone: &str, cap: CapacityType) -> OfferingKey {
        OfferingKey {
            provider: Provider::Aws,
            zone: zone.into(),
            instance_type: ty.into(),
            capacity_type: cap,
            reservation: None,
        }
    }

    #[test]
    fn globs_and_patterns() {
        assert!(glob("p4d.*", "p4d.24xlarge"));
        assert!(!glob("p4d.*", "p4de.24xlarge"));
        assert!(glob("*", ""));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c*f", "abcde"));
        let k = key("p4d.24xlarge", "us-east-1a", CapacityType::Spot);
        assert!(pattern_matches("p4d.*", &k));
        assert!(pattern_matches("*/us-east-1a/spot", &k));
        assert!(!pattern_matches("*/us-east-1b", &k));
        assert!(!pattern_matches("*/*/on-demand", &k));
    }

    #[test]
    fn rules_override_in_order() {
        let b = CloudBehaviour {
            rules: vec![
                OfferingRule {
                    pattern: "p4d.*".into(),
                    capacity_error_probability: Some(0.2),
                    capacity_limit: Some(3),
                    ..Default::default()
                },
                OfferingRule {
                    pattern: "*/us-east-1a".into(),
                    capacity_error_probability: Some(0.5),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        b.validate().expect("valid");
        let r = b.resolve(&key("p4d.24xlarge", "us-east-1a", CapacityType::OnDemand));
        assert_eq!(r.capacity_error_probability, 0.5);
        assert_eq!(r.capacity_limit, Some(3));
        assert_eq!(r.interruption_rate_per_hour, 0.0);
        let s = b.resolve(&key("g5.xlarge", "us-east-1b", CapacityType::Spot));
        assert_eq!(
            s.interruption_rate_per_hour,
            DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR
        );
        assert_eq!(s.boot.min, Dur::mins(2));
    }

    #[test]
    fn outage_fraction_matches_probability() {
        let b = OfferingBehaviour {
            capacity_error_probability: 0.25,
            outage_mean: Dur::mins(20),
            unavailable: vec![Window {
                from: Dur::secs(10),
                to: Dur::secs(20),
            }],
            capacity_limit: None,
            interruption_rate_per_hour: 0.0,
            boot: BootRange {
                min: Dur::mins(2),
                max: Dur::mins(5),
            },
        };
        let mut o = Outages::new(Rng::new(5), &b);
        assert!(o.down_at(Time(15)));
        let n = 200_000;
        let down = (0..n).filter(|i| o.down_at(Time(100 + i * 60))).count();
        let frac = down as f64 / n as f64;
        assert!((frac - 0.25).abs() < 0.03, "{frac}");
        let bad = CloudBehaviour {
            rules: vec![OfferingRule {
                pattern: "*".into(),
                capacity_error_probability: Some(1.5),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }
}
