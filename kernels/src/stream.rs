//! The decide-and-update loop of many streams (the replay's repetitions, or one stream of the
//! service), with certified windows.
//!
//! Each stream is stepped round by round from its counts, exactly as `select`/`update` would, except
//! over windows its policy certifies (`rules::Window`): a round's depth is decided, then the longest
//! window from that round certified at that depth is found by doubling from the last window's
//! length, then bisection (a window certified for `w` rounds is certified for fewer); every round of
//! it takes that depth and the counts grow by sums of the rows' indicators. After a round whose
//! certificate was refused, the next attempt waits a few rounds, twice as many after each refusal
//! (at most `MAX_PAUSE`), so that a stream whose depth changes often is stepped at the cost of its
//! decisions alone.

use crate::rules::{pairs_below, Policy, Window};

const MAX_PAUSE: i64 = 64;

/// One stream's inputs: its log rows (`None`: rows `0..horizon` in order) and where it starts.
pub struct Streams<'a> {
    /// `(reps, horizon)` row indices into `pairs`, row-major; empty for the identity.
    pub rows: &'a [i64],
    pub reps: usize,
    pub horizon: usize,
    /// `(N, P)` 0/1 disagreement indicators, pair order.
    pub pairs: &'a [u8],
    pub n_pairs: usize,
}

/// Step every stream; `counts` is `(K + P, reps)` (rows `n_1..n_K`, then `D` per pair, the stream
/// innermost) and `rounds` the rounds each stream decided before; both are updated in place, and
/// `depths` (`(reps, horizon)`) receives the depths. Returns the rounds decided inside certified
/// windows.
pub fn run(
    policy: &mut Policy,
    streams: &Streams,
    counts: &mut [i64],
    rounds: &mut [i64],
    depths: &mut [i8],
) -> u64 {
    let k = policy.n_stages();
    let p_all = streams.n_pairs;
    let reps = streams.reps;
    let mut q = vec![0i64; k];
    let mut d = vec![0i64; p_all];
    let mut certified = 0u64;
    for r in 0..reps {
        for j in 0..k {
            q[j] = counts[j * reps + r];
        }
        for p in 0..p_all {
            d[p] = counts[(k + p) * reps + r];
        }
        let row_of = |t: usize| -> usize {
            if streams.rows.is_empty() {
                t
            } else {
                streams.rows[r * streams.horizon + t] as usize
            }
        };
        let out = &mut depths[r * streams.horizon..(r + 1) * streams.horizon];
        certified += step_stream(policy, streams, &row_of, &mut q, &mut d, rounds[r], out);
        for j in 0..k {
            counts[j * reps + r] = q[j];
        }
        for p in 0..p_all {
            counts[(k + p) * reps + r] = d[p];
        }
        rounds[r] += streams.horizon as i64;
    }
    certified
}

#[allow(clippy::too_many_arguments)]
fn step_stream(
    policy: &mut Policy,
    streams: &Streams,
    row_of: &dyn Fn(usize) -> usize,
    q: &mut [i64],
    d: &mut [i64],
    before: i64,
    out: &mut [i8],
) -> u64 {
    let horizon = streams.horizon;
    let n_pairs = streams.n_pairs;
    let pairs = streams.pairs;
    let mut t = 0usize; // rounds of this call decided
    let mut pause = 0i64;
    let mut next_pause = 1i64;
    let mut hint = 64i64; // the last certified window's length: where the next search starts
    let mut certified = 0u64;
    let mut window = Window::new(policy);
    while t < horizon {
        let round = before + t as i64 + 1;
        // The round's depth, exactly as select/update; then, unless certifying is paused, the
        // longest window from this round that the policy certifies at that depth.
        let depth = policy.decide(round, q, d);
        let mut width = 1usize;
        if pause == 0 {
            window.reset(policy, round, q, d, depth);
            let found = longest(policy, &window, (horizon - t) as i64, hint);
            if found > 0 {
                width = found as usize;
                hint = found;
                certified += found as u64;
                next_pause = 1;
            } else {
                pause = next_pause;
                next_pause = (2 * next_pause).min(MAX_PAUSE);
            }
        } else {
            pause -= 1;
        }
        let observed = pairs_below(depth);
        for s in t..t + width {
            let row = row_of(s) * n_pairs;
            for (count, &indicator) in d[..observed].iter_mut().zip(&pairs[row..row + observed]) {
                *count += indicator as i64;
            }
        }
        for count in q.iter_mut().take(depth) {
            *count += width as i64;
        }
        out[t..t + width].fill(depth as i8);
        t += width;
    }
    certified
}

/// The longest window (at most `left` rounds) that `policy` certifies from the state `window` was
/// reset to; 0 if none: `left` itself, else doubling from `hint` (or halving down from it), then bisection between
/// the longest certified and the shortest refused width.
fn longest(policy: &Policy, window: &Window, left: i64, hint: i64) -> i64 {
    if window.certifies(policy, left) {
        return left;
    }
    if left == 1 {
        return 0;
    }
    let (mut good, mut bad) = (0i64, left);
    let mut width = hint.clamp(1, left - 1);
    if window.certifies(policy, width) {
        good = width;
        while 2 * width < bad {
            width *= 2;
            if window.certifies(policy, width) {
                good = width;
            } else {
                bad = width;
                break;
            }
        }
    } else {
        bad = width;
        while width > 1 {
            width /= 2;
            if window.certifies(policy, width) {
                good = width;
                break;
            }
            bad = width;
        }
        if good == 0 {
            return 0;
        }
    }
    while bad - good > 1 {
        let middle = good + (bad - good) / 2;
        if window.certifies(policy, middle) {
            good = middle;
        } else {
            bad = middle;
        }
    }
    good
}
