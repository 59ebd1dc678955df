//! Text output: aligned tables and human-readable numbers.

/// A text table whose columns are padded to their widest cell. Columns whose cells all look
/// numeric are right-aligned.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row; missing cells are blank.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| printable(c)).collect());
    }

    /// The table as lines of text.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let cell = |r: &Vec<String>, c: usize| r.get(c).map_or("", String::as_str).to_string();
        let width: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| cell(r, c).chars().count())
                    .chain([self.headers[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                self.rows.iter().all(|r| {
                    let text = cell(r, c);
                    text.is_empty()
                        || text.chars().next().is_some_and(|ch| ch.is_ascii_digit() || ch == '-')
                })
            })
            .collect();
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = (0..columns)
                .map(|c| {
                    let text = cells.get(c).cloned().unwrap_or_default();
                    if numeric[c] {
                        format!("{text:>w$}", w = width[c])
                    } else {
                        format!("{text:<w$}", w = width[c])
                    }
                })
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = vec![line(self.headers.clone())];
        out.extend(self.rows.iter().map(|r| line(r.clone())));
        out.join("\n") + "\n"
    }
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Bytes with a binary unit: `1536` -> `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// FLOPs in GFLOP with two decimals.
pub fn gflops(flops: u64) -> String {
    format!("{:.2}", flops as f64 / 1e9)
}

/// Writes an output file atomically (see [`ordo::files::write_atomically`]), naming it in the
/// error.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    write_file_io(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// [`write_file`] with the I/O error, for callers that add their own context.
pub fn write_file_io(
    path: impl AsRef<std::path::Path>,
    bytes: impl AsRef<[u8]>,
) -> std::io::Result<()> {
    ordo::files::write_atomically(path.as_ref(), |out| out.write_all(bytes.as_ref()))
}

/// `text` safe for a terminal: control characters (an escape sequence in a node name, a
/// newline) shown as `\u{1b}`, everything else as it is.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_readable() {
        assert_eq!(thousands(25_557_032), "25,557,032");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(12), "12 B");
        assert_eq!(gflops(4_090_000_000), "4.09");
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long".into(), "100".into()]);
        assert_eq!(t.render(), "name    n\na       1\nlong  100\n");
    }

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(super::printable("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\u{a}c");
        assert_eq!(super::printable("plain ü"), "plain ü");
    }
}
