//! What a line would cost to parse, found before it is parsed.
//!
//! One pass over the raw bytes of a JSON line, keeping only whether it is
//! inside a string (and after a backslash there), the nesting depth, and a
//! count of elements: every `[` and `{` and every `,` outside strings. A
//! JSON text holds at most that count plus one values (each value but the
//! first of a container follows a comma), so the count bounds what a parse
//! would build. A line over any of its [`Limits`] is refused before a
//! parser sees it; one within them costs the parser at most what the limits
//! allow. The scan does not check that the line is JSON: the parser does.
//!
//! Besides, it reports the raw bytes of the line's top-level `"type"`
//! string (the last such key, as a parser keeps the last), so a per-type
//! bound can be applied before parsing too; a type that holds an escape is
//! not reported (the caller applies its smallest bound).

/// What a line may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the line, its newline not counted.
    pub bytes: usize,
    /// Arrays and objects open at once (the top-level object is 1).
    pub depth: usize,
    /// Arrays, objects and commas outside strings.
    pub elements: usize,
}

/// Which limit a line passed; the figures say by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Over {
    #[error("{got} bytes, over the {limit} an event of this type may have")]
    Bytes { got: usize, limit: usize },
    #[error("nested deeper than {limit} arrays and objects")]
    Depth { limit: usize },
    #[error("more than {limit} elements (values, arrays and objects)")]
    Elements { limit: usize },
}

/// What a line within its limits holds, as far as the scan saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned<'a> {
    /// The raw bytes of the top-level `"type"` string, when it has no escape.
    pub kind: Option<&'a [u8]>,
    /// The deepest nesting seen.
    pub depth: usize,
    /// Arrays, objects and commas outside strings.
    pub elements: usize,
}

/// Where the scan is, for the top-level `"type"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// A string at depth 1 now would be a key.
    Expected,
    /// The key just read was `"type"`; a string after its `:` is the type.
    WasType,
    /// After `"type":`; the next string is the value.
    Value,
    Other,
}

/// Scans `line` against `limits`; see the module's comment.
pub fn scan<'a>(line: &'a [u8], limits: &Limits) -> Result<Scanned<'a>, Over> {
    if line.len() > limits.bytes {
        return Err(Over::Bytes { got: line.len(), limit: limits.bytes });
    }
    let (mut depth, mut deepest, mut elements) = (0usize, 0usize, 0usize);
    let (mut in_string, mut escaped, mut string_escaped) = (false, false, false);
    let mut string_start = 0usize;
    let mut key = Key::Other;
    let mut kind = None;
    for (i, &b) in line.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
                string_escaped = true;
            } else if b == b'"' {
                in_string = false;
                let text = &line[string_start..i];
                key = match key {
                    Key::Expected if depth == 1 => {
                        if text == b"type" && !string_escaped {
                            Key::WasType
                        } else {
                            Key::Other
                        }
                    }
                    Key::Value if depth == 1 => {
                        kind = (!string_escaped).then_some(text);
                        Key::Other
                    }
                    _ => Key::Other,
                };
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                string_escaped = false;
                string_start = i + 1;
            }
            b'[' | b'{' => {
                depth += 1;
                elements += 1;
                if depth > limits.depth {
                    return Err(Over::Depth { limit: limits.depth });
                }
                deepest = deepest.max(depth);
                key = if b == b'{' && depth == 1 { Key::Expected } else { Key::Other };
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                key = Key::Other;
            }
            b',' => {
                elements += 1;
                key = if depth == 1 { Key::Expected } else { Key::Other };
            }
            b':' => {
                key = if key == Key::WasType && depth == 1 { Key::Value } else { Key::Other };
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => {
                if key != Key::Expected {
                    key = Key::Other;
                }
            }
        }
        if elements > limits.elements {
            return Err(Over::Elements { limit: limits.elements });
        }
    }
    Ok(Scanned { kind, depth: deepest, elements })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits { bytes: 100, depth: 3, elements: 5 };

    /// What a scan tells: the type read, the depth, the elements.
    type Told = Result<(Option<&'static str>, usize, usize), Over>;

    #[test]
    fn scan_table() {
        let deep = "[".repeat(4);
        let wide = format!("[{}0]", "0,".repeat(5));
        let long = format!("\"{}\"", "x".repeat(99));
        let table: Vec<(&str, Told)> = vec![
            (r#"{"type":"reply","text":"hi"}"#, Ok((Some("reply"), 1, 2))),
            (r#"{"text":"a","type":"note"}"#, Ok((Some("note"), 1, 2))),
            (r#" { "type" : "log" } "#, Ok((Some("log"), 1, 1))),
            (r#"{"type":"a","type":"b"}"#, Ok((Some("b"), 1, 2))),
            (r#"{"t\u0079pe":"note"}"#, Ok((None, 1, 1))),
            (r#"{"type":"re\u0070ly"}"#, Ok((None, 1, 1))),
            (r#"{"x":{"type":"inner"}}"#, Ok((None, 2, 2))),
            (r#"{"x":"type","y":"z"}"#, Ok((None, 1, 2))),
            (r#"{"type":7}"#, Ok((None, 1, 1))),
            (r#"{"type":["note"]}"#, Ok((None, 2, 2))),
            (r#"{"text":"[[[[[,,,,,,]]]]]\"{{{{"}"#, Ok((None, 1, 1))),
            (r#"{"text":"\\","type":"x"}"#, Ok((Some("x"), 1, 2))),
            ("[[[]]]", Ok((None, 3, 3))),
            ("", Ok((None, 0, 0))),
            ("not json at all", Ok((None, 0, 0))),
            (&deep, Err(Over::Depth { limit: 3 })),
            (&wide, Err(Over::Elements { limit: 5 })),
            ("[[],[],[]]", Err(Over::Elements { limit: 5 })),
            (&long, Err(Over::Bytes { got: 101, limit: 100 })),
            ("]]]]]]]][", Ok((None, 1, 1))),
        ];
        for (line, want) in table {
            let got = scan(line.as_bytes(), &SMALL).map(|s| {
                (s.kind.map(|k| String::from_utf8_lossy(k).into_owned()), s.depth, s.elements)
            });
            let want = want.map(|(k, d, e)| (k.map(str::to_owned), d, e));
            assert_eq!(got, want, "{line}");
        }
    }

    /// The count bounds the values a parser builds: never fewer counted
    /// than values less one.
    #[test]
    fn elements_bound_the_values() {
        fn values(v: &serde_json::Value) -> usize {
            match v {
                serde_json::Value::Array(a) => 1 + a.iter().map(values).sum::<usize>(),
                serde_json::Value::Object(o) => 1 + o.values().map(values).sum::<usize>(),
                _ => 1,
            }
        }
        let wide = Limits { bytes: 1 << 20, depth: 64, elements: 1 << 20 };
        for line in [
            r#"{"type":"note","kind":"k","data":[1,2,[3,{"a":[]}],{}]}"#,
            "[[],[],[[[]]]]",
            r#"{"a":{"b":{"c":[null,true,false,"s,t"]}}}"#,
            "0",
        ] {
            let parsed: serde_json::Value = serde_json::from_str(line).expect("JSON");
            let counted = scan(line.as_bytes(), &wide).expect("within").elements;
            assert!(values(&parsed) <= counted + 1, "{line}: {} > {counted} + 1", values(&parsed));
        }
    }

    /// A line of megabytes is refused on its length before any byte of it
    /// is looked at, and a long flat one on its elements part way in.
    #[test]
    fn refuses_early() {
        let big = vec![b'['; 32 << 20];
        let limits = Limits { bytes: 1 << 20, depth: 32, elements: 65_536 };
        assert_eq!(scan(&big, &limits), Err(Over::Bytes { got: 32 << 20, limit: 1 << 20 }));
        let mut flat = b"[".to_vec();
        flat.extend(b"0,".repeat(400_000));
        flat.extend(b"0]");
        let limits = Limits { bytes: 1 << 20, depth: 32, elements: 65_536 };
        assert_eq!(scan(&flat, &limits), Err(Over::Elements { limit: 65_536 }));
    }
}
