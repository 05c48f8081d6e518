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

/// Cassandra's `FBUtilities.parseHumanReadable(text, null, "B")`: a number (or `NaN`,
/// `Infinity`), optionally `*2^n`, optional whitespace, an optional unit prefix (`K`, `M`...,
/// binary when followed by `i`), then `B`. The error is Java's `NumberFormatException`
/// message (`null` when none).
pub(crate) fn parse_human_readable_bytes(text: &str) -> Result<f64, String> {
    let Some(body) = text.strip_suffix('B') else {
        return Err(format!("{text} does not end in unit B"));
    };
    let end = body.len();
    let bytes = body.as_bytes();
    let mut pos;
    let sign = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let (mut value, has_fraction) = if body.starts_with("NaN") {
        pos = 3;
        (f64::NAN, false)
    } else if body[sign..].starts_with("Infinity") {
        pos = sign + 8;
        let v = if body.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        (v, false)
    } else {
        let digits_from = |from: usize| {
            bytes[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let integer = digits_from(sign);
        if integer == 0 {
            return Err("null".to_string());
        }
        pos = sign + integer;
        let mut has_fraction = false;
        if bytes.get(pos) == Some(&b'.') && digits_from(pos + 1) > 0 {
            pos += 1 + digits_from(pos + 1);
            has_fraction = true;
        }
        if matches!(bytes.get(pos), Some(b'e' | b'E')) {
            let exp_sign = usize::from(matches!(bytes.get(pos + 1), Some(b'+' | b'-')));
            let exp_digits = digits_from(pos + 1 + exp_sign);
            if exp_digits > 0 {
                pos += 1 + exp_sign + exp_digits;
            }
        }
        let v = body[..pos].parse::<f64>().map_err(|_| "null".to_string())?;
        (v, has_fraction)
    };
    if !has_fraction {
        if let Some(rest) = body[pos..].strip_prefix("*2^") {
            let exp_sign = usize::from(rest.starts_with(['+', '-']));
            let exp_digits = rest[exp_sign..]
                .bytes()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if exp_digits > 0 {
                let exponent = &rest[..exp_sign + exp_digits];
                let exponent = parse_int(exponent)
                    .ok_or_else(|| format!("For input string: \"{exponent}\""))?;
                value *= 2f64.powi(exponent);
                pos += 3 + exp_sign + exp_digits;
            }
        }
    }
    while pos < end && bytes[pos].is_ascii_whitespace() {
        pos += 1;
    }
    const PREFIXES: &str = "qryzafpnum KMGTPEZYRQ";
    if pos < end {
        if let Some(index) = PREFIXES.find(char::from(bytes[pos])) {
            let power = index as i32 - 10;
            pos += 1;
            if pos < end && bytes[pos] == b'i' {
                pos += 1;
                value *= 2f64.powi(power * 10);
            } else {
                value *= (1000f64.ln() * f64::from(power)).exp();
            }
        }
    }
    if pos != end {
        return Err(format!(
            "Unexpected characters between pos {pos} and {end} in {text}"
        ));
    }
    Ok(value)
}

/// Cassandra's `FBUtilities.parsePercent`: `50%` or `0.5`.
pub(crate) fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    parse_double(number)
        .map(|v| v / scale)
        .ok_or_else(|| format!("For input string: \"{number}\""))
}

/// Cassandra's `FBUtilities.prettyPrintMemory`: `1.000MiB`, or bytes as `512B`.
pub(crate) fn pretty_print_memory(size: i64) -> String {
    let magnitude = size.unsigned_abs();
    let prefix_index = if magnitude == 0 {
        0
    } else {
        (63 - magnitude.leading_zeros()) / 10
    };
    if prefix_index == 0 {
        return format!("{size}B");
    }
    const PREFIXES: &[u8] = b" KMGTPEZYRQ";
    let scaled = size as f32 / 2f32.powi(prefix_index as i32 * 10);
    format!(
        "{scaled:.3}{}iB",
        char::from(PREFIXES[prefix_index as usize])
    )
}

/// Java's `String.format("%f", x)`: six decimals.
pub(crate) fn format_fixed6(v: f64) -> String {
    format!("{v:.6}")
}

/// The order Java's `HashMap` iterates a small map of these keys in (a table of 16 buckets,
/// by `String.hashCode`), which decides which of several refused options Cassandra names.
pub(crate) fn hash_order<'a>(
    keys: impl Iterator<Item = &'a String>,
) -> impl Iterator<Item = &'a str> {
    let bucket = |key: &str| {
        let hash = key.encode_utf16().fold(0u32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(u32::from(unit))
        });
        (hash ^ (hash >> 16)) & 15
    };
    let mut keys: Vec<&str> = keys.map(String::as_str).collect();
    keys.sort_by_key(|k| bucket(k));
    keys.into_iter()
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
    fn sizes_read_and_print_as_cassandra_does() {
        let size = parse_human_readable_bytes;
        assert_eq!(size("1MiB"), Ok(1_048_576.0));
        assert_eq!(size("2 GiB"), Ok(2_147_483_648.0));
        assert_eq!(size("1.5GiB"), Ok(1_610_612_736.0));
        assert_eq!(size("1*2^20B"), Ok(1_048_576.0));
        assert!((size("1GB").unwrap() - 1e9).abs() < 1.0);
        assert_eq!(size("-1B"), Ok(-1.0));
        assert_eq!(
            size("1048576"),
            Err("1048576 does not end in unit B".to_string())
        );
        assert_eq!(size("x B"), Err("null".to_string()));
        assert_eq!(
            size("1XB"),
            Err("Unexpected characters between pos 1 and 2 in 1XB".to_string())
        );
        assert_eq!(parse_percent("50%"), Ok(0.5));
        assert_eq!(
            parse_percent("x"),
            Err("For input string: \"x\"".to_string())
        );
        assert_eq!(pretty_print_memory(1_048_576), "1.000MiB");
        assert_eq!(pretty_print_memory(838_860_800), "800.000MiB");
        assert_eq!(pretty_print_memory(1 << 30), "1.000GiB");
        assert_eq!(pretty_print_memory(512), "512B");
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
