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
    if k == 0 || k > 127 || costs.len() != k || tails.len() != k {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "n_stages, costs and tails disagree",
        ));
    }
    let n = values.len();
    let mut outputs = Vec::with_capacity(n * k);
    let mut ids = Vec::with_capacity(n);
    let mut owned: Vec<Bound<'py, PyBytes>> = Vec::with_capacity(n);
    for value in values.iter() {
        let Ok(bytes) = value.cast_into::<PyBytes>() else {
            return Ok(None);
        };
        let data = bytes.as_bytes();
        if data.len() > max_bytes {
            return Ok(None);
        }
        match parse(data, k, &mut outputs) {
            Some(span) => ids.push(span),
            None => return Ok(None),
        }
        owned.push(bytes);
    }
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
    let payloads = PyList::empty(py);
    let mut buffer = Vec::with_capacity(96);
    for (index, (&(start, end), bytes)) in ids.iter().zip(&owned).enumerate() {
        let depth = depths[index] as usize;
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
    let depth_list = PyList::new(py, depths.iter().map(|&d| d as i64))?;
    Ok(Some((payloads, depth_list)))
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
    Ok(())
}
