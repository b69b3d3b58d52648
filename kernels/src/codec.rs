//! The outputs-mode batch of the Kafka service: decode the events, decide, encode the decisions.
//!
//! Only the plainest events are taken here, those whose meaning under Python's `json.loads` and
//! the service's checks is certain: ASCII, one JSON object holding exactly the keys `"id"` and
//! `"outputs"` (keys without escapes, any JSON whitespace between tokens), an id that is a string
//! of printable ASCII without escapes or a canonical integer of at most 18 digits, and `K` outputs
//! that are integers `0..255` without sign, fraction or exponent. A batch with any other value
//! (or a null, or one longer than the limit) is left to the Python codec whole, which decides it
//! as usual. For a batch taken here, the decision of event `n` is
//! `{"id":<its id token>,"depth":d,"prediction":o,"cost":<C_d as Python's json.dumps writes it>}`,
//! byte for byte what `OutputsCodec.encode` writes (a string id of printable ASCII without
//! escapes is its own JSON encoding, and a canonical integer prints as its token).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::rules::{Policy, Rule};
use crate::stream;

/// One event's id token (its bytes in the value) and outputs, or `None` if it is not plain.
fn parse(value: &[u8], n_stages: usize, outputs: &mut Vec<u8>) -> Option<(usize, usize)> {
    let mut at = skip(value, 0);
    if value.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut id: Option<(usize, usize)> = None;
    let mut seen_outputs = false;
    loop {
        at = skip(value, at);
        let key_start = at;
        let key_end = string(value, at)?;
        let key = &value[key_start + 1..key_end - 1];
        at = skip(value, key_end);
        if value.get(at) != Some(&b':') {
            return None;
        }
        at = skip(value, at + 1);
        match key {
            b"id" if id.is_none() => {
                let end = if value.get(at) == Some(&b'"') {
                    string(value, at)?
                } else {
                    integer(value, at)?
                };
                id = Some((at, end));
                at = end;
            }
            b"outputs" if !seen_outputs => {
                at = array(value, at, n_stages, outputs)?;
                seen_outputs = true;
            }
            _ => return None,
        }
        at = skip(value, at);
        match value.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => break,
            _ => return None,
        }
    }
    if !seen_outputs || skip(value, at + 1) != value.len() {
        return None;
    }
    id
}

/// The position after JSON whitespace from `at`.
#[inline]
fn skip(value: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = value.get(at) {
        at += 1;
    }
    at
}

/// The end (after the closing quote) of a string of printable ASCII without escapes at `at`.
#[inline]
fn string(value: &[u8], at: usize) -> Option<usize> {
    if value.get(at) != Some(&b'"') {
        return None;
    }
    let mut end = at + 1;
    loop {
        match *value.get(end)? {
            b'"' => return Some(end + 1),
            b'\\' => return None,
            0x20..=0x7e => end += 1,
            _ => return None,
        }
    }
}

/// The end of a canonical JSON integer (no leading zero, not `-0`) of at most 18 digits at `at`.
#[inline]
fn integer(value: &[u8], at: usize) -> Option<usize> {
    let digits_at = if value.get(at) == Some(&b'-') {
        at + 1
    } else {
        at
    };
    let mut end = digits_at;
    while let Some(b'0'..=b'9') = value.get(end) {
        end += 1;
    }
    let digits = end - digits_at;
    if digits == 0 || digits > 18 || (value[digits_at] == b'0' && (digits > 1 || digits_at > at)) {
        return None;
    }
    match value.get(end) {
        Some(b'.' | b'e' | b'E') => None,
        _ => Some(end),
    }
}

/// The end of an array of exactly `n` integers `0..255` at `at`, appended to `outputs`.
#[inline]
fn array(value: &[u8], at: usize, n: usize, outputs: &mut Vec<u8>) -> Option<usize> {
    if value.get(at) != Some(&b'[') {
        return None;
    }
    let mut at = at + 1;
    for index in 0..n {
        at = skip(value, at);
        let start = at;
        let mut number = 0u32;
        while let Some(&digit @ b'0'..=b'9') = value.get(at) {
            number = number * 10 + (digit - b'0') as u32;
            at += 1;
            if number > 255 {
                return None;
            }
        }
        let digits = at - start;
        if digits == 0 || (value[start] == b'0' && digits > 1) {
            return None;
        }
        outputs.push(number as u8);
        at = skip(value, at);
        let expected = if index + 1 == n { b']' } else { b',' };
        if value.get(at) != Some(&expected) {
            return None;
        }
        at += 1;
    }
    Some(at)
}

/// The plain values of a batch: each one's id span and the `K` outputs of all (`n * K`), the
/// values kept alive; `None` if one is not plain (or not bytes, or longer than `max_bytes`).
type Parsed<'py> = (Vec<u8>, Vec<(usize, usize)>, Vec<Bound<'py, PyBytes>>);

fn parse_batch<'py>(values: &Bound<'py, PyList>, k: usize, max_bytes: usize) -> Option<Parsed<'py>> {
    let n = values.len();
    let mut outputs = Vec::with_capacity(n * k);
    let mut ids = Vec::with_capacity(n);
    let mut owned: Vec<Bound<'py, PyBytes>> = Vec::with_capacity(n);
    for value in values.iter() {
        let bytes = value.cast_into::<PyBytes>().ok()?;
        let data = bytes.as_bytes();
        if data.len() > max_bytes {
            return None;
        }
        ids.push(parse(data, k, &mut outputs)?);
        owned.push(bytes);
    }
    Some((outputs, ids, owned))
}

/// The decision records of a batch: event `n` (id `ids[n]` in `values[n]`) decided at `depths[n]`.
fn encode_batch<'py>(
    py: Python<'py>,
    values: &[Bound<'py, PyBytes>],
    ids: &[(usize, usize)],
    depths: &[usize],
    outputs: &[u8],
    k: usize,
    tails: &[Vec<u8>],
) -> PyResult<Bound<'py, PyList>> {
    let payloads = PyList::empty(py);
    let mut buffer = Vec::with_capacity(96);
    for (index, (&(start, end), bytes)) in ids.iter().zip(values).enumerate() {
        let depth = depths[index];
        if depth == 0 || depth > k {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "depth {depth} is not in 1..={k}"
            )));
        }
        buffer.clear();
        buffer.extend_from_slice(b"{\"id\":");
        buffer.extend_from_slice(&bytes.as_bytes()[start..end]);
        buffer.extend_from_slice(b",\"depth\":");
        decimal(&mut buffer, depth as u32);
        buffer.extend_from_slice(b",\"prediction\":");
        decimal(&mut buffer, outputs[index * k + depth - 1] as u32);
        buffer.extend_from_slice(b",\"cost\":");
        buffer.extend_from_slice(&tails[depth - 1]);
        buffer.push(b'}');
        payloads.append(PyBytes::new(py, &buffer))?;
    }
    Ok(payloads)
}

fn check_stages(k: usize, tails: &[Vec<u8>]) -> PyResult<()> {
    if k == 0 || k > 127 || tails.len() != k {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "n_stages, costs and tails disagree",
        ));
    }
    Ok(())
}

/// Decide a batch of outputs-mode values: `(payloads, depths)`, or `None` when some value is not
/// plain (see the module's notes) and the Python codec decides the batch.
///
/// `tails` are the encoded costs `C_1..C_K` (`json.dumps(float(C_d))`); `rule`, `params`,
/// `costs` (cumulative), `counts` and `rounds` are those of `run_streams` for one stream.
#[pyfunction]
#[pyo3(signature = (values, n_stages, max_bytes, tails, rule, params, costs, counts, rounds))]
#[allow(clippy::too_many_arguments)]
pub fn decide_outputs<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyList>,
    n_stages: usize,
    max_bytes: usize,
    tails: Vec<Vec<u8>>,
    rule: &str,
    params: (f64, bool, bool),
    costs: Vec<f64>,
    counts: pyo3::buffer::PyBuffer<i64>,
    rounds: pyo3::buffer::PyBuffer<i64>,
) -> PyResult<Option<(Bound<'py, PyList>, Bound<'py, PyList>)>> {
    let k = n_stages;
    check_stages(k, &tails)?;
    if costs.len() != k {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "n_stages, costs and tails disagree",
        ));
    }
    let Some((outputs, ids, owned)) = parse_batch(values, k, max_bytes) else {
        return Ok(None);
    };
    let n = ids.len();
    let n_pairs = k * (k - 1) / 2;
    let mut pairs = Vec::with_capacity(n * n_pairs);
    for row in outputs.chunks_exact(k) {
        for j in 0..k {
            for i in 0..j {
                pairs.push((row[i] != row[j]) as u8);
            }
        }
    }
    let counts_slice = crate::items_mut(py, &counts, "counts")?;
    let rounds_slice = crate::items_mut(py, &rounds, "rounds")?;
    if counts_slice.len() != k + n_pairs || rounds_slice.len() != 1 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "counts must be one stream's",
        ));
    }
    let rule: Rule = crate::rule_of(rule, params)?;
    let mut policy = Policy::new(rule, &costs);
    let mut depths = vec![0i8; n];
    if n > 0 {
        let streams = stream::Streams {
            rows: &[],
            reps: 1,
            horizon: n,
            pairs: &pairs,
            n_pairs,
        };
        py.detach(|| {
            stream::run(
                &mut policy,
                &streams,
                counts_slice,
                rounds_slice,
                &mut depths,
            )
        });
    }
    let chosen: Vec<usize> = depths.iter().map(|&d| d as usize).collect();
    let payloads = encode_batch(py, &owned, &ids, &chosen, &outputs, k, &tails)?;
    let depth_list = PyList::new(py, depths.iter().map(|&d| d as i64))?;
    Ok(Some((payloads, depth_list)))
}

/// Decode a batch of outputs-mode values for a decider of its own (the keyed service): `(outputs,
/// ids)`, the `K` outputs of every event (`n * K` bytes) and each event's id span in its value
/// (`2n` little-endian `u32`: start, end), or `None` when some value is not plain, as
/// [`decide_outputs`] takes them. [`encode_outputs`] writes the decisions.
#[pyfunction]
#[pyo3(signature = (values, n_stages, max_bytes))]
pub fn decode_outputs<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyList>,
    n_stages: usize,
    max_bytes: usize,
) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    if n_stages == 0 || n_stages > 127 {
        return Err(pyo3::exceptions::PyValueError::new_err("n_stages must be in 1..=127"));
    }
    let Some((outputs, ids, _)) = parse_batch(values, n_stages, max_bytes) else {
        return Ok(None);
    };
    let mut spans = Vec::with_capacity(ids.len() * 8);
    for &(start, end) in &ids {
        spans.extend_from_slice(&(start as u32).to_le_bytes());
        spans.extend_from_slice(&(end as u32).to_le_bytes());
    }
    Ok(Some((PyBytes::new(py, &outputs), PyBytes::new(py, &spans))))
}

/// The decision records of a batch [`decode_outputs`] decoded (`outputs`, `ids` as it returned
/// them, `values` the same list), event `n` decided at `depths[n]` (`1..=K`): byte for byte
/// those of [`decide_outputs`].
#[pyfunction]
#[pyo3(signature = (values, ids, outputs, depths, n_stages, tails))]
pub fn encode_outputs<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyList>,
    ids: &[u8],
    outputs: &[u8],
    depths: Vec<usize>,
    n_stages: usize,
    tails: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyList>> {
    let k = n_stages;
    check_stages(k, &tails)?;
    let n = values.len();
    if ids.len() != 8 * n || outputs.len() != k * n || depths.len() != n {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "values, ids, outputs and depths disagree",
        ));
    }
    let mut owned = Vec::with_capacity(n);
    let mut spans = Vec::with_capacity(n);
    for (index, value) in values.iter().enumerate() {
        let bytes = value.cast_into::<PyBytes>()?;
        let word = |at: usize| u32::from_le_bytes(ids[at..at + 4].try_into().unwrap()) as usize;
        let (start, end) = (word(8 * index), word(8 * index + 4));
        if start > end || end > bytes.as_bytes().len() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "an id span is not within its value",
            ));
        }
        spans.push((start, end));
        owned.push(bytes);
    }
    encode_batch(py, &owned, &spans, &depths, outputs, k, &tails)
}

/// Append `number` in decimal.
#[inline]
fn decimal(buffer: &mut Vec<u8>, number: u32) {
    if number >= 10 {
        decimal(buffer, number / 10);
    }
    buffer.push(b'0' + (number % 10) as u8);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decide_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(decode_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(encode_outputs, m)?)?;
    Ok(())
}
