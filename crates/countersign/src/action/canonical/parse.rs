//! The strict parser of JSON text into the value tree: duplicate keys, lone surrogates,
//! `-0`, unsafe integers, non-finite numbers and nesting past the limit are refused.

use std::cell::Cell;

use super::*;

/// Where the text comes from, which sets the integer rule and the depth limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// From outside the kernel (issue #19): an integer literal outside ±(2^53 − 1) is refused
    /// whatever its spelling (a sender who means a double writes a fraction or an exponent,
    /// `1e20`; one who means an integer sends a string), and nesting past [`MAX_DEPTH`].
    Outside,
    /// Canonical text this kernel wrote (INVARIANT canonical-text), never text from outside:
    /// an integer spelled as its double's canonical text (`100000000000000000000`, the canonical
    /// form of `1e20`) is kept, and nesting down to [`STORED_MAX_DEPTH`], the limit before
    /// issue #19, so stored rows written earlier still read.
    OwnOutput,
}

impl Source {
    fn depth_limit(self) -> usize {
        match self {
            Source::Outside => MAX_DEPTH,
            Source::OwnOutput => STORED_MAX_DEPTH,
        }
    }
}

pub(super) fn parse_document(
    text: &str,
    depth: usize,
    rule: Source,
) -> Result<Node, CanonicalError> {
    parse_located(text, depth, rule).map_err(|located| located.0)
}

/// As [`parse_document`], with the 1-based line and column (in characters) of the fault.
pub(crate) fn parse_located(
    text: &str,
    depth: usize,
    rule: Source,
) -> Result<Node, (CanonicalError, usize, usize)> {
    // Case B50 (d): the size is refused before a byte is parsed.
    if rule == Source::Outside && text.len() > super::MAX_TEXT_BYTES {
        return Err((
            CanonicalError::TooLarge {
                bytes: text.len(),
                limit: super::MAX_TEXT_BYTES,
            },
            1,
            1,
        ));
    }
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        position: 0,
        rule,
        fault: Cell::new(None),
    };
    let result = parser.document(depth);
    result.map_err(|error| {
        let offset = parser.fault.get().unwrap_or(parser.position);
        let (line, column) = line_and_column(text, offset);
        (error, line, column)
    })
}

/// 1-based line and column (in characters) of a byte offset of `text`.
pub(crate) fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

pub(super) struct Parser<'text> {
    text: &'text str,
    bytes: &'text [u8],
    /// Byte offset of the next unread byte, always on a character boundary between tokens.
    position: usize,
    rule: Source,
    /// Byte offset of the first fault met (the innermost: errors are raised there and only
    /// get a path prefix on the way out).
    fault: Cell<Option<usize>>,
}

impl Parser<'_> {
    fn document(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        self.skip_whitespace();
        let node = self.value(depth)?;
        self.skip_whitespace();
        if self.position < self.bytes.len() {
            return Err(self.syntax_error("unexpected text after the JSON value"));
        }
        Ok(node)
    }

    /// Remember `offset` as the fault's place (the first one set wins) and pass `error` on.
    fn fault_at(&self, offset: usize, error: CanonicalError) -> CanonicalError {
        if self.fault.get().is_none() {
            self.fault.set(Some(offset));
        }
        error
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.position += 1;
        }
    }

    fn syntax_error_at(&self, offset: usize, detail: &'static str) -> CanonicalError {
        let (line, column) = line_and_column(self.text, offset);
        self.fault_at(
            offset,
            CanonicalError::InvalidJson {
                line,
                column,
                detail,
            },
        )
    }

    fn syntax_error(&self, detail: &'static str) -> CanonicalError {
        self.syntax_error_at(self.position, detail)
    }

    fn expect_byte(&mut self, expected: u8, detail: &'static str) -> Result<(), CanonicalError> {
        if self.peek() == Some(expected) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.syntax_error(detail))
        }
    }

    /// A value enclosed by `depth` arrays and objects.
    fn value(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        match self.peek() {
            Some(b'{') => {
                let inner = enter_within(depth, self.rule.depth_limit())
                    .map_err(|error| self.fault_at(self.position, error))?;
                self.object(inner)
            }
            Some(b'[') => {
                let inner = enter_within(depth, self.rule.depth_limit())
                    .map_err(|error| self.fault_at(self.position, error))?;
                self.array(inner)
            }
            Some(b'"') => Ok(Node::String(self.string()?)),
            Some(b't') => self.literal("true", Node::Bool(true)),
            Some(b'f') => self.literal("false", Node::Bool(false)),
            Some(b'n') => self.literal("null", Node::Null),
            Some(b'N') => self.non_finite("NaN"),
            Some(b'I') => self.non_finite("Infinity"),
            Some(b'-') if self.bytes.get(self.position + 1) == Some(&b'I') => {
                self.non_finite("-Infinity")
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            None => Err(self.syntax_error("expected a JSON value, found the end of the text")),
            Some(_) => Err(self.syntax_error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &str, node: Node) -> Result<Node, CanonicalError> {
        if self.bytes[self.position..].starts_with(word.as_bytes()) {
            self.position += word.len();
            Ok(node)
        } else {
            Err(self.syntax_error("expected a JSON value"))
        }
    }

    fn non_finite(&mut self, word: &'static str) -> Result<Node, CanonicalError> {
        if self.bytes[self.position..].starts_with(word.as_bytes()) {
            Err(self.fault_at(
                self.position,
                CanonicalError::NotFinite {
                    path: String::new(),
                    value: word.to_owned(),
                },
            ))
        } else {
            Err(self.syntax_error("expected a JSON value"))
        }
    }

    /// An object whose own level is `depth`.
    fn object(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        self.position += 1; // `{`
        let mut members = Vec::new();
        let mut key_offsets = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.position += 1;
            return object_node(members);
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.syntax_error("expected a string key"));
            }
            key_offsets.push(self.position);
            let key = self.string()?;
            self.skip_whitespace();
            self.expect_byte(b':', "expected `:` after an object key")?;
            self.skip_whitespace();
            let value = self
                .value(depth)
                .map_err(|error| error.nested_under(&key))?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') => {
                    self.position += 1;
                    return self.close_object(members, &key_offsets);
                }
                _ => return Err(self.syntax_error("expected `,` or `}` after an object member")),
            }
        }
    }

    /// The object of `members`, or the duplicate key placed at its second occurrence.
    fn close_object(
        &self,
        members: Vec<(String, Node)>,
        key_offsets: &[usize],
    ) -> Result<Node, CanonicalError> {
        object_node(members).map_err(|error| {
            let offset = match &error {
                CanonicalError::DuplicateKey { key, .. } => {
                    // The place of the key's second occurrence; keys are few per object and
                    // this runs only on the refusal.
                    let mut seen = 0;
                    let mut place = self.position;
                    for &start in key_offsets {
                        let mut probe = Parser {
                            text: self.text,
                            bytes: self.bytes,
                            position: start,
                            rule: self.rule,
                            fault: Cell::new(None),
                        };
                        if probe.string().is_ok_and(|text| &text == key) {
                            seen += 1;
                            if seen == 2 {
                                place = start;
                                break;
                            }
                        }
                    }
                    place
                }
                _ => self.position,
            };
            self.fault_at(offset, error)
        })
    }

    /// An array whose own level is `depth`.
    fn array(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        self.position += 1; // `[`
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.position += 1;
            return Ok(Node::Array(items));
        }
        loop {
            self.skip_whitespace();
            let index = items.len();
            let item = self
                .value(depth)
                .map_err(|error| error.nested_under_index(index))?;
            items.push(item);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {
                    self.position += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.syntax_error("expected `,` or `]` after an array element")),
            }
        }
    }

    fn string(&mut self) -> Result<String, CanonicalError> {
        self.position += 1; // `"`
        let mut out = String::new();
        let mut run_start = self.position;
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.syntax_error("unterminated string"));
            };
            match byte {
                b'"' => {
                    out.push_str(&self.text[run_start..self.position]);
                    self.position += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run_start..self.position]);
                    let character = self.escape()?;
                    out.push(character);
                    run_start = self.position;
                }
                0x00..=0x1f => {
                    return Err(self.syntax_error(
                        "control character in a string: write it as a `\\u` escape",
                    ));
                }
                // Bytes of a multi-byte character are all >= 0x80: runs end on ASCII bytes,
                // so each run is whole characters.
                _ => self.position += 1,
            }
        }
    }

    /// One escape sequence, the backslash at `position`.
    fn escape(&mut self) -> Result<char, CanonicalError> {
        let backslash = self.position;
        self.position += 1;
        let Some(kind) = self.peek() else {
            return Err(self.syntax_error("unterminated string"));
        };
        self.position += 1;
        let simple = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(backslash),
            _ => return Err(self.syntax_error_at(backslash, "unknown escape in a string")),
        };
        Ok(simple)
    }

    /// The rest of a `\uXXXX` escape (and of its low surrogate escape, if it starts a pair).
    fn unicode_escape(&mut self, backslash: usize) -> Result<char, CanonicalError> {
        let unit = self.hex4()?;
        match unit {
            0xD800..=0xDBFF => {
                let rest = &self.bytes[self.position..];
                if !rest.starts_with(b"\\u") {
                    return Err(self.lone_surrogate(backslash));
                }
                let saved = self.position;
                self.position += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    self.position = saved;
                    return Err(self.lone_surrogate(backslash));
                }
                let scalar =
                    0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                Ok(char::from_u32(scalar).expect("a surrogate pair always decodes to a scalar"))
            }
            0xDC00..=0xDFFF => Err(self.lone_surrogate(backslash)),
            other => {
                Ok(char::from_u32(u32::from(other)).expect("a non-surrogate unit is a scalar"))
            }
        }
    }

    fn lone_surrogate(&self, backslash: usize) -> CanonicalError {
        let (line, column) = line_and_column(self.text, backslash);
        self.fault_at(
            backslash,
            CanonicalError::LoneSurrogate {
                path: String::new(),
                line,
                column,
            },
        )
    }

    fn hex4(&mut self) -> Result<u16, CanonicalError> {
        let mut unit: u16 = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(byte @ b'0'..=b'9') => byte - b'0',
                Some(byte @ b'a'..=b'f') => byte - b'a' + 10,
                Some(byte @ b'A'..=b'F') => byte - b'A' + 10,
                _ => return Err(self.syntax_error("expected four hex digits after `\\u`")),
            };
            unit = unit * 16 + u16::from(digit);
            self.position += 1;
        }
        Ok(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.position;
        while let Some(b'0'..=b'9') = self.peek() {
            self.position += 1;
        }
        self.position - start
    }

    /// RFC 8259 section 6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Result<Node, CanonicalError> {
        let start = self.position;
        if self.peek() == Some(b'-') {
            self.position += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.position += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.syntax_error("a number must not have leading zeros"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.syntax_error("expected a digit")),
        }
        let mut is_integer_literal = true;
        if self.peek() == Some(b'.') {
            is_integer_literal = false;
            self.position += 1;
            if self.digits() == 0 {
                return Err(self.syntax_error("expected a digit after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            is_integer_literal = false;
            self.position += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.position += 1;
            }
            if self.digits() == 0 {
                return Err(self.syntax_error("expected a digit in the exponent"));
            }
        }
        let literal = &self.text[start..self.position];
        // Rust's f64 parser accepts this grammar and rounds correctly, to the nearest double.
        let value: f64 = literal
            .parse()
            .expect("the RFC 8259 number grammar is a subset of what f64::from_str accepts");
        if !value.is_finite() {
            return Err(self.fault_at(
                start,
                CanonicalError::NotFinite {
                    path: String::new(),
                    value: cut_literal(literal),
                },
            ));
        }
        let node = number_node(value).map_err(|error| self.fault_at(start, error))?;
        if is_integer_literal && !is_safe_integer_literal(literal) {
            // INVARIANT (one integer rule): refused, as `integer_node` refuses a Rust integer
            // outside the range; canonical text this kernel wrote keeps its spelling.
            let kept = self.rule == Source::OwnOutput && is_canonical_integer_spelling(literal);
            if !kept {
                return Err(self.fault_at(
                    start,
                    CanonicalError::UnsafeInteger {
                        path: String::new(),
                        value: cut_literal(literal),
                    },
                ));
            }
        }
        Ok(node)
    }
}

/// Whether an integer literal (`-?digits`, no leading zeros) is within ±(2^53 − 1).
pub(super) fn is_safe_integer_literal(literal: &str) -> bool {
    const MAX_SAFE_DIGITS: &str = "9007199254740991";
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    digits.len() < MAX_SAFE_DIGITS.len()
        || (digits.len() == MAX_SAFE_DIGITS.len() && digits <= MAX_SAFE_DIGITS)
}

/// The level of a container opened inside `depth` enclosing ones, or `TooDeep` past
/// [`MAX_DEPTH`].
pub(crate) fn enter(depth: usize) -> Result<usize, CanonicalError> {
    enter_within(depth, MAX_DEPTH)
}

fn enter_within(depth: usize, limit: usize) -> Result<usize, CanonicalError> {
    if depth >= limit {
        Err(CanonicalError::TooDeep {
            path: String::new(),
            limit,
        })
    } else {
        Ok(depth + 1)
    }
}
