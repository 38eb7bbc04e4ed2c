//! Numbers as Java prints them: `Double.toString` and `Float.toString` (`1.0`, `0.5`, `1.0E7`,
//! `1.0E-4`, `NaN`, `Infinity`). Druid's results (Jackson writes JSON doubles this way) and the
//! text of its numeric-to-string conversions follow these rules, so the SQL result writers and
//! the SQL functions that turn numbers into text share them.

use std::io::Write as _;

/// Appends a finite float as Java's `Double.toString`/`Float.toString` print it, given Rust's
/// shortest round-trip scientific form of the value (`{:e}`): plain notation with at least
/// one fraction digit for 10^-3 <= |v| < 10^7, else `d.dddE<exp>`.
fn push_java_float(out: &mut Vec<u8>, sci: &[u8]) {
    let (neg, rest) = match sci.split_first() {
        Some((b'-', r)) => (true, r),
        _ => (false, sci),
    };
    let epos = rest.iter().position(|b| *b == b'e').unwrap_or(rest.len());
    let mantissa = &rest[..epos];
    let exp: i32 = std::str::from_utf8(rest.get(epos + 1..).unwrap_or(b"0"))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut digits = [0_u8; 40];
    let mut nd = 0;
    for &b in mantissa {
        if b.is_ascii_digit() && nd < digits.len() {
            digits[nd] = b;
            nd += 1;
        }
    }
    let digits = &digits[..nd.max(1)];
    if neg {
        out.push(b'-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            for i in 0..int_len {
                out.push(*digits.get(i).unwrap_or(&b'0'));
            }
            out.push(b'.');
            if digits.len() > int_len {
                out.extend_from_slice(&digits[int_len..]);
            } else {
                out.push(b'0');
            }
        } else {
            out.extend_from_slice(b"0.");
            for _ in 0..(-exp - 1) {
                out.push(b'0');
            }
            out.extend_from_slice(digits);
        }
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        let _ = write!(out, "{exp}");
    }
}

/// Appends `v` as Java's `Double.toString` (`1.0`, `0.5`, `1.0E7`, `1.0E-4`, `NaN`,
/// `Infinity`); Jackson writes JSON doubles this way.
#[inline]
pub fn write_java_double(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(non_finite(v).as_bytes());
        return;
    }
    let mut buf = [0_u8; 48];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    if write!(cur, "{v:e}").is_err() {
        return;
    }
    let len = cur.position() as usize;
    push_java_float(out, &buf[..len]);
}

/// Appends `v` as Java's `Float.toString`.
#[inline]
pub fn write_java_float(out: &mut Vec<u8>, v: f32) {
    if !v.is_finite() {
        out.extend_from_slice(non_finite(f64::from(v)).as_bytes());
        return;
    }
    let mut buf = [0_u8; 48];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    if write!(cur, "{v:e}").is_err() {
        return;
    }
    let len = cur.position() as usize;
    push_java_float(out, &buf[..len]);
}

/// Java's name of a non-finite double (`NaN`, `Infinity`, `-Infinity`), as
/// `Double.toString` prints it; for a finite value, `-Infinity` or `Infinity` by sign.
#[inline]
pub fn non_finite(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_doubles() {
        let f = |v: f64| {
            let mut o = Vec::new();
            write_java_double(&mut o, v);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(f(0.0), "0.0");
        assert_eq!(f(-0.0), "-0.0");
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(36.5), "36.5");
        assert_eq!(f(1234567.0), "1234567.0");
        assert_eq!(f(12345678.9), "1.23456789E7");
        assert_eq!(f(0.001), "0.001");
        assert_eq!(f(0.0001), "1.0E-4");
        assert_eq!(f(-2.5e-10), "-2.5E-10");
        assert_eq!(f(1e300), "1.0E300");
        assert_eq!(f(100.0), "100.0");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(f(f64::INFINITY), "Infinity");
        let mut o = Vec::new();
        write_java_float(&mut o, 1.1_f32);
        assert_eq!(o, b"1.1");
    }
}
