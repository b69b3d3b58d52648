//! The logarithms the policies take, bit for bit as the Python package takes them.
//!
//! `portable_log` is `uss_stream.rules.confidence.portable_log`: `frexp`, then the same basic
//! operations in the same order (Rust never fuses a multiply and an add on its own, so every
//! operation is rounded as in Python). `libm_log` is the C library's `log`, the function CPython's
//! `math.log` calls: USS-UCB takes `log t` with it.

const LN2: f64 = 0.6931471805599453;
const SQRT_HALF: f64 = 0.7071067811865476;
/// Relative widening of a logarithm's range (`uss_stream.rules.certificates.LOG_SLACK`).
pub const LOG_SLACK: f64 = 1.0 / 1_099_511_627_776.0; // 2**-40

extern "C" {
    fn log(x: f64) -> f64;
}

/// The C library's natural logarithm (what `math.log` returns for a float).
#[inline]
pub fn libm_log(x: f64) -> f64 {
    unsafe { log(x) }
}

/// `math.frexp` for a finite `x > 0`: `(m, e)` with `x = m * 2**e` and `0.5 <= m < 1`.
#[inline]
fn frexp(x: f64) -> (f64, i64) {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    if exponent == 0 {
        // Subnormal: scale into the normal range first (exact).
        let (m, e) = frexp(x * 18014398509481984.0); // 2**54
        return (m, e - 54);
    }
    let m = f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | (1022u64 << 52));
    (m, exponent - 1022)
}

/// `portable_log(x)` of the Python package, for `x > 0`.
#[inline]
pub fn portable_log(x: f64) -> f64 {
    let (mut m, mut e) = frexp(x);
    if m < SQRT_HALF {
        m *= 2.0;
        e -= 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let mut poly = 1.0 / 23.0;
    let mut k = 10i64;
    while k >= 0 {
        poly = poly * z + 1.0 / (2 * k + 1) as f64;
        k -= 1;
    }
    e as f64 * LN2 + 2.0 * s * poly
}

/// Bounds of any computed `log x` for `1 <= first <= x <= last` (`certificates.log_range`).
#[inline]
pub fn log_range(first: f64, last: f64) -> (f64, f64) {
    let low = first.ln();
    let high = last.ln();
    (
        (low - LOG_SLACK * (1.0 + low)).max(0.0),
        high + LOG_SLACK * (1.0 + high),
    )
}
