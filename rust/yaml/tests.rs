//! The core schema's forms one by one, the YAML 1.1 forms that must stay strings, tags, the
//! errors and their places, and that no text makes the loader panic.

use super::*;
use proptest::prelude::*;

fn one(scalar: &str) -> Value {
    match load(&format!("k: {scalar}\n")).unwrap() {
        Value::Map(mut entries) => entries.pop().unwrap().1,
        other => panic!("not a mapping: {other:?}"),
    }
}

fn error(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

fn string(s: &str) -> Value {
    Value::Str(s.to_owned())
}

#[test]
fn plain_scalars_resolve_by_the_core_schema() {
    for null in ["", "~", "null", "Null", "NULL"] {
        assert_eq!(one(null), Value::Null, "{null:?}");
    }
    for (text, b) in [("true", true), ("True", true), ("TRUE", true), ("false", false), ("False", false), ("FALSE", false)] {
        assert_eq!(one(text), Value::Bool(b), "{text:?}");
    }
    let ints = [("0", 0), ("22", 22), ("0022", 22), ("+7", 7), ("-7", -7), ("-0", 0), ("0o17", 15), ("0x1F", 31), ("0xff", 255), ("0o0", 0)];
    for (text, i) in ints {
        assert_eq!(one(text), Value::Int(i), "{text:?}");
    }
    assert_eq!(one("9223372036854775807"), Value::Int(i64::MAX.into()));
    assert_eq!(one("-9223372036854775808"), Value::Int(i64::MIN.into()));
    let floats = [("1.5", 1.5), ("-1.5", -1.5), ("+.5", 0.5), ("1.", 1.0), ("1e3", 1000.0), ("1.0e+3", 1000.0), ("2E-2", 0.02), (".5e1", 5.0)];
    for (text, f) in floats {
        assert_eq!(one(text), Value::Float(f), "{text:?}");
    }
    for (text, f) in [(".inf", f64::INFINITY), ("+.Inf", f64::INFINITY), ("-.INF", f64::NEG_INFINITY), ("1e999", f64::INFINITY)] {
        assert_eq!(one(text), Value::Float(f), "{text:?}");
    }
    for nan in [".nan", ".NaN", ".NAN"] {
        assert!(matches!(one(nan), Value::Float(f) if f.is_nan()), "{nan:?}");
    }
}

#[test]
fn yaml_1_1_forms_are_strings() {
    let words = [
        "1:30", "0b11", "8_0", "1_000", "yes", "No", "on", "OFF", "y", "0X1F", "0O17", "-0x1", "+0o7", "0x", "0o8", "1e", "1e+", ".", "+", "-.nan", "nan",
        "inf", "infinity",
    ];
    for word in words {
        assert_eq!(one(word), string(word), "{word:?}");
    }
    for word in ["1.2.3", "1..2", "1.5x", "--1", "+-1", "1 2", "2001-12-14", "0.5.", "=", "<<x"] {
        assert_eq!(one(word), string(word), "{word:?}");
    }
}

#[test]
fn quoted_and_block_scalars_are_strings() {
    assert_eq!(one("'0022'"), string("0022"));
    assert_eq!(one("\"true\""), string("true"));
    assert_eq!(one("''"), string(""));
    assert_eq!(one("'it''s'"), string("it's"));
    assert_eq!(one("\"tab\\there\""), string("tab\there"));
    assert_eq!(load("k: |\n  12\n").unwrap(), Value::Map(vec![(string("k"), string("12\n"))]));
    assert_eq!(load("k: >-\n  null\n").unwrap(), Value::Map(vec![(string("k"), string("null"))]));
}

#[test]
fn integers_reach_128_bits_and_no_further() {
    assert_eq!(one("9223372036854775808"), Value::Int(1 << 63));
    assert_eq!(one("170141183460469231731687303715884105727"), Value::Int(i128::MAX));
    assert_eq!(one("-170141183460469231731687303715884105728"), Value::Int(i128::MIN));
    assert_eq!(one("000123456789012345678901234567890"), Value::Int(123456789012345678901234567890));
    assert_eq!(one("0xffffffffffffffffffff"), Value::Int((1 << 80) - 1));
    assert_eq!(one("0o7777777777777777777777777"), Value::Int((1 << 75) - 1));
    assert_eq!(one("!!float 0x10"), Value::Float(16.0));
    for beyond in ["170141183460469231731687303715884105728", "-170141183460469231731687303715884105729", "0x100000000000000000000000000000000"] {
        assert_eq!(error(&format!("k: {beyond}\n")), "line 1, column 4: an integer beyond 128 bits", "{beyond}");
    }
    assert_eq!(error(&format!("k: [1, {}]\n", "9".repeat(1_000_000))), "line 1, column 8: an integer beyond 128 bits");
    assert_eq!(error("k: !!int 0x100000000000000000000000000000000\n"), "line 1, column 4: an integer beyond 128 bits");
    assert_eq!(one("!!float 1000000000000000000000000000000000000000"), Value::Float(1e39));
    assert_eq!(one("'1000000000000000000000000000000000000000'"), string("1000000000000000000000000000000000000000"));
}

#[test]
fn documents_keep_order_and_shape() {
    let text = "b: [1, two, {c: null}]\na:\n  - x\n  - - y\n";
    let expected = Value::Map(vec![
        (string("b"), Value::Seq(vec![Value::Int(1), string("two"), Value::Map(vec![(string("c"), Value::Null)])])),
        (string("a"), Value::Seq(vec![string("x"), Value::Seq(vec![string("y")])])),
    ]);
    assert_eq!(load(text).unwrap(), expected);
    assert_eq!(load("").unwrap(), Value::Null);
    assert_eq!(load("# only a comment\n").unwrap(), Value::Null);
    assert_eq!(load("---\n...\n").unwrap(), Value::Null);
    assert_eq!(load("--- 5\n").unwrap(), Value::Int(5));
    assert_eq!(load("\u{feff}k: v\n").unwrap(), Value::Map(vec![(string("k"), string("v"))]));
}

#[test]
fn tags_of_the_core_schema_are_honoured() {
    assert_eq!(one("!!str 0022"), string("0022"));
    assert_eq!(one("!!str"), string(""));
    assert_eq!(one("! 12"), string("12"));
    assert_eq!(one("!!int '0x10'"), Value::Int(16));
    assert_eq!(one("!!float 3"), Value::Float(3.0));
    assert_eq!(one("!!float '-.inf'"), Value::Float(f64::NEG_INFINITY));
    assert_eq!(one("!!bool \"false\""), Value::Bool(false));
    assert_eq!(one("!!null ''"), Value::Null);
    assert_eq!(one("!<tag:yaml.org,2002:int> 7"), Value::Int(7));
    assert_eq!(one("!!seq [1]"), Value::Seq(vec![Value::Int(1)]));
    assert_eq!(one("!!map {a: 1}"), Value::Map(vec![(string("a"), Value::Int(1))]));
    assert_eq!(one("! [1]"), Value::Seq(vec![Value::Int(1)]));
}

#[test]
fn other_tags_and_misused_core_tags_are_errors() {
    let unknown = ": only the core schema's !!str, !!int, !!float, !!bool, !!null, !!seq and !!map";
    assert_eq!(error("k: !!binary aGk=\n"), format!("line 1, column 4: unknown tag !!binary{unknown}"));
    assert_eq!(error("k: !custom x\n"), format!("line 1, column 4: unknown tag !custom{unknown}"));
    assert_eq!(error("k: !<tag:example.com,2000:x> 1\n"), format!("line 1, column 4: unknown tag !<tag:example.com,2000:x>{unknown}"));
    assert_eq!(error("k: !!set {a}\n"), format!("line 1, column 4: unknown tag !!set{unknown}"));
    assert_eq!(error("k: !!int 1.5\n"), "line 1, column 4: \"1.5\" is not a valid !!int");
    assert_eq!(error("k: !!bool yes\n"), "line 1, column 4: \"yes\" is not a valid !!bool");
    assert_eq!(error("k: !!null 0\n"), "line 1, column 4: \"0\" is not a valid !!null");
    assert_eq!(error("k: !!float x\n"), "line 1, column 4: \"x\" is not a valid !!float");
    assert_eq!(error("k: !!map [1]\n"), "line 1, column 4: !!map on a sequence");
    assert_eq!(error("k: !!str [1]\n"), "line 1, column 4: !!str on a sequence");
    assert_eq!(error("k: !!seq {}\n"), "line 1, column 4: !!seq on a mapping");
    assert_eq!(error("k: !!seq x\n"), "line 1, column 4: !!seq on a scalar");
}

#[test]
fn duplicate_keys_name_both_lines() {
    let err = load("tenants:\n  - name: a\n    vnis: [1]\n    name: b\n").unwrap_err();
    assert_eq!(err, YamlError::DuplicateKey { line: 4, column: 5, key: "'name'".into(), first_line: 2 });
    assert_eq!(err.to_string(), "line 4: duplicate key 'name' (first at line 2)");
    assert_eq!(error("{a: 1, b: 2, a: 3}"), "line 1: duplicate key 'a' (first at line 1)");
    assert_eq!(error("x: 1\n'x': 2\n"), "line 2: duplicate key 'x' (first at line 1)");
    assert_eq!(error("it's: 1\n\"it's\": 2\n"), "line 2: duplicate key 'it''s' (first at line 1)");
    assert_eq!(error("\"a\\nb\": 1\n\"a\\nb\": 2\n"), "line 2: duplicate key \"a\\nb\" (first at line 1)");
    // Keys equal as numbers are one key to Python's dict, so they are duplicates here too.
    assert_eq!(error("1: a\n1.0: b\n"), "line 2: duplicate key 1.0 (first at line 1)");
    assert_eq!(error("1: a\ntrue: b\n"), "line 2: duplicate key true (first at line 1)");
    assert_eq!(error("0x10: a\n16: b\n"), "line 2: duplicate key 16 (first at line 1)");
    assert_eq!(error("~: a\nnull: b\n"), "line 2: duplicate key null (first at line 1)");
    assert_eq!(error("1e20: a\n100000000000000000000: b\n"), "line 2: duplicate key 100000000000000000000 (first at line 1)");
    assert_eq!(error("-0.0: a\n0: b\n"), "line 2: duplicate key 0 (first at line 1)");
    assert_eq!(
        error("0x10000000000000000000000000: a\n1267650600228229401496703205376.0: b\n"),
        "line 2: duplicate key 1.2676506002282294e30 (first at line 1)"
    );
    // 1e30 is not 10**30 as a float, nor to Python.
    assert!(load("1e30: a\n1000000000000000000000000000000: b\n").is_ok());
    // Equal-looking keys of different kinds are different keys.
    let distinct = load("1: a\n'1': b\n1.5: c\nnull: d\n'null': e\n").unwrap();
    assert!(matches!(distinct, Value::Map(entries) if entries.len() == 5));
}

#[test]
fn a_mapping_with_many_keys_still_finds_the_duplicate() {
    let mut text: String = (0..50_000).map(|i| format!("k{i}: {i}\n")).collect();
    assert!(matches!(load(&text).unwrap(), Value::Map(entries) if entries.len() == 50_000));
    text.push_str("k777: again\n");
    assert_eq!(error(&text), "line 50001: duplicate key 'k777' (first at line 778)");
}

#[test]
fn keys_must_be_scalars() {
    assert_eq!(error("[a, b]: 1\n"), "line 1, column 1: a mapping key must be a scalar, not a collection");
    assert_eq!(error("x: 1\n? {a: 1}\n: 2\n"), "line 2, column 3: a mapping key must be a scalar, not a collection");
    assert_eq!(error("a: &s [1]\n*s : 2\n"), "line 2, column 1: a mapping key must be a scalar, not a collection");
}

#[test]
fn merge_keys_are_refused_but_a_quoted_one_is_a_plain_key() {
    assert_eq!(error("base: &b {x: 1}\nk:\n  <<: *b\n"), "line 3, column 3: merge keys (<<) are YAML 1.1, not 1.2: write the keys out");
    assert_eq!(load("'<<': 1\n").unwrap(), Value::Map(vec![(string("<<"), Value::Int(1))]));
    assert_eq!(one("<<"), string("<<"));
}

fn nested_flow(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

fn nested_block(levels: usize) -> String {
    (0..levels).map(|level| format!("{}k:\n", "  ".repeat(level))).collect()
}

#[test]
fn nesting_stops_at_the_limit() {
    let limit = Value::Seq(vec![]);
    let deepest = (1..MAX_DEPTH).fold(limit, |inner, _| Value::Seq(vec![inner]));
    assert_eq!(load(&nested_flow(MAX_DEPTH)).unwrap(), deepest);
    assert_eq!(error(&nested_flow(MAX_DEPTH + 1)), "line 1, column 201: nested deeper than 200 levels");
    // The parser's scanner reads runs of `[` ahead, up to its own limit of 255 levels.
    assert_eq!(error(&nested_flow(5_000)), "line 1, column 256: nested deeper than 200 levels");
    assert!(load(&nested_block(MAX_DEPTH)).is_ok());
    assert_eq!(error(&nested_block(5_000)), "line 201, column 401: nested deeper than 200 levels");
    let dashes = format!("{}x\n", "- ".repeat(5_000));
    assert_eq!(error(&dashes), "line 1, column 401: nested deeper than 200 levels");
}

#[test]
fn aliases_copy_their_node_within_the_limits() {
    let text = "common: &rules [{action: allow}]\na: *rules\nb: *rules\nport: &p 443\nc: *p\n";
    let rules = Value::Seq(vec![Value::Map(vec![(string("action"), string("allow"))])]);
    let expected = Value::Map(vec![
        (string("common"), rules.clone()),
        (string("a"), rules.clone()),
        (string("b"), rules),
        (string("port"), Value::Int(443)),
        (string("c"), Value::Int(443)),
    ]);
    assert_eq!(load(text).unwrap(), expected);
    assert_eq!(load("a: &x 1\nb: &x 2\nc: *x\n").unwrap(), load("a: 1\nb: 2\nc: 2\n").unwrap());
    assert_eq!(error("a: *nowhere\n"), "line 1, column 4: while parsing node, found unknown anchor");
    assert_eq!(error("a: &x [1, *x]\n"), "line 1, column 11: an alias inside the node it refers to");
    // An alias that would carry its node past the depth limit.
    let deep = format!("a: &deep {}\nb: {}*deep{}\n", nested_flow(MAX_DEPTH - 1), "[".repeat(2), "]".repeat(2));
    assert_eq!(error(&deep), "line 2, column 6: nested deeper than 200 levels");
}

#[test]
fn billion_laughs_stops_at_the_alias_budget() {
    let mut text = String::from("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..10 {
        text.push_str(&format!("l{level}: &l{level} [{}]\n", vec![format!("*l{}", level - 1); 10].join(", ")));
    }
    let err = error(&text);
    assert!(err.ends_with(": anchors and aliases copy more than 1000000 nodes"), "{err}");
}

#[test]
fn anchoring_every_level_of_a_deep_node_stops_at_the_copy_budget() {
    let payload = format!("[{}]", vec!["x"; 10_000].join(", "));
    let text = format!("{}{payload}{}", "&a [".repeat(150), "]".repeat(150));
    // Levels close from the inside out, each copying the payload again: the hundredth of them,
    // the 51st from the outside, passes the budget.
    assert_eq!(error(&text), "line 1, column 201: anchors and aliases copy more than 1000000 nodes");
}

#[test]
fn syntax_errors_name_line_and_column() {
    assert_eq!(error("tenants:\n  - name: a\n    vnis: [1, 2\n"), "line 4, column 1: while parsing a flow sequence, expected ',' or ']'");
    assert_eq!(error("key: \"open\n"), "line 1, column 6: while scanning a quoted scalar, found unexpected end of stream");
    assert_eq!(error("a:\n\tb: 1\n"), "line 2, column 2: tabs disallowed within this context (block indentation)");
    assert_eq!(error("a: 1\n---\nb: 2\n"), "line 2, column 1: expected one document, found a second");
    for text in ["a: [\n", "- a\nb: 1\n", "a: b: c\n", "{a: 1\n", "]\n", "a: 1\n  b: 2\n"] {
        let err = load(text).unwrap_err();
        assert!(matches!(&err, YamlError::Invalid { line, column, problem } if *line >= 1 && *column >= 1 && !problem.contains('\n')), "{text:?}: {err:?}");
    }
}

type Entries = Vec<(Value, Value)>;

/// `load_streaming(text, "t")` with what it handed over put back in place: the head it
/// handed, the items, and the document, or the error.
fn streamed(text: &str) -> (Option<Entries>, Result<Value, YamlError>) {
    let (mut head, mut items) = (None, Vec::new());
    let loaded = load_streaming(text, "t", &mut |part| match part {
        Streamed::Head(entries) => {
            assert!(head.is_none(), "one head");
            head = Some(entries);
        }
        Streamed::Item(item) => items.push(item),
    });
    let document = loaded.map(|mut document| {
        if head.is_some() {
            let Value::Map(entries) = &mut document else { panic!("a head comes from a root mapping") };
            let (_, seq) = entries.iter_mut().find(|(key, _)| *key == string("t")).unwrap();
            assert_eq!(*seq, Value::Seq(Vec::new()), "the streamed sequence is left empty");
            *seq = Value::Seq(items);
        } else {
            assert!(items.is_empty(), "items come after a head");
        }
        document
    });
    (head, document)
}

#[test]
fn streaming_hands_over_the_head_then_each_item() {
    let text = "a: 1\nt:\n  - {x: 1}\n  - [2, 3]\n  - 4\nz: 5\n";
    let (head, document) = streamed(text);
    assert_eq!(head, Some(vec![(string("a"), Value::Int(1))]));
    assert_eq!(document, load(text));
    // Anchors within the items, and aliases to them after, copy as they do when read whole.
    let text = "t: [&m {cir: 1}, *m]\nlater: *m\n";
    assert_eq!(streamed(text).1, load(text));
}

#[test]
fn streaming_leaves_alone_what_is_not_the_root_mappings_sequence() {
    for text in ["t: &all [1, 2]\nu: *all\n", "- t: [1]\n", "a:\n  t: [1, 2]\n", "t: 1\n", "t: {a: 1}\n", "u: [1, 2]\n", ""] {
        let (head, document) = streamed(text);
        assert_eq!(head, None, "{text:?}");
        assert_eq!(document, load(text), "{text:?}");
    }
}

#[test]
fn streaming_errors_are_those_of_a_whole_read() {
    for text in ["t: [1, 2\n", "t: [1]\nt: [2]\n", "t:\n  - a\n  - b: c: d\n", "t: [!!foo 1]\n", "t: [1]\n---\nt: [2]\n"] {
        assert_eq!(streamed(text).1, load(text), "{text:?}");
    }
}

proptest! {
    #[test]
    fn a_streamed_document_put_back_together_is_the_document(text in "(t: |t:\n|  - |- |u: |&a |\\*a |[-:,{}\\[\\] \n0-9a-z]){0,40}") {
        let (_, document) = streamed(&text);
        prop_assert_eq!(document, load(&text));
    }

    #[test]
    fn no_text_makes_the_loader_panic(text in "[ -~\t\n]{0,80}") {
        let _ = load(&text);
    }

    #[test]
    fn yaml_like_text_never_panics_and_errors_are_one_line(text in "([-:?,'\"!&*#|>{}\\[\\] \n0-9a-z.~]|  |!!int |!!str |&a |\\*a ){0,40}") {
        if let Err(err) = load(&text) {
            prop_assert!(!err.to_string().contains('\n'), "{:?}", err);
        }
    }

    #[test]
    fn integers_read_back_as_written(i in any::<i128>()) {
        prop_assert_eq!(one(&i.to_string()), Value::Int(i));
        if i >= 0 {
            prop_assert_eq!(one(&format!("0x{i:x}")), Value::Int(i));
            prop_assert_eq!(one(&format!("0o{i:o}")), Value::Int(i));
        }
    }

    #[test]
    fn floats_read_back_as_written(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        prop_assert_eq!(one(&format!("{f:e}")), Value::Float(f));
        prop_assert_eq!(one(&format!("{f:?}")), Value::Float(f));
    }
}
