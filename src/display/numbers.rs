//! Number formatting the reference's displays use: Python's `{:,}` and `%g`.

/// `{:,}`: thousands separated by commas (`1234567` → `1,234,567`).
pub fn thousands(v: impl Into<u128>) -> String {
    let digits = v.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Python's `%g`: 6 significant digits, trailing zeros stripped, exponent form
/// (`1e+06`) below 10^-4 or at 10^6 and above.
pub fn python_g(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    const P: i32 = 6;
    // The exponent after rounding to P significant digits decides the form.
    let sci = format!("{:.*e}", (P - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..P).contains(&exp) {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (P - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0u64), "0");
        assert_eq!(thousands(999u64), "999");
        assert_eq!(thousands(1000u64), "1,000");
        assert_eq!(thousands(1234567u64), "1,234,567");
        assert_eq!(thousands(1_000_000_000_000_000u64), "1,000,000,000,000,000");
        // Past u64 (a capacity of 10^18 tokens scaled ×10^6 in millitokens).
        assert_eq!(
            thousands(10u128.pow(24)),
            "1,000,000,000,000,000,000,000,000"
        );
    }

    #[test]
    fn percent_g_matches_python() {
        // Values as the display computes them: permille / 1000 * 100 in f64.
        let pct = |permille: u64| python_g(permille as f64 / 1000.0 * 100.0);
        assert_eq!(pct(500), "50");
        assert_eq!(pct(125), "12.5");
        assert_eq!(pct(2000), "200");
        assert_eq!(pct(70), "7");
        assert_eq!(pct(1), "0.1");
        assert_eq!(pct(333), "33.3");
        assert_eq!(pct(123), "12.3");
        assert_eq!(pct(1_000_000), "100000");
        assert_eq!(pct(10_000_000), "1e+06");
        assert_eq!(pct(1_000_000_000), "1e+08");
        assert_eq!(pct(12_345_678), "1.23457e+06");
        assert_eq!(python_g(0.0001 * 100.0), "0.01");
        assert_eq!(python_g(1.0 / 3.0 * 100.0), "33.3333");
        assert_eq!(python_g(0.00001234), "1.234e-05");
        assert_eq!(python_g(999999.5), "1e+06");
        assert_eq!(python_g(123456.7), "123457");
    }
}
