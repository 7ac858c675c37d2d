//! Prices in whole micro-dollars, so sums and comparisons are exact.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// US dollars, held as micro-dollars. Used for prices per hour and for costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Price(pub u64);

impl Price {
    /// Zero dollars.
    pub const ZERO: Price = Price(0);

    /// From a dollar amount, rounded to the nearest micro-dollar; negative
    /// and non-finite amounts are `None`.
    pub fn from_usd(usd: f64) -> Option<Price> {
        if usd.is_finite() && (0.0..1e12).contains(&usd) {
            Some(Price((usd * 1e6).round() as u64))
        } else {
            None
        }
    }

    /// The amount in dollars.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self × n`, saturating.
    pub fn times(self, n: u64) -> Price {
        Price(self.0.saturating_mul(n))
    }

    /// The cost of running at this hourly price for `secs` seconds, rounded up.
    pub fn for_secs(self, secs: u64) -> Price {
        Price(
            (u128::from(self.0) * u128::from(secs))
                .div_ceil(3600)
                .min(u128::from(u64::MAX)) as u64,
        )
    }
}

impl Add for Price {
    type Output = Price;
    fn add(self, o: Price) -> Price {
        Price(self.0.saturating_add(o.0))
    }
}

impl AddAssign for Price {
    fn add_assign(&mut self, o: Price) {
        self.0 = self.0.saturating_add(o.0);
    }
}

impl Sum for Price {
    fn sum<I: Iterator<Item = Price>>(iter: I) -> Price {
        iter.fold(Price::ZERO, Add::add)
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${:.3}", self.usd())
    }
}

impl Serialize for Price {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Price;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative dollar amount such as 21.96")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Price, E> {
                Price::from_usd(v).ok_or_else(|| E::custom(format!("invalid price {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Price, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Price, E> {
                self.visit_f64(v as f64)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Price, E> {
                let trimmed = v.trim().trim_start_matches('$');
                trimmed
                    .parse::<f64>()
                    .ok()
                    .and_then(Price::from_usd)
                    .ok_or_else(|| E::custom(format!("invalid price {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices() {
        assert_eq!(Price::from_usd(21.96), Some(Price(21_960_000)));
        assert_eq!(Price::from_usd(-1.0), None);
        assert_eq!(Price::from_usd(f64::NAN), None);
        assert_eq!(Price(3_600_000).for_secs(1), Price(1000));
        assert_eq!(Price(1).for_secs(1), Price(1));
        assert_eq!(Price(21_960_000).to_string(), "$21.960");
        let p: Price = serde_json::from_str("\"$1.5\"").expect("str");
        assert_eq!(p, Price(1_500_000));
    }
}
