//! The syntax of a decimal number, `[+-]digits[.digits][(e|E)[+-]digits]`,
//! split into its parts and nothing more: what a part may hold beyond that
//! (how long an exponent, whether a sign is allowed) and what the number
//! becomes are each caller's own rule. A response hint's seconds and a
//! DynamoDB number are read the same way, so the split lives here once.

/// A leading `-` or `+`, and the text after it.
pub fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

/// A decimal's parts: the value is `±int_part.frac_part × 10^±exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal<'a> {
    pub negative: bool,
    /// ASCII digits, possibly empty (`.5`).
    pub int_part: &'a str,
    /// ASCII digits, possibly empty (`5` or `5.`); not both parts empty.
    pub frac_part: &'a str,
    /// The exponent's sign and its ASCII digits (at least one), when written.
    pub exponent: Option<(bool, &'a str)>,
}

impl<'a> Decimal<'a> {
    /// The parts of `text`, or `None` when it is not of that syntax.
    pub fn split(text: &'a str) -> Option<Decimal<'a>> {
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let (negative, body) = split_sign(text);
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(i) => (&body[..i], Some(&body[i + 1..])),
            None => (body, None),
        };
        let (int_part, frac_part) = match mantissa.find('.') {
            Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
            None => (mantissa, ""),
        };
        if (int_part.is_empty() && frac_part.is_empty())
            || !all_digits(int_part)
            || !all_digits(frac_part)
        {
            return None;
        }
        let exponent = match exponent.map(split_sign) {
            Some((_, digits)) if digits.is_empty() || !all_digits(digits) => return None,
            e => e,
        };
        Some(Decimal {
            negative,
            int_part,
            frac_part,
            exponent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sign, integer digits, fraction digits, exponent.
    type Parts<'a> = (bool, &'a str, &'a str, Option<(bool, &'a str)>);

    fn parts(text: &str) -> Option<Parts<'_>> {
        Decimal::split(text).map(|d| (d.negative, d.int_part, d.frac_part, d.exponent))
    }

    #[test]
    fn splits_sign_mantissa_and_exponent() {
        assert_eq!(parts("12"), Some((false, "12", "", None)));
        assert_eq!(parts("-1.50"), Some((true, "1", "50", None)));
        assert_eq!(parts("+.5e-3"), Some((false, "", "5", Some((true, "3")))));
        assert_eq!(parts("5.E+07"), Some((false, "5", "", Some((false, "07")))));
    }

    #[test]
    fn refuses_what_is_not_a_decimal() {
        for bad in [
            "", "-", ".", "e5", "1e", "1e+", "1e5.0", "1.2.3", "--1", "1 ", " 1", "inf", "0x10",
            "1_000",
        ] {
            assert_eq!(parts(bad), None, "{bad:?}");
        }
    }
}
