//! Kubernetes resource quantities (`500m`, `64Gi`, `1.5`, `2e3`).
//!
//! A [`Quantity`] is stored exactly as thousandths of a unit ("milli-units"),
//! the finest grain any resource muster plans with needs. Values finer than a
//! milli-unit are rounded up, as Kubernetes does when it asks for a
//! `MilliValue`. The grammar is the one of `resource.Quantity` in
//! `k8s.io/apimachinery`:
//!
//! ```text
//! quantity  ::= sign? number suffix
//! number    ::= digits | digits '.' digits? | '.' digits
//! suffix    ::= '' | binarySI | decimalSI | ('e' | 'E') sign? digits
//! binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei
//! decimalSI ::= n | u | m | k | M | G | T | P | E
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a quantity. Every variant names the offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string was empty or only white space.
    #[error("invalid quantity \"\": a quantity must not be empty (examples: 500m, 64Gi, 1.5)")]
    Empty,
    /// The numeric part is missing or malformed.
    #[error("invalid quantity {input:?}: {detail} (examples: 500m, 64Gi, 1.5)")]
    BadNumber {
        /// The whole input.
        input: String,
        /// What is wrong with the number.
        detail: &'static str,
    },
    /// The suffix is not a known SI, binary or exponent suffix.
    #[error(
        "invalid quantity {input:?}: unknown suffix {suffix:?} (expected one of Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent such as e3)"
    )]
    BadSuffix {
        /// The whole input.
        input: String,
        /// The suffix that was not understood.
        suffix: String,
    },
    /// The value does not fit in the range muster plans with.
    #[error("invalid quantity {input:?}: value is too large")]
    TooLarge {
        /// The whole input.
        input: String,
    },
}

/// A resource quantity, held exactly in thousandths of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    millis: i64,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { millis: 0 };

    /// A quantity of `millis` thousandths of a unit.
    pub const fn from_millis(millis: i64) -> Self {
        Quantity { millis }
    }

    /// A quantity of whole units.
    pub const fn from_units(units: i64) -> Self {
        Quantity {
            millis: units.saturating_mul(1000),
        }
    }

    /// The value in thousandths of a unit (`500m` → 500, `2` → 2000).
    pub const fn millis(self) -> i64 {
        self.millis
    }

    /// The value in whole units, rounded up (`1500m` → 2). Memory in bytes,
    /// GPUs as a count.
    pub const fn units_ceil(self) -> i64 {
        let q = self.millis / 1000;
        if self.millis % 1000 > 0 { q + 1 } else { q }
    }

    /// True when the value is below zero.
    pub const fn is_negative(self) -> bool {
        self.millis < 0
    }

    /// Parses a Kubernetes quantity string.
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        parse(input)
    }
}

/// Largest number of significant digits accepted; keeps arithmetic in `i128`.
const MAX_DIGITS: usize = 30;

fn parse(input: &str) -> Result<Quantity, QuantityError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let bad = |detail| QuantityError::BadNumber {
        input: input.to_string(),
        detail,
    };
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &s[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &s[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(bad("expected a number before the suffix"));
    }
    let suffix = &s[i..];
    // Mantissa as an integer, and the power of ten it is scaled by.
    let digits: String = format!("{int_digits}{frac_digits}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > MAX_DIGITS {
        return Err(QuantityError::TooLarge {
            input: input.to_string(),
        });
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad("malformed digits"))?
    };
    let frac_len = i32::try_from(frac_digits.len()).map_err(|_| bad("too many digits"))?;
    let (pow10, pow1024) = suffix_scale(input, suffix)?;
    // millis = mantissa * 10^(pow10 - frac_len + 3) * 1024^pow1024
    let exp10 = pow10 - frac_len + 3;
    let too_large = || QuantityError::TooLarge {
        input: input.to_string(),
    };
    let mut value: i128 = mantissa;
    for _ in 0..pow1024 {
        value = value.checked_mul(1024).ok_or_else(too_large)?;
    }
    if exp10 >= 0 {
        for _ in 0..exp10 {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
    } else {
        let div = 10i128
            .checked_pow(exp10.unsigned_abs())
            .ok_or_else(too_large);
        value = match div {
            // Rounded up: any non-zero remainder counts as one more milli-unit.
            Ok(div) => (value + div - 1) / div,
            // Smaller than any representable milli-unit but not zero.
            Err(_) => i128::from(value > 0),
        };
    }
    if negative {
        value = -value;
    }
    let millis = i64::try_from(value).map_err(|_| too_large())?;
    Ok(Quantity { millis })
}

/// Powers of ten and of 1024 a suffix stands for.
fn suffix_scale(input: &str, suffix: &str) -> Result<(i32, u32), QuantityError> {
    let scale = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        _ => {
            let bad_suffix = || QuantityError::BadSuffix {
                input: input.to_string(),
                suffix: suffix.to_string(),
            };
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or_else(bad_suffix)?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 3
            {
                return Err(bad_suffix());
            }
            let exp: i32 = rest.parse().map_err(|_| bad_suffix())?;
            (exp, 0)
        }
    };
    Ok(scale)
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl fmt::Display for Quantity {
    /// Whole units without a suffix, otherwise milli-units with `m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.millis % 1000 == 0 {
            write!(f, "{}", self.millis / 1000)
        } else {
            write!(f, "{}m", self.millis)
        }
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.millis % 1000 == 0 {
            s.serialize_i64(self.millis / 1000)
        } else {
            s.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes quantity such as 500m, 64Gi or 1.5")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                parse(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                v.checked_mul(1000)
                    .map(Quantity::from_millis)
                    .ok_or_else(|| E::custom(format!("invalid quantity {v}: value is too large")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                i64::try_from(v)
                    .ok()
                    .and_then(|v| v.checked_mul(1000))
                    .map(Quantity::from_millis)
                    .ok_or_else(|| E::custom(format!("invalid quantity {v}: value is too large")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                // Go through the decimal text so 1.5 parses exactly like "1.5".
                parse(&format!("{v}")).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valid_quantities() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("1", 1000),
            ("500m", 500),
            ("1.5", 1500),
            ("+2", 2000),
            ("-2", -2000),
            (".5", 500),
            ("5.", 5000),
            ("0.001", 1),
            ("0.0001", 1),
            ("1n", 1),
            ("1u", 1),
            ("1500000u", 1500),
            ("1k", 1_000_000),
            ("1M", 1_000_000_000),
            ("1G", 1_000_000_000_000),
            ("1Ki", 1_024_000),
            ("1Mi", 1_048_576_000),
            ("64Gi", 68_719_476_736_000),
            ("1.5Gi", 1_610_612_736_000),
            ("1Ti", 1_099_511_627_776_000),
            ("2e3", 2_000_000),
            ("2E3", 2_000_000),
            ("2e-3", 2),
            ("2e+3", 2_000_000),
            ("  8  ", 8000),
            ("007", 7000),
            ("100m", 100),
            ("1.0001", 1001),
        ];
        for (input, millis) in cases {
            let q = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.millis(), *millis, "input {input}");
        }
    }

    #[test]
    fn rejects_bad_quantities_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "must not be empty"),
            ("   ", "must not be empty"),
            ("Gi", "expected a number"),
            ("-", "expected a number"),
            (".", "expected a number"),
            ("64Gx", "unknown suffix \"Gx\""),
            ("1.5.5", "unknown suffix \".5\""),
            ("1 Gi", "unknown suffix \" Gi\""),
            ("1e", "unknown suffix \"e\""),
            ("1e3.5", "unknown suffix \"e3.5\""),
            ("1ki", "unknown suffix \"ki\""),
            ("1KI", "unknown suffix \"KI\""),
            ("abc", "expected a number"),
            ("1e9999", "unknown suffix"),
            ("1Ei0", "unknown suffix"),
            ("99999999999999999999999999999999", "too large"),
            ("9E", "too large"),
            ("1e30", "too large"),
        ];
        for (input, want) in cases {
            let err = Quantity::parse(input).expect_err(input).to_string();
            assert!(
                err.contains(want),
                "input {input:?}: error {err:?} lacks {want:?}"
            );
            if !input.trim().is_empty() {
                assert!(
                    err.contains(&format!("{input:?}")),
                    "error names input: {err}"
                );
            }
        }
    }

    #[test]
    fn rounding_and_units() {
        assert_eq!(Quantity::parse("1500m").map(Quantity::units_ceil), Ok(2));
        assert_eq!(Quantity::parse("2").map(Quantity::units_ceil), Ok(2));
        assert_eq!(Quantity::parse("1m").map(Quantity::units_ceil), Ok(1));
        assert_eq!(Quantity::parse("0").map(Quantity::units_ceil), Ok(0));
        assert_eq!(Quantity::parse("-1").map(Quantity::is_negative), Ok(true));
    }

    #[test]
    fn display_round_trips() {
        for input in ["0", "1", "500m", "1.5", "64Gi", "3e3", "1n"] {
            let q = Quantity::parse(input).expect(input);
            let back = Quantity::parse(&q.to_string()).expect("display parses");
            assert_eq!(q, back, "{input} -> {q}");
        }
    }

    #[test]
    fn serde_accepts_strings_and_numbers() {
        let v: Vec<Quantity> = serde_json::from_str(r#"["500m", 8, 1.5, "64Gi"]"#).expect("json");
        let millis: Vec<i64> = v.iter().map(|q| q.millis()).collect();
        assert_eq!(millis, vec![500, 8000, 1500, 68_719_476_736_000]);
        let err = serde_json::from_str::<Quantity>(r#""12Q""#).expect_err("bad");
        assert!(err.to_string().contains("unknown suffix \"Q\""), "{err}");
        assert_eq!(
            serde_json::to_string(&v).expect("ser"),
            r#"[500m..]"#.replace("500m..", "\"500m\",8,\"1500m\",68719476736")
        );
    }

    proptest::proptest! {
        #[test]
        fn integers_parse_exactly(n in -1_000_000_000i64..1_000_000_000) {
            proptest::prop_assert_eq!(Quantity::parse(&n.to_string()).map(Quantity::millis), Ok(n * 1000));
        }

        #[test]
        fn millis_parse_exactly(n in 0i64..1_000_000_000) {
            proptest::prop_assert_eq!(Quantity::parse(&format!("{n}m")).map(Quantity::millis), Ok(n));
        }

        #[test]
        fn never_panics(s in "\\PC{0,12}") {
            let _ = Quantity::parse(&s);
        }
    }
}
