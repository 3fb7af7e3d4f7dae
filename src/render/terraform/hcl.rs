//! A small HCL writer whose output is already in `terraform fmt` form (two-space indent, `=`
//! aligned over each run of single-line attributes, one blank line between blocks), so a
//! generated root module passes `terraform fmt -check` without Terraform installed. hcl-rs's own
//! formatter does not align `=`, which is why the few rules are written out here; the tests
//! compare the output with `terraform fmt` where the binary exists.
//!
//! Every string from user input goes through [`quote`], which escapes what HCL would otherwise
//! read as syntax: quotes, backslashes, control characters, and the template introducers `${`
//! and `%{`.

use std::fmt::Write as _;

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string literal (escaped when written).
    Str(String),
    Int(i64),
    /// A number with a fractional part, written with at most two decimals (money).
    Money(f64),
    Bool(bool),
    /// A reference to another object (`var.x`, `module.y.id`, `aws.us_east_1`): trusted text
    /// built by gpucap from sanitised identifiers, written as is. tf-json wraps it in `${…}`.
    Ref(String),
    /// A type expression (`list(string)`), written as is in HCL and as a plain string in JSON.
    Type(String),
    List(Vec<Value>),
    /// Keys in the given order.
    Object(Vec<(String, Value)>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    fn is_single_line(&self) -> bool {
        match self {
            Value::List(items) => items
                .iter()
                .all(|v| !matches!(v, Value::List(_) | Value::Object(_)) && v.is_single_line()),
            Value::Object(entries) => entries.is_empty(),
            _ => true,
        }
    }
}

/// A body item: attribute, nested block, comment line, or blank line.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Attr(String, Value),
    Block(Block),
    /// One `#` comment line (the text is made single-line and control-free when written).
    Comment(String),
    Blank,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub ident: String,
    pub labels: Vec<String>,
    pub body: Vec<Item>,
}

impl Block {
    pub fn new(ident: &str, labels: &[&str]) -> Block {
        Block {
            ident: ident.to_string(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            body: Vec::new(),
        }
    }

    pub fn attr(mut self, key: &str, value: Value) -> Block {
        self.body.push(Item::Attr(key.to_string(), value));
        self
    }

    pub fn item(mut self, item: Item) -> Block {
        self.body.push(item);
        self
    }
}

/// One output line before alignment: indent level, and either an alignable `key = value` pair
/// or free text.
enum Line {
    Assign {
        indent: usize,
        key: String,
        value: String,
    },
    Text {
        indent: usize,
        text: String,
    },
    Blank,
}

/// Writes a file body: top-level items in order.
pub fn to_string(items: &[Item]) -> String {
    let mut lines = Vec::new();
    body(items, 0, &mut lines);
    render(&lines)
}

fn body(items: &[Item], indent: usize, out: &mut Vec<Line>) {
    for item in items {
        match item {
            Item::Attr(key, value) => attribute(&key_text(key), value, indent, out),
            Item::Block(b) => block(b, indent, out),
            Item::Comment(text) => out.push(Line::Text {
                indent,
                text: comment(text),
            }),
            Item::Blank => out.push(Line::Blank),
        }
    }
}

fn block(b: &Block, indent: usize, out: &mut Vec<Line>) {
    let mut head = b.ident.clone();
    for label in &b.labels {
        head.push(' ');
        head.push_str(&quote(label));
    }
    if b.body.is_empty() {
        out.push(Line::Text {
            indent,
            text: format!("{head} {{}}"),
        });
        return;
    }
    out.push(Line::Text {
        indent,
        text: format!("{head} {{"),
    });
    body(&b.body, indent + 1, out);
    out.push(Line::Text {
        indent,
        text: "}".into(),
    });
}

fn attribute(key: &str, value: &Value, indent: usize, out: &mut Vec<Line>) {
    if value.is_single_line() {
        out.push(Line::Assign {
            indent,
            key: key.to_string(),
            value: inline(value),
        });
        return;
    }
    match value {
        Value::List(items) => {
            out.push(Line::Text {
                indent,
                text: format!("{key} = ["),
            });
            list_items(items, indent + 1, out);
            out.push(Line::Text {
                indent,
                text: "]".into(),
            });
        }
        Value::Object(entries) => {
            out.push(Line::Text {
                indent,
                text: format!("{key} = {{"),
            });
            for (k, v) in entries {
                attribute(&key_text(k), v, indent + 1, out);
            }
            out.push(Line::Text {
                indent,
                text: "}".into(),
            });
        }
        _ => unreachable!("scalars are single-line"),
    }
}

/// Multi-line list elements, each followed by a comma.
fn list_items(items: &[Value], indent: usize, out: &mut Vec<Line>) {
    for item in items {
        match item {
            Value::Object(entries) if !entries.is_empty() => {
                out.push(Line::Text {
                    indent,
                    text: "{".into(),
                });
                for (k, v) in entries {
                    attribute(&key_text(k), v, indent + 1, out);
                }
                out.push(Line::Text {
                    indent,
                    text: "},".into(),
                });
            }
            Value::List(inner) if !item.is_single_line() => {
                out.push(Line::Text {
                    indent,
                    text: "[".into(),
                });
                list_items(inner, indent + 1, out);
                out.push(Line::Text {
                    indent,
                    text: "],".into(),
                });
            }
            _ => out.push(Line::Text {
                indent,
                text: format!("{},", inline(item)),
            }),
        }
    }
}

/// A value on one line (scalars, lists of scalars, empty objects).
fn inline(value: &Value) -> String {
    match value {
        Value::Str(s) => quote(s),
        Value::Int(n) => n.to_string(),
        Value::Money(x) => money(*x),
        Value::Bool(b) => b.to_string(),
        Value::Ref(r) | Value::Type(r) => r.clone(),
        Value::List(items) => {
            let inner: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(_) => "{}".into(),
    }
}

/// Dollars with cents, without trailing zeros: `330000`, `12.5`, `0.01`.
pub fn money(x: f64) -> String {
    let cents = (x * 100.0).round() as i64;
    let (whole, frac) = (cents / 100, (cents % 100).abs());
    match frac {
        0 => whole.to_string(),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    }
}

/// An attribute or object key: bare when it is an identifier, quoted otherwise.
fn key_text(key: &str) -> String {
    let mut chars = key.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !matches!(key, "true" | "false" | "null");
    if ident { key.to_string() } else { quote(key) }
}

/// A quoted HCL string whose parsed value is exactly `s`: no interpolation, no directive, and
/// every control or invisible formatting character written as a `\u` escape.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    out.push_str(&escape_template(s));
    out.push('"');
    out
}

/// The inside of a quoted template (shared with tf-json, whose strings are templates too,
/// though JSON's own escaping is left to the JSON writer there).
pub fn escape_template(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if needs_unicode_escape(c) => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The template introducers doubled, nothing else changed (for tf-json, where the JSON writer
/// escapes quotes and control characters).
pub fn escape_interpolation(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if matches!(c, '$' | '%') && chars.peek() == Some(&'{') {
            out.push(c);
        }
    }
    out
}

/// Control characters, and the invisible characters that can make text read differently from
/// what it is (bidirectional overrides, line and paragraph separators, zero-width marks).
fn needs_unicode_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// A `#` comment line: anything that could end the line or hide text is escaped.
fn comment(text: &str) -> String {
    let mut out = String::from("#");
    if !text.is_empty() {
        out.push(' ');
    }
    for c in text.chars() {
        if needs_unicode_escape(c) {
            let _ = write!(out, "\\u{:04X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out.trim_end().to_string()
}

fn render(lines: &[Line]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        match &lines[i] {
            Line::Blank => {
                out.push('\n');
                i += 1;
            }
            Line::Text { indent, text } => {
                let _ = writeln!(out, "{}{text}", "  ".repeat(*indent));
                i += 1;
            }
            Line::Assign { .. } => {
                // terraform fmt puts every `=` of a run of single-line attributes one space
                // after the run's longest key (counted in characters).
                let run_end = lines[i..]
                    .iter()
                    .position(|l| !matches!(l, Line::Assign { .. }))
                    .map_or(lines.len(), |n| i + n);
                let width = lines[i..run_end]
                    .iter()
                    .map(|l| match l {
                        Line::Assign { key, .. } => key.chars().count(),
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0);
                for line in &lines[i..run_end] {
                    if let Line::Assign { indent, key, value } = line {
                        let pad = width - key.chars().count();
                        let _ = writeln!(
                            out,
                            "{}{key}{} = {value}",
                            "  ".repeat(*indent),
                            " ".repeat(pad)
                        );
                    }
                }
                i = run_end;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_attributes_align_and_blocks_break_runs() {
        let items = vec![
            Item::Block(
                Block::new("module", &["a"])
                    .attr("source", Value::str("./modules/x"))
                    .attr("instance_count", Value::Int(8))
                    .item(Item::Blank)
                    .attr(
                        "tags",
                        Value::Object(vec![
                            ("Pool".into(), Value::str("h100")),
                            ("gpucap:x".into(), Value::str("y")),
                        ]),
                    )
                    .attr("zones", Value::List(vec![Value::str("1")])),
            ),
            Item::Blank,
            Item::Block(
                Block::new("provider", &["azurerm"]).item(Item::Block(Block::new("features", &[]))),
            ),
        ];
        assert_eq!(
            to_string(&items),
            r#"module "a" {
  source         = "./modules/x"
  instance_count = 8

  tags = {
    Pool       = "h100"
    "gpucap:x" = "y"
  }
  zones = ["1"]
}

provider "azurerm" {
  features {}
}
"#
        );
    }

    #[test]
    fn strings_cannot_interpolate_or_break_out() {
        assert_eq!(quote("${jndi}"), r#""$${jndi}""#);
        assert_eq!(quote("%{ for x in y }"), r#""%%{ for x in y }""#);
        assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(quote("bell\u{7}\u{202E}"), r#""bell\u0007\u202E""#);
        assert_eq!(quote("GPU 🚀 é"), "\"GPU 🚀 é\"");
        assert_eq!(quote("$x %y $"), r#""$x %y $""#);
        assert_eq!(comment("a\nb"), r"# a\u000Ab");
    }

    #[test]
    fn money_keeps_cents_only() {
        assert_eq!(money(330000.0), "330000");
        assert_eq!(money(12.5), "12.5");
        assert_eq!(money(0.014), "0.01");
        assert_eq!(money(1234.567), "1234.57");
    }
}
