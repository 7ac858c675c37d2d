//! Inputs for the fuzz targets: arbitrary bytes, and structure-aware
//! mutations of valid examples (JSON/YAML trees, CSV rows, raw bytes), so
//! most inputs get past the first syntax check and reach the code behind it.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Strings that trip parsers of quantities, durations, prices, times and names.
const TRICKY: &[&str] = &[
    "",
    " ",
    "0",
    "-0",
    "-1",
    "1e309",
    "-1e309",
    "NaN",
    "inf",
    "1.5",
    "0.001m",
    "100Gi",
    "1Ei",
    "9999999999999999999999",
    "18446744073709551616",
    "1h",
    "-5m",
    "P1D",
    "0s",
    "2026-13-45T99:99:99Z",
    "2026-11-23T10:00:05Z",
    "1970-01-01T00:00:00+25:00",
    "nvidia.com/gpu",
    "a/b/c",
    "/",
    "i-",
    "~",
    "null",
    "true",
    "\u{0}",
    "é\u{301}",
    "\u{feff}",
    "😀",
    "\"",
    ",",
    "\r\n",
    "{",
    "- -",
    "&a *a",
    "!!binary AA==",
    "CREATE",
    "Job",
    "batch",
    "v1",
    "EC2 Instance State-change Notification",
    "EC2 Spot Instance Interruption Warning",
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "QUOTA_EXCEEDED",
    "terminated",
];

/// A leaf value: a scalar of any type, tricky strings and extreme numbers weighted in.
pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(0.5f64),
            Just(-1.5),
            Just(1e300),
            Just(-1e300),
            Just(f64::MIN_POSITIVE),
            any::<f64>()
        ]
        .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(TRICKY).prop_map(|s| Value::String(s.to_string())),
        ".{0,40}".prop_map(Value::String),
        (1usize..400).prop_map(|n| Value::String("x".repeat(n))),
    ]
}

/// Any small JSON tree.
pub fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    prop::sample::select(TRICKY).prop_map(String::from),
                    "[a-zA-Z]{1,12}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One edit of a tree, applied at the node its index selects.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Replace the node.
    Replace(Value),
    /// Remove the node from its parent.
    Remove,
    /// Add a member (unknown key) to an object, or an element to an array.
    Add(String, Value),
    /// Copy the node into every array on its path (more pods, rows, items).
    Duplicate,
    /// Replace the node by a copy of another node (types of one field in another).
    Graft(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => leaf().prop_map(Edit::Replace),
        1 => tree().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        2 => (prop_oneof![prop::sample::select(TRICKY).prop_map(String::from), "[a-z]{1,10}"], tree())
            .prop_map(|(k, v)| Edit::Add(k, v)),
        1 => Just(Edit::Duplicate),
        1 => any::<usize>().prop_map(Edit::Graft),
    ]
}

/// JSON Pointer paths of every node, the root first.
fn paths(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                paths(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                paths(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn split_last(path: &str) -> Option<(&str, String)> {
    let (parent, last) = path.rsplit_once('/')?;
    Some((parent, last.replace("~1", "/").replace("~0", "~")))
}

/// Applies `edit` at the node `at` selects (modulo the node count).
pub fn apply(v: &mut Value, at: usize, edit: &Edit) {
    let mut all = Vec::new();
    paths(v, String::new(), &mut all);
    let path = all[at % all.len()].clone();
    match edit {
        Edit::Replace(new) => {
            if let Some(n) = v.pointer_mut(&path) {
                *n = new.clone();
            }
        }
        Edit::Remove => {
            if let Some((parent, key)) = split_last(&path) {
                match v.pointer_mut(parent) {
                    Some(Value::Object(m)) => {
                        m.remove(&key);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = key.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        Edit::Add(key, new) => match v.pointer_mut(&path) {
            Some(Value::Object(m)) => {
                m.insert(key.clone(), new.clone());
            }
            Some(Value::Array(a)) => {
                let copy = a.first().cloned().unwrap_or_else(|| new.clone());
                a.push(copy);
            }
            _ => {}
        },
        Edit::Duplicate => {
            if let Some((parent, _)) = split_last(&path) {
                let node = v.pointer(&path).cloned();
                if let (Some(node), Some(Value::Array(a))) = (node, v.pointer_mut(parent)) {
                    a.push(node);
                }
            }
        }
        Edit::Graft(from) => {
            let donor = v.pointer(&all[from % all.len()]).cloned();
            if let (Some(donor), Some(n)) = (donor, v.pointer_mut(&path)) {
                *n = donor;
            }
        }
    }
}

/// A valid tree with one to six edits.
pub fn mutated_tree(seed: Value) -> impl Strategy<Value = Value> {
    prop::collection::vec((any::<usize>(), edit()), 1..7).prop_map(move |edits| {
        let mut v = seed.clone();
        for (at, e) in &edits {
            apply(&mut v, *at, e);
        }
        v
    })
}

/// One byte-level edit.
#[derive(Debug, Clone)]
pub enum ByteEdit {
    /// Replace one byte.
    Set(usize, u8),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Delete a range.
    Delete(usize, usize),
    /// Repeat a range in place.
    Repeat(usize, usize),
    /// Cut the input short.
    Truncate(usize),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    let interesting = prop_oneof![
        any::<u8>(),
        prop::sample::select(b":-,\"'{}[]\n\r\t #&*!|>%@`\\".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), interesting.clone()).prop_map(|(i, b)| ByteEdit::Set(i, b)),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(interesting, 1..8),
                prop::sample::select(TRICKY).prop_map(|s| s.as_bytes().to_vec())
            ]
        )
            .prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        (any::<usize>(), 1usize..32).prop_map(|(i, n)| ByteEdit::Delete(i, n)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| ByteEdit::Repeat(i, n)),
        any::<usize>().prop_map(ByteEdit::Truncate),
    ]
}

/// A valid text with one to eight byte-level edits.
pub fn mutated_bytes(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(byte_edit(), 1..9).prop_map(move |edits| {
        let mut b = seed.clone();
        for e in &edits {
            let len = b.len().max(1);
            match e {
                ByteEdit::Set(i, x) => {
                    if !b.is_empty() {
                        b[i % len] = *x;
                    }
                }
                ByteEdit::Insert(i, x) => {
                    let at = i % (b.len() + 1);
                    b.splice(at..at, x.iter().copied());
                }
                ByteEdit::Delete(i, n) => {
                    let at = i % len;
                    let end = (at + n).min(b.len());
                    if at < end {
                        b.drain(at..end);
                    }
                }
                ByteEdit::Repeat(i, n) => {
                    let at = i % len;
                    let end = (at + n).min(b.len());
                    if at < end {
                        let part: Vec<u8> = b[at..end].to_vec();
                        b.splice(end..end, part);
                    }
                }
                ByteEdit::Truncate(i) => b.truncate(i % len),
            }
        }
        b
    })
}

/// One edit of a CSV text at the level of rows and fields.
#[derive(Debug, Clone)]
pub enum CsvEdit {
    /// Set a field (row, column) to a tricky value.
    Field(usize, usize, String),
    /// Swap two fields of a row.
    Swap(usize, usize, usize),
    /// Remove a row (the header included).
    DropRow(usize),
    /// Repeat a row.
    CopyRow(usize),
    /// Add a field at the end of a row.
    Extra(usize, String),
    /// Remove the last field of a row.
    Short(usize),
}

fn csv_edit() -> impl Strategy<Value = CsvEdit> {
    let value = prop_oneof![
        prop::sample::select(TRICKY).prop_map(String::from),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        "[a-z0-9_.\" -]{0,12}",
    ];
    prop_oneof![
        4 => (any::<usize>(), any::<usize>(), value.clone()).prop_map(|(r, c, v)| CsvEdit::Field(r, c, v)),
        1 => (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(r, a, b)| CsvEdit::Swap(r, a, b)),
        1 => any::<usize>().prop_map(CsvEdit::DropRow),
        1 => any::<usize>().prop_map(CsvEdit::CopyRow),
        1 => (any::<usize>(), value).prop_map(|(r, v)| CsvEdit::Extra(r, v)),
        1 => any::<usize>().prop_map(CsvEdit::Short),
    ]
}

/// A valid CSV with one to six row or field edits (fields split on commas,
/// which is what a spreadsheet export without quoting looks like).
pub fn mutated_csv(seed: String) -> impl Strategy<Value = String> {
    prop::collection::vec(csv_edit(), 1..7).prop_map(move |edits| {
        let mut rows: Vec<Vec<String>> = seed
            .lines()
            .map(|l| l.split(',').map(String::from).collect())
            .collect();
        for e in &edits {
            if rows.is_empty() {
                break;
            }
            let n = rows.len();
            match e {
                CsvEdit::Field(r, c, v) => {
                    let row = &mut rows[r % n];
                    if !row.is_empty() {
                        let len = row.len();
                        row[c % len] = v.clone();
                    }
                }
                CsvEdit::Swap(r, a, b) => {
                    let row = &mut rows[r % n];
                    if !row.is_empty() {
                        let len = row.len();
                        row.swap(a % len, b % len);
                    }
                }
                CsvEdit::DropRow(r) => {
                    rows.remove(r % n);
                }
                CsvEdit::CopyRow(r) => {
                    let row = rows[r % n].clone();
                    rows.push(row);
                }
                CsvEdit::Extra(r, v) => rows[r % n].push(v.clone()),
                CsvEdit::Short(r) => {
                    rows[r % n].pop();
                }
            }
        }
        rows.iter()
            .map(|r| r.join(","))
            .collect::<Vec<_>>()
            .join("\n")
    })
}
