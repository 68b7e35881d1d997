//! Scalars by the YAML 1.2 core schema (yaml.org/spec/1.2.2, section 10.3): what a plain scalar
//! resolves to, and what a scalar with one of the core tags means.

use std::borrow::Cow;

use super::Value;

/// The tags a node may carry: the core schema's, and `!`, which keeps a scalar a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CoreTag {
    Str,
    Int,
    Float,
    Bool,
    Null,
    Map,
    Seq,
    NonSpecific,
}

impl CoreTag {
    /// The tag the parser reports as `handle` + `suffix` (`!!int` arrives with the handle
    /// expanded, `!<tag:yaml.org,2002:int>` with the whole tag as suffix); `None` for any other.
    pub(super) fn from_parts(handle: &str, suffix: &str) -> Option<CoreTag> {
        let full = format!("{handle}{suffix}");
        let tag = match full.strip_prefix("tag:yaml.org,2002:") {
            Some("str") => CoreTag::Str,
            Some("int") => CoreTag::Int,
            Some("float") => CoreTag::Float,
            Some("bool") => CoreTag::Bool,
            Some("null") => CoreTag::Null,
            Some("map") => CoreTag::Map,
            Some("seq") => CoreTag::Seq,
            Some(_) => return None,
            None if full == "!" => CoreTag::NonSpecific,
            None => return None,
        };
        Some(tag)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            CoreTag::Str => "!!str",
            CoreTag::Int => "!!int",
            CoreTag::Float => "!!float",
            CoreTag::Bool => "!!bool",
            CoreTag::Null => "!!null",
            CoreTag::Map => "!!map",
            CoreTag::Seq => "!!seq",
            CoreTag::NonSpecific => "!",
        }
    }
}

/// How a tag the loader does not know is named in messages: `!!binary` rather than its expanded
/// form.
pub(super) fn shown_tag(handle: &str, suffix: &str) -> String {
    let full = format!("{handle}{suffix}");
    match full.strip_prefix("tag:yaml.org,2002:") {
        Some(core) => format!("!!{core}"),
        None if handle == "!" => full,
        None => format!("!<{full}>"),
    }
}

/// A plain (unquoted, untagged) scalar: null, bool, int or float when it has one of their
/// forms, a string otherwise; an integer beyond 128 bits is an error.
pub(super) fn resolve_plain(text: Cow<'_, str>) -> Result<Value, String> {
    // Most scalars in a policy are words such as `tcp` or `10Mbps`: the first character decides.
    let may_be_other = text.is_empty() || text.starts_with(|c: char| c.is_ascii_digit() || "+-.~nNtTfF".contains(c));
    if may_be_other {
        if let Some(value) = null(&text).or_else(|| boolean(&text)) {
            return Ok(value);
        }
        if let Some(int) = integer(&text) {
            return int.map(Value::Int);
        }
        if let Some(float) = float(&text) {
            return Ok(Value::Float(float));
        }
    }
    Ok(Value::Str(text.into_owned()))
}

/// A scalar with a core tag, which must have one of the tag's forms.
pub(super) fn resolve_tagged(text: &str, tag: CoreTag) -> Result<Value, String> {
    let value = match tag {
        CoreTag::Str | CoreTag::NonSpecific => Some(Value::Str(text.to_owned())),
        CoreTag::Null => null(text),
        CoreTag::Bool => boolean(text),
        CoreTag::Int => integer(text).transpose()?.map(Value::Int),
        // The float forms include decimal integers; hexadecimal and octal ones convert.
        CoreTag::Float => match float(text) {
            Some(float) => Some(Value::Float(float)),
            None => integer(text).transpose()?.map(|int| Value::Float(int as f64)),
        },
        CoreTag::Map | CoreTag::Seq => return Err(format!("{} on a scalar", tag.name())),
    };
    value.ok_or_else(|| format!("{text:?} is not a valid {}", tag.name()))
}

fn null(text: &str) -> Option<Value> {
    matches!(text, "" | "~" | "null" | "Null" | "NULL").then_some(Value::Null)
}

fn boolean(text: &str) -> Option<Value> {
    match text {
        "true" | "True" | "TRUE" => Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => Some(Value::Bool(false)),
        _ => None,
    }
}

/// `[-+]?[0-9]+` in decimal (leading zeros are not octal), `0o[0-7]+`, `0x[0-9a-fA-F]+`; `None`
/// for other forms, an error for one beyond 128 bits.
fn integer(text: &str) -> Option<Result<i128, String>> {
    let (negative, digits, radix) = if let Some(octal) = text.strip_prefix("0o") {
        (false, octal, 8)
    } else if let Some(hex) = text.strip_prefix("0x") {
        (false, hex, 16)
    } else if let Some(unsigned) = text.strip_prefix('-') {
        (true, unsigned, 10)
    } else {
        (false, text.strip_prefix('+').unwrap_or(text), 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok();
    let value = magnitude.and_then(|m| if negative { 0i128.checked_sub_unsigned(m) } else { i128::try_from(m).ok() });
    Some(value.ok_or_else(|| "an integer beyond 128 bits".to_owned()))
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` and the `.inf` and `.nan` forms.
fn float(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let sign = if text.starts_with('-') { -1.0 } else { 1.0 };
    match unsigned {
        ".inf" | ".Inf" | ".INF" => return Some(sign * f64::INFINITY),
        ".nan" | ".NaN" | ".NAN" if unsigned == text => return Some(f64::NAN),
        _ => {}
    }
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exponent_digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
    let well_formed =
        (!whole.is_empty() || !fraction.is_empty()) && digits(whole) && digits(fraction) && !exponent_digits.is_empty() && digits(exponent_digits);
    // The check above is the schema's; Rust's parser reads every string that passes it.
    well_formed.then(|| text.parse().expect("a core-schema float parses"))
}
