//! Java's number parsing and printing where Cassandra's option validation shows through: which
//! texts `Integer.parseInt`, `Long.parseLong` and `Double.parseDouble` accept, and how
//! `Double.toString` prints, so that options are accepted, stored and refused as Cassandra does.

/// `Integer.parseInt` (base 10): an optional sign and ASCII digits, in range.
pub(crate) fn parse_int(text: &str) -> Option<i32> {
    integer_digits(text)
        .then(|| text.parse::<i32>().ok())
        .flatten()
}

/// `Long.parseLong` (base 10).
pub(crate) fn parse_long(text: &str) -> Option<i64> {
    integer_digits(text)
        .then(|| text.parse::<i64>().ok())
        .flatten()
}

/// Whether `text` is an optional sign then ASCII digits (Rust's integer parsing also takes
/// them, and nothing else that Java refuses).
fn integer_digits(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `Double.parseDouble` (and `Float.parseFloat`, widened): leading and trailing whitespace
/// ignored, an optional `d`/`f` suffix, `NaN` and `Infinity` spelled as Java spells them.
/// Hexadecimal floating-point literals are not taken (no Cassandra option needs them).
pub(crate) fn parse_double(text: &str) -> Option<f64> {
    let t = text.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match t.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, t.strip_prefix('+').unwrap_or(t)),
    };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
    // Rust also reads `inf`, `nan` and `infinity`, which Java does not.
    let valid = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body.bytes().any(|b| b.is_ascii_digit());
    if !valid {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

/// `Double.toString`: the shortest digits that read back as `v`, in plain notation between
/// 10^-3 and 10^7 (always with a fraction, `2.0`) and as `d.dddE±n` outside it.
pub(crate) fn double_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let magnitude = v.abs();
    if (1e-3..1e7).contains(&magnitude) {
        let text = format!("{v}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        // Rust's `{:e}` gives `1.5e-5` or `1e10`; Java writes `1.5E-5` and `1.0E10`.
        let text = format!("{v:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

/// Java's `String.format("%f", x)`: six decimals.
pub(crate) fn format_fixed6(v: f64) -> String {
    format!("{v:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_java_parses_them() {
        assert_eq!(parse_int("+016"), Some(16));
        assert_eq!(parse_int("-5"), Some(-5));
        assert_eq!(parse_int(" 5"), None);
        assert_eq!(parse_int("1.5"), None);
        assert_eq!(parse_int("2147483648"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("-"), None);
        assert_eq!(parse_long("99999999999"), Some(99_999_999_999));
    }

    #[test]
    fn doubles_parse_as_java_parses_them() {
        assert_eq!(parse_double(" 1.5 "), Some(1.5));
        assert_eq!(parse_double(".5"), Some(0.5));
        assert_eq!(parse_double("1e3"), Some(1000.0));
        assert_eq!(parse_double("2d"), Some(2.0));
        assert_eq!(parse_double("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_double("NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_double("inf"), None);
        assert_eq!(parse_double("nan"), None);
        assert_eq!(parse_double("x"), None);
        assert_eq!(parse_double(""), None);
    }

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(double_to_string(2.0), "2.0");
        assert_eq!(double_to_string(0.5), "0.5");
        assert_eq!(double_to_string(3.0000001), "3.0000001");
        assert_eq!(double_to_string(1e-5), "1.0E-5");
        assert_eq!(double_to_string(6.71e-5), "6.71E-5");
        assert_eq!(double_to_string(1e10), "1.0E10");
        assert_eq!(double_to_string(f64::INFINITY), "Infinity");
        assert_eq!(format_fixed6(-0.25), "-0.250000");
    }
}
