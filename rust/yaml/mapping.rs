//! A mapping being read: its entries in order, and the index that finds a repeated key.

use std::hash::{BuildHasher, Hash};

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::{Value, YamlError};

#[derive(Default)]
pub(super) struct OpenMap {
    entries: Vec<(Value, Value)>,
    /// The line of each entry's key, for the message about a later duplicate.
    key_lines: Vec<usize>,
    /// The first entry whose key has this hash (see [`KeyId`]).
    first_by_hash: FxHashMap<u64, usize>,
    /// A key read, waiting for its value.
    pending_key: Option<Value>,
}

impl OpenMap {
    pub(super) fn expects_key(&self) -> bool {
        self.pending_key.is_none()
    }

    /// The key read, waiting for its value.
    pub(super) fn pending_key(&self) -> Option<&Value> {
        self.pending_key.as_ref()
    }

    pub(super) fn entries(&self) -> &[(Value, Value)] {
        &self.entries
    }

    /// Takes a (scalar) key, unless an earlier key of this mapping equals it.
    pub(super) fn add_key(&mut self, key: Value, line: usize, column: usize) -> Result<(), YamlError> {
        let id = KeyId::of(&key);
        let hash = FxBuildHasher.hash_one(&id);
        let first = match self.first_by_hash.get(&hash) {
            None => None,
            Some(&index) if KeyId::of(&self.entries[index].0) == id => Some(index),
            // Two keys with one 64-bit hash: look at them all.
            Some(_) => self.entries.iter().position(|(earlier, _)| KeyId::of(earlier) == id),
        };
        if let Some(index) = first {
            return Err(YamlError::DuplicateKey { line, column, key: shown_key(&key), first_line: self.key_lines[index] });
        }
        self.first_by_hash.entry(hash).or_insert(self.entries.len());
        self.key_lines.push(line);
        self.pending_key = Some(key);
        Ok(())
    }

    pub(super) fn add_value(&mut self, value: Value) {
        let key = self.pending_key.take().expect("a value follows its key");
        self.entries.push((key, value));
    }

    pub(super) fn finish(self) -> Vec<(Value, Value)> {
        self.entries
    }
}

/// What makes two scalar keys the same key. Numbers compare by value across types, and `true`
/// and `false` count as 1 and 0, since the maps programs read documents into (Python's dict among
/// them) cannot hold `1`, `1.0` and `true` as three keys.
#[derive(PartialEq, Eq, Hash)]
enum KeyId<'a> {
    Null,
    Int(i128),
    /// A float that is not a whole number (or too large for any integer key), by its bits.
    Float(u64),
    Str(&'a str),
}

impl<'a> KeyId<'a> {
    fn of(key: &'a Value) -> KeyId<'a> {
        match key {
            Value::Null => KeyId::Null,
            Value::Bool(b) => KeyId::Int(i128::from(*b)),
            Value::Int(i) => KeyId::Int(*i),
            Value::Float(f) => Self::of_float(*f),
            Value::Str(s) => KeyId::Str(s),
            Value::Seq(_) | Value::Map(_) => unreachable!("keys are scalars"),
        }
    }

    fn of_float(f: f64) -> KeyId<'a> {
        const TWO_POW_127: f64 = 1.7014118346046923e38;
        if f.fract() == 0.0 && (-TWO_POW_127..TWO_POW_127).contains(&f) {
            KeyId::Int(f as i128)
        } else {
            KeyId::Float(f.to_bits())
        }
    }
}

/// A key as messages show it: a string quoted (YAML's single quotes, or escaped in double quotes
/// when it holds control characters), any other scalar as YAML writes it.
pub(super) fn shown_key(key: &Value) -> String {
    match key {
        Value::Str(s) if s.chars().any(char::is_control) => format!("{s:?}"),
        Value::Str(s) => format!("'{}'", s.replace('\'', "''")),
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) if f.is_nan() => ".nan".to_owned(),
        Value::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.to_owned(),
        Value::Float(f) => format!("{f:?}"),
        Value::Seq(_) | Value::Map(_) => unreachable!("keys are scalars"),
    }
}
