//! Integers formatted with a thousands separator, e.g. `1234567` -> `"1,234,567"`.
//! Digits come from `itoa` (no allocation per digit); grouping is ours.

/// `n` with `sep` between groups of three digits, counted from the right.
pub fn group(n: u64, sep: char) -> String {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && i % 3 == 0 {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// `n` with commas: `group(n, ',')`.
pub fn with_commas(n: u64) -> String {
    group(n, ',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_numbers_have_no_separator() {
        assert_eq!(with_commas(0), "0");
        assert_eq!(with_commas(999), "999");
    }

    #[test]
    fn groups_count_from_the_right() {
        assert_eq!(with_commas(1234), "1,234");
        assert_eq!(with_commas(1234567), "1,234,567");
    }

    #[test]
    fn any_separator() {
        assert_eq!(group(98765, '.'), "98.765");
    }
}
