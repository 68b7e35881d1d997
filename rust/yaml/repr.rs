//! A node as Python's `repr` spells the object that it becomes in Python (`dict`, `list`, `str`,
//! `int`, `bool`, `None`), for a digest of it that the core can take while Python is busy. Only
//! where the spelling is plain to tell: a float (`repr` has its own rules for the shortest form)
//! or a string with a quote, a backslash or a character outside printable ASCII (escapes, and
//! what Unicode deems printable) gives `None`, and Python spells the node itself.

use std::fmt::Write;

use super::Value;

/// `repr` of the Python object `value` becomes, if plain to tell.
pub fn python_repr(value: &Value) -> Option<String> {
    let mut out = String::new();
    write_repr(value, &mut out).then_some(out)
}

fn write_repr(value: &Value, out: &mut String) -> bool {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Int(i) => write!(out, "{i}").expect("a String takes any text"),
        Value::Float(_) => return false,
        Value::Str(s) if s.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\'' && b != b'\\') => {
            out.push('\'');
            out.push_str(s);
            out.push('\'');
        }
        Value::Str(_) => return false,
        Value::Seq(items) => return write_all(out, '[', items.iter().map(|item| (None, item)), ']'),
        Value::Map(entries) => return write_all(out, '{', entries.iter().map(|(key, value)| (Some(key), value)), '}'),
    }
    true
}

/// Items (`key: value` where they have a key) between `open` and `close`, comma-separated.
fn write_all<'a>(out: &mut String, open: char, items: impl Iterator<Item = (Option<&'a Value>, &'a Value)>, close: char) -> bool {
    out.push(open);
    for (i, (key, value)) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if let Some(key) = key {
            if !write_repr(key, out) {
                return false;
            }
            out.push_str(": ");
        }
        if !write_repr(value, out) {
            return false;
        }
    }
    out.push(close);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::load;

    fn repr(text: &str) -> Option<String> {
        python_repr(&load(text).unwrap())
    }

    #[test]
    fn documents_read_as_python_spells_them() {
        let tenant = "name: t0\nvnis: [1000, -2]\nrules:\n  - {action: allow, dst: 10.0.0.0/24, dst_ports: 443}\nmeter: {}\nx: [null, true, false, []]\n";
        let expected = "{'name': 't0', 'vnis': [1000, -2], 'rules': [{'action': 'allow', 'dst': '10.0.0.0/24', 'dst_ports': 443}], 'meter': {}, 'x': [None, True, False, []]}";
        assert_eq!(repr(tenant).as_deref(), Some(expected));
        assert_eq!(repr("1: 170141183460469231731687303715884105727").as_deref(), Some("{1: 170141183460469231731687303715884105727}"));
    }

    #[test]
    fn what_python_spells_by_rules_of_its_own_is_left_to_it() {
        for text in ["a: 1.5", "a: \"it's\"", "a: 'back\\slash'", "a: café", "a: \"tab\\there\"", "[1, {b: [2.0]}]", "a: \"\\x7f\""] {
            assert_eq!(repr(text), None, "{text:?}");
        }
    }
}
