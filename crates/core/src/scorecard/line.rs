//! One journal line read for the scorecard: only the fields it counts,
//! borrowed from the line where they need no unescaping, everything else
//! skipped without being built. A field of an unexpected type (a body may
//! add fields of its own) is read as [`Scalar::Other`], never a refusal of
//! the whole line.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::journal::EventKind;

/// A field's value, as far as the scorecard cares.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Scalar<'a> {
    #[default]
    Absent,
    Str(Cow<'a, str>),
    Num(f64),
    Bool(bool),
    /// An object, an array or null.
    Other,
}

impl Scalar<'_> {
    pub fn str(&self) -> &str {
        match self {
            Scalar::Str(s) => s,
            _ => "",
        }
    }

    pub fn num(&self) -> Option<f64> {
        match self {
            Scalar::Num(n) => Some(*n),
            _ => None,
        }
    }

    pub fn is_true(&self) -> bool {
        matches!(self, Scalar::Bool(true))
    }

    pub fn is_present(&self) -> bool {
        !matches!(self, Scalar::Absent | Scalar::Other)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Scalar::Num(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Num(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Num(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The fields of an event that the scorecard reads; all others are skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Line<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Scalar<'a>,
    #[serde(borrow)]
    pub ts: Scalar<'a>,
    #[serde(borrow)]
    pub commit: Scalar<'a>,
    #[serde(borrow)]
    pub name: Scalar<'a>,
    #[serde(borrow)]
    pub id: Scalar<'a>,
    #[serde(borrow)]
    pub error: Scalar<'a>,
    #[serde(borrow)]
    pub status: Scalar<'a>,
    #[serde(borrow)]
    pub from: Scalar<'a>,
    #[serde(borrow)]
    pub to: Scalar<'a>,
    #[serde(borrow)]
    pub check: Scalar<'a>,
    #[serde(borrow)]
    pub undecided: Scalar<'a>,
    #[serde(borrow)]
    pub input_tokens: Scalar<'a>,
    #[serde(borrow)]
    pub output_tokens: Scalar<'a>,
    /// A note's kind.
    #[serde(rename = "kind", borrow)]
    pub note_kind: Scalar<'a>,
}

impl<'a> Line<'a> {
    /// Parses one line; `None` for anything that is not a whole JSON object
    /// with a string `type` (a torn last line, a stray byte).
    pub fn parse(bytes: &'a [u8]) -> Option<Line<'a>> {
        let line: Line<'a> = serde_json::from_slice(bytes).ok()?;
        matches!(line.kind, Scalar::Str(_)).then_some(line)
    }

    /// The kind, old names read as new; `None` for a type this build does
    /// not know.
    pub fn kind(&self) -> Option<EventKind> {
        EventKind::parse(self.kind.str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_needs_and_skips_the_rest() {
        let line = br#"{"type":"tool.result","ts":"t","seq":4,"commit":"c","id":"x1","output":"a\nb","error":true,"extra":{"deep":[1,2]}}"#;
        let l = Line::parse(line).expect("a whole event");
        assert_eq!(
            (l.kind(), l.id.str(), l.error.is_true()),
            (Some(EventKind::ToolResult), "x1", true)
        );
        let odd = br#"{"type":"reply","name":7,"status":{"a":1},"text":"hi"}"#;
        let l = Line::parse(odd).expect("odd fields do not refuse the line");
        assert_eq!((l.name.str(), l.status.is_present()), ("", false));
        assert_eq!(
            Line::parse(br#"{"type":"molt.requested"}"#).map(|l| l.kind()),
            Some(Some(EventKind::MutationRequested))
        );
        assert_eq!(Line::parse(br#"{"type":"a.b"}"#).map(|l| l.kind()), Some(None));
        for bad in [&br#"{"type":"reply","te"#[..], b"", b"[1]", br#"{"type":3}"#] {
            assert!(Line::parse(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
