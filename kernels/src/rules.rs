//! The decision rules of the label-free policies, for one state, and their certificates.
//!
//! Each rule is the Python policy's `select` rule with the same floating-point operations in the
//! same order (see `uss_stream/policies/*.py`), so that both decide the same depth to the bit:
//!
//! * `Rule::Hoeffding` — USS-UCB (`scale = α`, strict, with `B^l`) and Hanawal et al.'s Algorithm 2
//!   (`scale = 1.5`, `>=`, no `B^l`): `U_ij = D_ij / n_j + sqrt(scale·log t / n_j)`;
//! * `Rule::Kl` — USS-KL-UCB: `beats(i, j)` iff `n_j·kl(p̂_ij, g) > α·max(log t - log(K·n_j), 0)`
//!   with its shortcuts (`uss_stream.rules.confidence.kl_beats`);
//! * `Rule::Fixed` — a fixed depth.
//!
//! `certify` is `uss_stream.rules.certificates` for one state: whether every round of a window of
//! `width` rounds from round `t`, each querying `depth` stages, decides `depth` whatever the
//! outputs. It is only ever a reason to skip deciding, so it needs to be sound, not bit-identical
//! to the Python certificate.

use crate::portable::{libm_log, log_range, portable_log, LOG_SLACK};

pub enum Rule {
    Hoeffding {
        scale: f64,
        strict: bool,
        lower: bool,
    },
    Kl {
        alpha: f64,
    },
    Fixed {
        depth: usize,
    },
}

/// A rule over a cascade of `k` stages, with the per-pair constants and caches of its decisions.
pub struct Policy {
    rule: Rule,
    k: usize,
    /// Cost gap `C_j - C_i` of each pair `(i, j)`, pairs ordered by `j`, then `i`.
    gap: Vec<f64>,
    log_gap: Vec<f64>,
    log_rest: Vec<f64>,
    pair_j: Vec<usize>,
    /// `(n, log(K·n))` per stage and `(d, n, n·kl(d/n, g))` per pair, as USS-KL-UCB caches them.
    log_counts: Vec<(i64, f64)>,
    divergences: Vec<(i64, i64, f64)>,
}

/// `pair_index(i, j)` of the Python package.
#[inline]
pub fn pair_index(i: usize, j: usize) -> usize {
    j * (j - 1) / 2 + i
}

/// The pairs a depth-`d` query observes (`j < d`): the first `d(d-1)/2`.
#[inline]
pub fn pairs_below(depth: usize) -> usize {
    depth * (depth - 1) / 2
}

impl Policy {
    pub fn new(rule: Rule, costs: &[f64]) -> Policy {
        let k = costs.len();
        let mut pair_i = Vec::new();
        let mut pair_j = Vec::new();
        for j in 0..k {
            for i in 0..j {
                pair_i.push(i);
                pair_j.push(j);
            }
        }
        let gap: Vec<f64> = pair_i
            .iter()
            .zip(&pair_j)
            .map(|(&i, &j)| costs[j] - costs[i])
            .collect();
        let inside = |g: f64| 0.0 < g && g < 1.0;
        let log_gap = gap
            .iter()
            .map(|&g| if inside(g) { portable_log(g) } else { 0.0 })
            .collect();
        let log_rest = gap
            .iter()
            .map(|&g| {
                if inside(g) {
                    portable_log(1.0 - g)
                } else {
                    0.0
                }
            })
            .collect();
        let pairs = pair_i.len();
        Policy {
            rule,
            k,
            gap,
            log_gap,
            log_rest,
            pair_j,
            log_counts: vec![(-1, 0.0); k],
            divergences: vec![(-1, -1, 0.0); pairs],
        }
    }

    pub fn n_stages(&self) -> usize {
        self.k
    }

    /// The depth `select` returns at round `t` with the counts `q` (`n_j`) and `d` (`D_ij`, pair order).
    pub fn decide(&mut self, t: i64, q: &[i64], d: &[i64]) -> usize {
        match self.rule {
            Rule::Fixed { depth } => depth,
            Rule::Hoeffding {
                scale,
                strict,
                lower,
            } => {
                let scale = scale * libm_log(t as f64);
                let gap = &self.gap;
                set_test(self.k, lower, |i, j| {
                    let n = q[j];
                    if n == 0 {
                        return false; // U = inf
                    }
                    let n = n as f64;
                    let p = pair_index(i, j);
                    let upper = d[p] as f64 / n + (scale / n).sqrt();
                    if strict {
                        gap[p] > upper
                    } else {
                        gap[p] >= upper
                    }
                })
            }
            Rule::Kl { alpha } => {
                let log_horizon = portable_log(t as f64);
                let k = self.k;
                let mut levels = vec![f64::NAN; k];
                let (gap, log_gap, log_rest) = (&self.gap, &self.log_gap, &self.log_rest);
                let log_counts = &mut self.log_counts;
                let divergences = &mut self.divergences;
                set_test(k, true, |i, j| {
                    let n = q[j];
                    if n <= 0 {
                        return false;
                    }
                    if levels[j].is_nan() {
                        if log_counts[j].0 != n {
                            log_counts[j] = (n, portable_log((k as i64 * n) as f64));
                        }
                        levels[j] = alpha * (log_horizon - log_counts[j].1).max(0.0);
                    }
                    let p = pair_index(i, j);
                    let dp = d[p];
                    let x = levels[j];
                    kl_beats(dp as f64, n as f64, gap[p], x, || {
                        let cached = divergences[p];
                        if cached.0 == dp && cached.1 == n {
                            return cached.2;
                        }
                        let value = kl_count(dp as f64, n as f64, log_gap[p], log_rest[p]);
                        divergences[p] = (dp, n, value);
                        value
                    })
                })
            }
        }
    }
}

/// The certificates of the windows from one state at one depth, for any width (`Policy.certify_many`:
/// whether rounds `t .. t + width - 1`, each querying `depth` stages from the counts `q`, `d` before
/// round `t`, all decide `depth` whatever the outputs): what does not
/// depend on the width is computed once (a pair the depth does not observe keeps its counts, and
/// only the logarithm of the window's last round moves its comparisons).
pub struct Window {
    t: i64,
    depth: usize,
    log_low: f64,
    /// Per pair: its counts, and what does not depend on the width.
    fixed: Vec<Fixed>,
}

#[derive(Clone, Copy, Default)]
struct Fixed {
    /// Not observed: whether it is possibly beaten (the same for every width).
    possible: bool,
    d: f64,
    n: f64,
    /// `D/n`.
    rate: f64,
    /// Hoeffding, not observed: a logarithm below which the pair is surely beaten (see `reset`).
    below: f64,
    /// KL: `log(K·n)` and `n·kl(p̂, g)` (NaN until needed).
    log_count: f64,
    divergence: f64,
}

/// `2**-28` and `2**-20`: the margins of `Fixed::below`.
const BELOW_MARGIN: f64 = 1.0 / 268_435_456.0;
const EXCESS_MARGIN: f64 = 1.0 / 1_048_576.0;

impl Window {
    pub fn new(policy: &Policy) -> Window {
        let pairs = policy.gap.len();
        Window {
            t: 0,
            depth: 0,
            log_low: 0.0,
            fixed: vec![Fixed::default(); pairs],
        }
    }

    /// Start the windows from round `t` with the counts `q`, `d`, at `depth`.
    ///
    /// A Hoeffding pair not observed is surely beaten when its largest bound
    /// `fl(D/n + sqrt(scale·L / n))` is below the gap `g`; in exact arithmetic that is
    /// `L < n(g - D/n)² / scale`. Each of the bound's five operations is correctly rounded (relative
    /// error at most `u = 2**-53`), so the computed bound is below `g` whenever `L` is below that
    /// threshold less a relative `2**-28`, as long as `g - D/n > 2**-20·g` (the rounding then moves
    /// the bound by `4u·g`, less than the `2**-29·(g - D/n)` the margin leaves): `below` is that
    /// threshold, and the bound is computed only above it.
    pub fn reset(&mut self, policy: &Policy, t: i64, q: &[i64], d: &[i64], depth: usize) {
        let (log_low, _) = log_range(t as f64, t as f64);
        self.t = t;
        self.depth = depth;
        self.log_low = log_low;
        for p in 0..policy.gap.len() {
            let j = policy.pair_j[p];
            let (d0, n0) = (d[p] as f64, q[j] as f64);
            let g = policy.gap[p];
            let mut entry = Fixed {
                possible: false,
                d: d0,
                n: n0,
                rate: d0 / n0,
                below: f64::NEG_INFINITY,
                log_count: 0.0,
                divergence: f64::NAN,
            };
            if let Rule::Kl { .. } = policy.rule {
                entry.log_count = portable_log(policy.k as f64 * if n0 > 0.0 { n0 } else { 1.0 });
            }
            if j >= depth {
                entry.possible = match policy.rule {
                    Rule::Hoeffding { scale, strict, .. } => {
                        let excess = g - entry.rate;
                        if n0 > 0.0 && excess > g * EXCESS_MARGIN {
                            entry.below = n0 * excess * excess / scale * (1.0 - BELOW_MARGIN);
                        }
                        let low = if n0 == 0.0 {
                            f64::INFINITY
                        } else {
                            entry.rate + ((scale * log_low) / n0).sqrt()
                        };
                        if strict {
                            g > low
                        } else {
                            g >= low
                        }
                    }
                    Rule::Kl { alpha } => {
                        if n0 > 0.0 && g > entry.rate && g < 1.0 {
                            entry.divergence =
                                kl_count(d0, n0, policy.log_gap[p], policy.log_rest[p]);
                        }
                        let x_low = alpha * (log_low - entry.log_count).max(0.0);
                        kl_beats(d0, n0, g, x_low, || entry.divergence)
                    }
                    Rule::Fixed { .. } => false,
                };
            }
            self.fixed[p] = entry;
        }
    }

    /// Whether the window of `width` rounds is certified: `certain_depth` of the Python package is
    /// the window's depth exactly when that stage is surely admissible (or is `K`) and every cheaper
    /// stage surely is not, which is tested here pair by pair, each outcome computed only when asked
    /// and the search stopped at the first that decides.
    pub fn certifies(&self, policy: &Policy, width: i64) -> bool {
        let lower = match policy.rule {
            Rule::Fixed { depth } => return depth == self.depth,
            Rule::Hoeffding { lower, .. } => lower,
            Rule::Kl { .. } => true,
        };
        let (_, log_high) = log_range(self.t as f64, (self.t + width - 1) as f64);
        let grown = (width - 1) as f64;
        let (k, depth) = (policy.k, self.depth);
        let sure = |i: usize, j: usize| self.sure(policy, pair_index(i, j), log_high, grown);
        let possible = |i: usize, j: usize| self.possible(policy, pair_index(i, j), grown);
        let top = depth - 1;
        if depth < k {
            if (depth..k).any(|j| !sure(top, j)) || (lower && (0..top).any(|j| possible(j, top))) {
                return false;
            }
        }
        (0..top)
            .all(|i| (i + 1..k).any(|j| !possible(i, j)) || (lower && (0..i).any(|j| sure(j, i))))
    }

    /// Whether pair `p` is beaten at every state of the window.
    fn sure(&self, policy: &Policy, p: usize, log_high: f64, grown: f64) -> bool {
        let g = policy.gap[p];
        let entry = &self.fixed[p];
        let observed = policy.pair_j[p] < self.depth;
        match policy.rule {
            Rule::Hoeffding { scale, strict, .. } => {
                if !observed && log_high < entry.below {
                    return true;
                }
                if entry.n == 0.0 {
                    return false; // U = inf at the window's first round
                }
                let rate_high = if observed {
                    entry.rate.max((entry.d + grown) / (entry.n + grown))
                } else {
                    entry.rate
                };
                let high = rate_high + ((scale * log_high) / entry.n).sqrt();
                if strict {
                    g > high
                } else {
                    g >= high
                }
            }
            Rule::Kl { alpha } => {
                if !observed {
                    let x_high = alpha * (log_high - entry.log_count).max(0.0);
                    return kl_beats(entry.d, entry.n, g, x_high, || entry.divergence);
                }
                let n0 = entry.n;
                let rate_high = entry.rate.max((entry.d + grown) / (n0 + grown));
                let log_count = entry.log_count;
                let top = alpha * (log_high - (log_count - LOG_SLACK * (1.0 + log_count))).max(0.0);
                let diff = g - rate_high;
                let quick = g >= 1.0 || top <= 0.0 || 2.0 * n0 * diff * diff > top;
                n0 > 0.0 && g > rate_high && quick
            }
            Rule::Fixed { .. } => false,
        }
    }

    /// Whether pair `p` may be beaten at some state of the window.
    fn possible(&self, policy: &Policy, p: usize, grown: f64) -> bool {
        let entry = &self.fixed[p];
        if policy.pair_j[p] >= self.depth {
            return entry.possible;
        }
        let g = policy.gap[p];
        let n_high = entry.n + grown;
        if n_high == 0.0 {
            return false;
        }
        let rate_low = entry.d / n_high;
        match policy.rule {
            Rule::Hoeffding { scale, strict, .. } => {
                let low = rate_low + ((scale * self.log_low) / n_high).sqrt();
                if strict {
                    g > low
                } else {
                    g >= low
                }
            }
            Rule::Kl { .. } => !(entry.n > 0.0 && g <= rate_low),
            Rule::Fixed { .. } => false,
        }
    }
}

/// The set test (`select_depth_by`): the first stage in `B^l ∩ B^h`, else `K`.
#[inline]
fn set_test(k: usize, lower: bool, mut beats: impl FnMut(usize, usize) -> bool) -> usize {
    'stage: for i in 0..k {
        if lower {
            for j in 0..i {
                if beats(j, i) {
                    continue 'stage;
                }
            }
        }
        for j in i + 1..k {
            if !beats(i, j) {
                continue 'stage;
            }
        }
        return i + 1;
    }
    k
}

/// `confidence.kl_beats`.
#[inline]
fn kl_beats(d: f64, n: f64, gap: f64, x: f64, divergence: impl FnOnce() -> f64) -> bool {
    if !(n > 0.0) {
        return false;
    }
    let p_hat = d / n;
    if !(gap > p_hat) {
        return false;
    }
    if gap >= 1.0 || x <= 0.0 {
        return true;
    }
    let diff = gap - p_hat;
    if 2.0 * n * diff * diff > x {
        return true;
    }
    divergence() > x
}

/// `confidence.kl_count`: `n·kl(d/n, g)` from `log g` and `log(1 - g)`.
#[inline]
fn kl_count(d: f64, n: f64, log_gap: f64, log_rest: f64) -> f64 {
    let rest = n - d;
    let mut total = 0.0;
    if d > 0.0 {
        total += d * (portable_log(d / n) - log_gap);
    }
    if rest > 0.0 {
        total += rest * (portable_log(rest / n) - log_rest);
    }
    total
}
