//! The integer codes of the records' and compiled arrays' columns (a packet's colour, outcome,
//! reason, tunnel, a meter's kind, ...): each family is one Rust enum declared with `codes!`,
//! and that enum is the only place its names and values are written.
//!
//! Python reads them through `isolane._core.codes()` (`python/codes.rs`): `isolane.codes`
//! builds the enums (`isolane.Outcome`, ...) and the policy's code tables (`METER_KINDS`, ...)
//! from it. A code's name there is its variant's name in snake case (`DropMeter` is
//! `drop_meter`, `Outcome.DROP_METER` in Python).

use crate::error::CoreError;

/// A family of codes: a fieldless `#[repr(u8)]` enum declared with `codes!`.
pub trait Code: Copy + 'static {
    /// What the codes are codes of, for error messages ("colour", "meter kind").
    const WHAT: &'static str;
    /// Every variant with its name as written in Rust, in the order declared.
    const ALL: &'static [(&'static str, Self)];

    fn code(self) -> u8;

    /// The variant whose code is `code`, or an error listing them ("colour 5 is not 0
    /// (green), 1 (yellow) or 2 (red)").
    fn from_code(code: u8) -> Result<Self, CoreError> {
        if let Some(&(_, value)) = Self::ALL.iter().find(|(_, value)| value.code() == code) {
            return Ok(value);
        }
        let choices: Vec<String> = names::<Self>().into_iter().map(|(name, value)| format!("{value} ({name})")).collect();
        let (last, rest) = choices.split_last().map_or(("", &[][..]), |(last, rest)| (last.as_str(), rest));
        let listed = if rest.is_empty() { last.to_string() } else { format!("{} or {last}", rest.join(", ")) };
        Err(CoreError::spec(format!("{} {code} is not {listed}", Self::WHAT)))
    }
}

/// A family's names (snake case, as Python and the policy files write them) and codes.
pub fn names<C: Code>() -> Vec<(String, u8)> {
    C::ALL.iter().map(|&(name, value)| (snake_case(name), value.code())).collect()
}

/// `DropShaperBytes` -> `drop_shaper_bytes`, `Rfc4115` -> `rfc4115`.
fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Declares a fieldless enum as a family of codes: `#[repr(u8)]`, [`Code`] and `TryFrom<u8>`.
///
/// ```ignore
/// codes! {
///     /// A packet's colour.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Color: "colour" {
///         Green = 0,
///         Yellow = 1,
///         Red = 2,
///     }
/// }
/// ```
macro_rules! codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $what:literal {
            $($(#[$variant_meta:meta])* $variant:ident = $value:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        $vis enum $name {
            $($(#[$variant_meta])* $variant = $value,)+
        }

        impl $crate::codes::Code for $name {
            const WHAT: &'static str = $what;
            const ALL: &'static [(&'static str, Self)] = &[$((stringify!($variant), $name::$variant),)+];

            fn code(self) -> u8 {
                self as u8
            }
        }

        impl TryFrom<u8> for $name {
            type Error = $crate::error::CoreError;

            fn try_from(code: u8) -> Result<Self, $crate::error::CoreError> {
                <$name as $crate::codes::Code>::from_code(code)
            }
        }
    };
}
pub(crate) use codes;

#[cfg(test)]
mod tests {
    use super::*;

    codes! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Sample: "sample" {
            First = 0,
            WireFcs = 1,
            Rfc4115 = 3,
        }
    }

    #[test]
    fn names_are_the_variants_in_snake_case() {
        assert_eq!(names::<Sample>(), vec![("first".to_string(), 0), ("wire_fcs".to_string(), 1), ("rfc4115".to_string(), 3)]);
    }

    #[test]
    fn a_code_converts_back_and_an_unknown_one_is_named() {
        assert_eq!(Sample::try_from(3).unwrap(), Sample::Rfc4115);
        assert_eq!(Sample::try_from(2).unwrap_err().to_string(), "sample 2 is not 0 (first), 1 (wire_fcs) or 3 (rfc4115)");
    }
}
