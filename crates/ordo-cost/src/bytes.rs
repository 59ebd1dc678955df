//! Byte counts as people write them: `16GiB`, `512 MiB`, `1.5G`, `80GB`, `4096`.

/// Why a text is not a byte count.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {text:?} as a byte count: {problem}")]
pub struct ParseBytesError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub problem: String,
}

const UNIT_HELP: &str = "use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB, \
                         K, M, G, T (powers of 1024)";

/// Reads a byte count: a decimal number, optionally followed (with or without a space) by a
/// unit.
///
/// * `KiB`, `MiB`, `GiB`, `TiB` are powers of 1024 (a GiB is 2^30 bytes), and so are the bare
///   letters `K`, `M`, `G`, `T` and the forms `Ki`, `Mi`, `Gi`, `Ti`: a memory size written
///   `16G` almost always means 16 GiB.
/// * `KB` (or `kB`), `MB`, `GB`, `TB` are powers of 1000 (a GB is 10^9 bytes).
/// * `B` or no unit: bytes.
///
/// Units are case-insensitive. The number may have a fraction (`1.5GiB` is 1610612736 bytes);
/// a result that is not a whole number of bytes is rounded down. `unlimited` gives `u64::MAX`,
/// which is how ordo writes "no memory limit".
///
/// ```
/// use ordo_cost::parse_bytes;
/// assert_eq!(parse_bytes("16GiB"), Ok(16 << 30));
/// assert_eq!(parse_bytes("16G"), Ok(16 << 30));
/// assert_eq!(parse_bytes("16GB"), Ok(16_000_000_000));
/// assert_eq!(parse_bytes("1.5 GiB"), Ok(3 << 29));
/// assert_eq!(parse_bytes("4096"), Ok(4096));
/// assert!(parse_bytes("lots").is_err());
/// ```
///
/// # Errors
/// Empty text, no number, a negative number, an unknown unit, more than 25 significant
/// digits, or a count of 2^64 bytes or more.
pub fn parse_bytes(text: &str) -> Result<u64, ParseBytesError> {
    let fail = |problem: String| ParseBytesError { text: text.to_string(), problem };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(fail("it is empty".into()));
    }
    if trimmed.eq_ignore_ascii_case("unlimited") {
        return Ok(u64::MAX);
    }
    if trimmed.starts_with('-') {
        return Err(fail("a byte count cannot be negative".into()));
    }
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = (&trimmed[..split], trimmed[split..].trim_start());
    let multiplier =
        unit_multiplier(unit).ok_or_else(|| fail(format!("unknown unit {unit:?}; {UNIT_HELP}")))?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return Err(fail("the number has more than one decimal point".into()));
    }
    if whole.is_empty() && fraction.is_empty() {
        return Err(fail(format!("there is no number before the unit; {UNIT_HELP}")));
    }
    let digits = format!("{whole}{fraction}");
    let significant = digits.trim_start_matches('0');
    if significant.len() > 25 || fraction.len() > 25 {
        return Err(fail("the number has more than 25 digits".into()));
    }
    // Exact: at most 10^25 * 2^40 < 2^128.
    let mantissa: u128 = if significant.is_empty() { 0 } else { significant.parse().unwrap() };
    let bytes = mantissa * multiplier / 10u128.pow(fraction.len() as u32);
    u64::try_from(bytes).map_err(|_| fail("it is 2^64 bytes or more".into()))
}

fn unit_multiplier(unit: &str) -> Option<u128> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    })
}

const BINARY_UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];

/// A byte count for people, in binary units with at most two decimals: `1536` -> `1.5 KiB`,
/// `16 << 30` -> `16 GiB`, `1000` -> `1000 B`; `u64::MAX` -> `unlimited`. Approximate (use
/// the number itself where it must be exact); [`parse_bytes`] reads it back.
pub fn format_bytes(n: u64) -> String {
    if n == u64::MAX {
        return "unlimited".into();
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < BINARY_UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{n} B");
    }
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {}", BINARY_UNITS[unit])
}

/// `n` in the largest binary unit that holds it exactly (`16GiB`, `1536KiB`), or `None` when
/// it is not a whole number of KiB.
pub(crate) fn exact_bytes_text(n: u64) -> Option<String> {
    (1..BINARY_UNITS.len())
        .rev()
        .find(|&unit| n != 0 && n.is_multiple_of(1u64 << (10 * unit)))
        .map(|unit| format!("{}{}", n >> (10 * unit), BINARY_UNITS[unit]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(16 << 30), "16 GiB");
        assert_eq!(format_bytes(1_000_000_000), "953.67 MiB");
        assert_eq!(format_bytes(u64::MAX), "unlimited");
        assert_eq!(exact_bytes_text(16 << 30).as_deref(), Some("16GiB"));
        assert_eq!(exact_bytes_text(1536 << 10).as_deref(), Some("1536KiB"));
        assert_eq!(exact_bytes_text(1000), None);
        assert_eq!(exact_bytes_text(0), None);
        for n in [1536, 16 << 30, 3 << 29] {
            assert_eq!(parse_bytes(&format_bytes(n)), Ok(n));
        }
    }
}
