//! Planner time: instants and durations in whole seconds.
//!
//! The planner never reads a clock; drivers pass `now` in. [`Time`] is seconds
//! since an epoch the driver chooses (the Unix epoch in the controller, the
//! start of the run in the simulator). [`Dur`] reads `90`, `90s`, `10m`,
//! `1h30m` or `500ms` (rounded up to a second).

use std::fmt;
use std::ops::{Add, Sub};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant, in seconds since the driver's epoch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(pub i64);

/// A span of time in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub u64);

impl Dur {
    /// `n` seconds.
    pub const fn secs(n: u64) -> Dur {
        Dur(n)
    }
    /// `n` minutes.
    pub const fn mins(n: u64) -> Dur {
        Dur(n * 60)
    }
    /// `n` hours.
    pub const fn hours(n: u64) -> Dur {
        Dur(n * 3600)
    }
    /// Seconds.
    pub const fn as_secs(self) -> u64 {
        self.0
    }
    /// Parses `90`, `90s`, `10m`, `1h30m`, `500ms`.
    pub fn parse(input: &str) -> Result<Dur, DurError> {
        parse_dur(input)
    }
}

impl Time {
    /// Seconds from `earlier` to `self`, zero when `earlier` is later.
    pub fn since(self, earlier: Time) -> Dur {
        Dur(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl Add<Dur> for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0.saturating_add(d.0))
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(
            self.0
                .saturating_add(i64::try_from(d.0).unwrap_or(i64::MAX)),
        )
    }
}

impl Sub<Dur> for Time {
    type Output = Time;
    fn sub(self, d: Dur) -> Time {
        Time(
            self.0
                .saturating_sub(i64::try_from(d.0).unwrap_or(i64::MAX)),
        )
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}s", self.0)
    }
}

/// Why a string is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {detail} (examples: 90s, 10m, 1h30m)")]
pub struct DurError {
    /// The whole input.
    pub input: String,
    /// What is wrong.
    pub detail: &'static str,
}

fn parse_dur(input: &str) -> Result<Dur, DurError> {
    let err = |detail| DurError {
        input: input.to_string(),
        detail,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("must not be empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(Dur).map_err(|_| err("too large"));
    }
    let mut millis: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| err("a number needs a unit (ms, s, m, h, d)"))?;
        if n_end == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..n_end].parse().map_err(|_| err("malformed number"))?;
        let after = &rest[n_end..];
        let u_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit_ms: f64 = match &after[..u_end] {
            "ms" => 1.0,
            "s" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return Err(err("unknown unit (expected ms, s, m, h or d)")),
        };
        let part = number * unit_ms;
        if !part.is_finite() || part > 1e18 {
            return Err(err("too large"));
        }
        millis += part.ceil() as u128;
        rest = &after[u_end..];
    }
    let secs = millis.div_ceil(1000);
    u64::try_from(secs).map(Dur).map_err(|_| err("too large"))
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (h, m, s) = (self.0 / 3600, self.0 / 60 % 60, self.0 % 60);
        if self.0 == 0 {
            return f.write_str("0s");
        }
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 90s, 10m or 1h30m, or whole seconds")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_dur(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                Ok(Dur(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                u64::try_from(v)
                    .map(Dur)
                    .map_err(|_| E::custom(format!("invalid duration {v}: must not be negative")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        for (input, secs) in [
            ("0", 0),
            ("90", 90),
            ("90s", 90),
            ("10m", 600),
            ("1h30m", 5400),
            ("1.5h", 5400),
            ("500ms", 1),
            ("1d", 86400),
            ("2m30s", 150),
        ] {
            assert_eq!(Dur::parse(input), Ok(Dur(secs)), "{input}");
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for (input, want) in [
            ("", "must not be empty"),
            ("10x", "unknown unit"),
            ("m", "expected a number"),
            ("1h30", "needs a unit"),
            ("-5s", "expected a number"),
        ] {
            let e = Dur::parse(input).expect_err(input).to_string();
            assert!(e.contains(want), "{input}: {e}");
        }
    }

    #[test]
    fn display_and_arithmetic() {
        assert_eq!(Dur(5400).to_string(), "1h30m");
        assert_eq!(Dur(61).to_string(), "1m1s");
        assert_eq!(Time(100) + Dur(20), Time(120));
        assert_eq!(Time(100).since(Time(40)), Dur(60));
        assert_eq!(Time(40).since(Time(100)), Dur(0));
    }
}
