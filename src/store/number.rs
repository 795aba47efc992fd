//! DynamoDB numbers: decimal strings compared and added exactly, never as floats.
//!
//! DynamoDB compares `N` values numerically (`500.0` equals `500`) and `ADD`
//! adds them exactly (38 significant digits). Both stores and the plan's
//! "unchanged" comparison need the same rule, so it lives here once.

use std::cmp::Ordering;

use zae_limiter_engine::decimal::Decimal;

/// A parsed decimal: `sign × 0.d1d2d3… × 10^exp` with no leading or trailing
/// zero digit (`digits` empty means zero), so equal values have equal forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    negative: bool,
    digits: Vec<u8>,
    exp: i64,
}

/// Why a string is not a DynamoDB number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a number")]
pub struct NotANumber(pub String);

impl Number {
    /// Parses `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit in the mantissa).
    pub fn parse(text: &str) -> Result<Number, NotANumber> {
        let bad = || NotANumber(text.to_string());
        let s = text.trim();
        let Decimal {
            negative,
            int_part,
            frac_part,
            exponent,
        } = Decimal::split(s).ok_or_else(bad)?;
        let exp10: i64 = match exponent {
            None => 0,
            Some((_, digits)) if digits.len() > 6 => return Err(bad()),
            Some((neg, digits)) => {
                let magnitude: i64 = digits.parse().map_err(|_| bad())?;
                if neg {
                    -magnitude
                } else {
                    magnitude
                }
            }
        };
        let mut digits: Vec<u8> = int_part
            .bytes()
            .chain(frac_part.bytes())
            .map(|b| b - b'0')
            .collect();
        // value = 0.digits × 10^(int_len + exp10)
        let mut exp = int_part.len() as i64 + exp10;
        let lead = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..lead);
        exp -= lead as i64;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            return Ok(Number::zero());
        }
        Ok(Number {
            negative,
            digits,
            exp,
        })
    }

    pub fn zero() -> Number {
        Number {
            negative: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The value as an integer, when it is one and fits.
    pub fn to_i128(&self) -> Option<i128> {
        if self.is_zero() {
            return Some(0);
        }
        if self.exp < self.digits.len() as i64 || self.exp > 38 {
            return None;
        }
        let mut v: i128 = 0;
        for i in 0..self.exp as usize {
            let d = self.digits.get(i).copied().unwrap_or(0) as i128;
            v = v.checked_mul(10)?.checked_add(d)?;
        }
        Some(if self.negative { -v } else { v })
    }

    /// Canonical decimal text (no exponent, no superfluous zeros): `500.0` → `500`.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut out = String::new();
        if self.negative {
            out.push('-');
        }
        let ds: String = self.digits.iter().map(|d| (b'0' + d) as char).collect();
        let n = ds.len() as i64;
        if self.exp <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-self.exp) as usize));
            out.push_str(&ds);
        } else if self.exp >= n {
            out.push_str(&ds);
            out.extend(std::iter::repeat_n('0', (self.exp - n) as usize));
        } else {
            out.push_str(&ds[..self.exp as usize]);
            out.push('.');
            out.push_str(&ds[self.exp as usize..]);
        }
        out
    }

    /// Exact sum, as DynamoDB's `ADD` computes it (up to 38 significant digits).
    pub fn add(&self, other: &Number) -> Result<Number, NotANumber> {
        // Align both on the smallest power of ten present, then add as i128.
        let low = |n: &Number| n.exp - n.digits.len() as i64;
        let scale = low(self).min(low(other)).min(0);
        let as_int = |n: &Number| -> Option<i128> {
            let mut v: i128 = 0;
            let width = n.exp - scale;
            if width > 38 {
                return None;
            }
            for i in 0..width.max(0) as usize {
                let d = n.digits.get(i).copied().unwrap_or(0) as i128;
                v = v.checked_mul(10)?.checked_add(d)?;
            }
            Some(if n.negative { -v } else { v })
        };
        let overflow = || NotANumber(format!("{} + {}", self.canonical(), other.canonical()));
        let a = as_int(self).ok_or_else(overflow)?;
        let b = as_int(other).ok_or_else(overflow)?;
        let sum = a.checked_add(b).ok_or_else(overflow)?;
        let text = if scale == 0 {
            sum.to_string()
        } else {
            format!("{sum}e{scale}")
        };
        Number::parse(&text)
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        let sign = |n: &Number| {
            if n.is_zero() {
                0
            } else if n.negative {
                -1
            } else {
                1
            }
        };
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal => {}
            o => return o,
        }
        if self.is_zero() {
            return Ordering::Equal;
        }
        let magnitude = self
            .exp
            .cmp(&other.exp)
            .then_with(|| self.digits.cmp(&other.digits));
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

/// Whether two DynamoDB number strings are the same number; unparsable text compares as text.
pub fn num_eq(a: &str, b: &str) -> bool {
    match (Number::parse(a), Number::parse(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap()
    }

    #[test]
    fn equal_values_have_equal_forms() {
        assert_eq!(n("500"), n("500.0"));
        assert_eq!(n("500"), n("5e2"));
        assert_eq!(n("0.5"), n(".50"));
        assert_eq!(n("-0"), n("0"));
        assert_eq!(n("007"), n("7"));
        assert_ne!(n("500"), n("50"));
        assert!(num_eq("1000", "1000.000"));
        assert!(!num_eq("1000", "1001"));
    }

    #[test]
    fn ordering_is_numeric() {
        assert!(n("9") < n("10"));
        assert!(n("-10") < n("-9"));
        assert!(n("-1") < n("0"));
        assert!(n("0.001") < n("0.01"));
        assert!(n("1e3") > n("999.999"));
        assert_eq!(n("0").cmp(&n("0.000")), Ordering::Equal);
    }

    #[test]
    fn rejects_non_numbers() {
        for bad in ["", "abc", "1.2.3", "True", "1e", "--1", "."] {
            assert!(Number::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addition_is_exact() {
        assert_eq!(n("1").add(&n("-1")).unwrap().canonical(), "0");
        assert_eq!(n("0.1").add(&n("0.2")).unwrap().canonical(), "0.3");
        assert_eq!(n("41").add(&n("1")).unwrap().canonical(), "42");
        assert_eq!(
            n("1e20").add(&n("1")).unwrap().canonical(),
            "100000000000000000001"
        );
        assert!(n("1e40").add(&n("1")).is_err());
    }

    #[test]
    fn canonical_text() {
        assert_eq!(n("500.0").canonical(), "500");
        assert_eq!(n("0.0500").canonical(), "0.05");
        assert_eq!(n("-12.50").canonical(), "-12.5");
        assert_eq!(n("1.5e3").canonical(), "1500");
        assert_eq!(n("1000").to_i128(), Some(1000));
        assert_eq!(n("10.5").to_i128(), None);
    }
}
