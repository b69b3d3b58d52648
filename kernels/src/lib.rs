//! uss-stream's optional compiled kernels (the `uss-stream[fast]` extra).
//!
//! The Python package calls these through `uss_stream.core.compiled`; every function here has a
//! pure Python/NumPy counterpart that decides the same depths to the bit, and the package runs
//! without this module. Arrays are passed as buffers (NumPy arrays, C-contiguous, of the exact
//! item type each argument names), so nothing is copied.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod codec;
mod portable;
mod rules;
mod stream;

use rules::{Policy, Rule};

/// A buffer's items as a slice (read-only).
pub(crate) fn items<'a, T: Element + Copy>(
    py: Python<'a>,
    buffer: &'a PyBuffer<T>,
    name: &str,
) -> PyResult<&'a [T]> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{name} must be C-contiguous"
        )));
    }
    let cells = buffer
        .as_slice(py)
        .ok_or_else(|| PyValueError::new_err(format!("{name}: unreadable buffer")))?;
    // ReadOnlyCell<T> is a transparent wrapper of T.
    Ok(unsafe { std::slice::from_raw_parts(cells.as_ptr() as *const T, cells.len()) })
}

/// A writable buffer's items as a mutable slice.
#[allow(clippy::mut_from_ref)]
pub(crate) fn items_mut<'a, T: Element + Copy>(
    py: Python<'a>,
    buffer: &'a PyBuffer<T>,
    name: &str,
) -> PyResult<&'a mut [T]> {
    if !buffer.is_c_contiguous() || buffer.readonly() {
        return Err(PyValueError::new_err(format!(
            "{name} must be C-contiguous and writable"
        )));
    }
    let cells = buffer
        .as_mut_slice(py)
        .ok_or_else(|| PyValueError::new_err(format!("{name}: unwritable buffer")))?;
    Ok(unsafe { std::slice::from_raw_parts_mut(cells.as_ptr() as *mut T, cells.len()) })
}

pub(crate) fn rule_of(name: &str, params: (f64, bool, bool)) -> PyResult<Rule> {
    let (value, strict, lower) = params;
    match name {
        "hoeffding" => Ok(Rule::Hoeffding {
            scale: value,
            strict,
            lower,
        }),
        "kl" => Ok(Rule::Kl { alpha: value }),
        "fixed" => Ok(Rule::Fixed {
            depth: value as usize,
        }),
        _ => Err(PyValueError::new_err(format!("unknown rule {name:?}"))),
    }
}

/// Decide `reps` streams of `horizon` rounds each, exactly as `select`/`update` (see `stream.rs`).
///
/// `rule`, `params` and `costs` (cumulative) name the policy; `rows` is `(reps, horizon)` int64
/// row indices into `pairs` (an empty array: rows `0..horizon`, one stream), `pairs` the `(N, P)`
/// uint8 indicators; `counts` (`(K + P, reps)` int64) and `rounds` (`reps` int64) are the streams'
/// counts and rounds before, updated in place; `depths` (`(reps, horizon)` int8) receives the
/// depths. Returns the rounds decided inside certified windows.
#[pyfunction]
#[pyo3(signature = (rule, params, costs, rows, pairs, n_pairs, counts, rounds, depths))]
#[allow(clippy::too_many_arguments)]
fn run_streams(
    py: Python<'_>,
    rule: &str,
    params: (f64, bool, bool),
    costs: Vec<f64>,
    rows: PyBuffer<i64>,
    pairs: PyBuffer<u8>,
    n_pairs: usize,
    counts: PyBuffer<i64>,
    rounds: PyBuffer<i64>,
    depths: PyBuffer<i8>,
) -> PyResult<u64> {
    let k = costs.len();
    if k == 0 || k > 127 || n_pairs != k * (k - 1) / 2 {
        return Err(PyValueError::new_err(
            "costs and n_pairs do not describe a cascade",
        ));
    }
    let rows_slice = items(py, &rows, "rows")?;
    let pairs_slice = items(py, &pairs, "pairs")?;
    let counts_slice = items_mut(py, &counts, "counts")?;
    let rounds_slice = items_mut(py, &rounds, "rounds")?;
    let depths_slice = items_mut(py, &depths, "depths")?;
    let reps = rounds_slice.len();
    if reps == 0 || depths_slice.len() % reps != 0 || counts_slice.len() != (k + n_pairs) * reps {
        return Err(PyValueError::new_err(
            "depths, counts and rounds do not have the same streams",
        ));
    }
    let horizon = depths_slice.len() / reps;
    let n_rows = if n_pairs == 0 {
        horizon
    } else {
        pairs_slice.len() / n_pairs
    };
    if rows_slice.is_empty() {
        if reps != 1 || (n_pairs > 0 && n_rows < horizon) {
            return Err(PyValueError::new_err(
                "without rows, one stream of at most len(pairs) rounds",
            ));
        }
    } else if rows_slice.len() != reps * horizon
        || rows_slice.iter().any(|&r| r < 0 || r as usize >= n_rows)
    {
        return Err(PyValueError::new_err(
            "rows must be (reps, horizon) indices into pairs",
        ));
    }
    if pairs_slice.iter().any(|&x| x > 1) {
        return Err(PyValueError::new_err("pairs must hold 0/1 indicators"));
    }
    if counts_slice.iter().any(|&c| c < 0) || rounds_slice.iter().any(|&r| r < 0) {
        return Err(PyValueError::new_err("counts and rounds must be >= 0"));
    }
    let mut policy = Policy::new(rule_of(rule, params)?, &costs);
    let streams = stream::Streams {
        rows: rows_slice,
        reps,
        horizon,
        pairs: pairs_slice,
        n_pairs,
    };
    Ok(py.detach(|| {
        stream::run(
            &mut policy,
            &streams,
            counts_slice,
            rounds_slice,
            depths_slice,
        )
    }))
}

/// The portable logarithm of the Python package (`uss_stream.rules.confidence.portable_log`).
#[pyfunction]
fn portable_log(x: f64) -> f64 {
    portable::portable_log(x)
}

#[pymodule]
fn uss_stream_kernels(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run_streams, m)?)?;
    m.add_function(wrap_pyfunction!(portable_log, m)?)?;
    codec::register(m)?;
    Ok(())
}
