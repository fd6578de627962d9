//! Writing JSON5 that people read and git diffs well.
//!
//! Output is deterministic: properties in the order the caller gives, two-space indentation, one
//! property per line, a trailing comma after every property (so adding one changes one line) and
//! a final newline. Keys that are plain identifiers stay unquoted. Multi-line strings (HFX
//! sources) are written one source line per file line using JSON5 line continuations, so a
//! change to one line of a screen shows as one changed line.

/// A JSON5 value to write. Objects keep the order of their entries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// An object with its entries in writing order.
    Obj(Vec<(String, Value)>),
    /// An array, one item per line; objects inside it are written on their item's line
    /// (`{ key: "won", label: "Won" }`), so adding a picklist choice changes one line.
    List(Vec<Value>),
}

/// Builds an object entry by entry, skipping absent optional values.
#[derive(Debug, Default)]
pub(crate) struct ObjBuilder {
    entries: Vec<(String, Value)>,
}

impl ObjBuilder {
    pub(crate) fn str(mut self, key: &str, value: &str) -> Self {
        self.entries
            .push((key.to_owned(), Value::Str(value.to_owned())));
        self
    }

    pub(crate) fn opt_str(self, key: &str, value: Option<&str>) -> Self {
        match value {
            Some(value) => self.str(key, value),
            None => self,
        }
    }

    /// Writes a boolean only when it is true: false is every boolean's default.
    pub(crate) fn flag(mut self, key: &str, value: bool) -> Self {
        if value {
            self.entries.push((key.to_owned(), Value::Bool(true)));
        }
        self
    }

    pub(crate) fn int(mut self, key: &str, value: i64) -> Self {
        self.entries.push((key.to_owned(), Value::Int(value)));
        self
    }

    /// Writes a nested object only when it has entries.
    pub(crate) fn non_empty_obj(mut self, key: &str, entries: Vec<(String, Value)>) -> Self {
        if !entries.is_empty() {
            self.entries.push((key.to_owned(), Value::Obj(entries)));
        }
        self
    }

    /// Writes an array, even an empty one.
    pub(crate) fn list(mut self, key: &str, items: Vec<Value>) -> Self {
        self.entries.push((key.to_owned(), Value::List(items)));
        self
    }

    pub(crate) fn build(self) -> Value {
        Value::Obj(self.entries)
    }
}

/// The whole file text for a value, ending in a newline.
pub(crate) fn to_text(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

fn write_value(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Str(text) => write_string(out, text),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Int(number) => out.push_str(&number.to_string()),
        Value::Obj(entries) if entries.is_empty() => out.push_str("{}"),
        Value::Obj(entries) => {
            out.push_str("{\n");
            for (key, entry) in entries {
                push_indent(out, indent + 2);
                write_key(out, key);
                out.push_str(": ");
                write_value(out, entry, indent + 2);
                out.push_str(",\n");
            }
            push_indent(out, indent);
            out.push('}');
        }
        Value::List(items) if items.is_empty() => out.push_str("[]"),
        Value::List(items) => {
            out.push_str("[\n");
            for item in items {
                push_indent(out, indent + 2);
                write_inline(out, item);
                out.push_str(",\n");
            }
            push_indent(out, indent);
            out.push(']');
        }
    }
}

/// A value on one line: `{ key: "won", label: "Won" }`.
fn write_inline(out: &mut String, value: &Value) {
    match value {
        Value::Obj(entries) => {
            out.push_str("{ ");
            for (at, (key, entry)) in entries.iter().enumerate() {
                if at > 0 {
                    out.push_str(", ");
                }
                write_key(out, key);
                out.push_str(": ");
                write_inline(out, entry);
            }
            out.push_str(" }");
        }
        Value::List(items) => {
            out.push('[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.push_str(", ");
                }
                write_inline(out, item);
            }
            out.push(']');
        }
        scalar => write_value(out, scalar, 0),
    }
}

fn push_indent(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Whether a key can be written without quotes: an ASCII identifier.
fn is_plain_key(key: &str) -> bool {
    let mut chars = key.chars();
    let start_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$');
    start_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn write_key(out: &mut String, key: &str) {
    if is_plain_key(key) {
        out.push_str(key);
    } else {
        write_string(out, key);
    }
}

/// A double-quoted string; each `\n` in the text ends a file line with a line continuation.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n\\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
