//! Text as an approver is shown it: every misreadable character escaped, and each finding
//! (bidirectional controls, invisible characters, text not in NFC, mixed scripts) listed.

use super::*;

/// `text` as a person is shown it: escaped, with its findings (see the module docs for the
/// classes and the escape grammar).
///
/// # Panics
///
/// Never.
pub fn shown(text: &str) -> ShownText {
    let characters: Vec<char> = text.chars().collect();
    let mut escape = vec![false; characters.len()];
    let mut findings = Vec::new();
    if characters.is_empty() {
        findings.push(Finding {
            kind: FindingKind::Empty,
            start: 0,
            end: 0,
            code_points: Vec::new(),
            note: None,
        });
    }
    // Per code point classes, consecutive ones of one kind as one finding.
    let mut run: Option<Finding> = None;
    for (index, &character) in characters.iter().enumerate() {
        let kind = class_of(character);
        if kind.is_some() {
            escape[index] = true;
        }
        match (&mut run, kind) {
            (Some(open), Some(kind)) if open.kind == kind && open.end == index => {
                open.end = index + 1;
                open.code_points.push(code_point(character));
            }
            (_, kind) => {
                if let Some(done) = run.take() {
                    findings.push(done);
                }
                run = kind.map(|kind| Finding {
                    kind,
                    start: index,
                    end: index + 1,
                    code_points: vec![code_point(character)],
                    note: None,
                });
            }
        }
    }
    findings.extend(run);
    for (start, end) in not_nfc_spans(&characters) {
        let span: String = characters[start..end].iter().collect();
        // Every code point but a first one that is NFC by itself: `e\u{301}`, `\u{212b}`.
        let keep_first = characters[start].to_string().nfc().eq([characters[start]]);
        for flag in &mut escape[start + usize::from(keep_first)..end] {
            *flag = true;
        }
        let normalized: String = span.nfc().collect();
        findings.push(Finding {
            kind: FindingKind::NotNfc,
            start,
            end,
            code_points: characters[start..end]
                .iter()
                .copied()
                .map(code_point)
                .collect(),
            note: Some(format!("NFC: {}", escape_plain(&normalized))),
        });
    }
    for token in mixed_script_tokens(&characters) {
        for &index in &token.confusable {
            escape[index] = true;
        }
        findings.push(Finding {
            kind: FindingKind::MixedScript,
            start: token.start,
            end: token.end,
            code_points: token
                .minority
                .iter()
                .map(|&index| code_point(characters[index]))
                .collect(),
            note: Some(token.scripts),
        });
    }
    findings.sort_by_key(|finding| (finding.start, finding.kind, finding.end));
    ShownText {
        text: write_escaped(&characters, &escape),
        findings,
    }
}

/// `U+XXXX`.
pub(super) fn code_point(character: char) -> String {
    format!("U+{:04X}", u32::from(character))
}

/// Write `characters`, escaping those flagged, and a backslash that would read as an escape.
pub(super) fn write_escaped(characters: &[char], escape: &[bool]) -> String {
    let mut out = String::with_capacity(characters.len() + 16);
    for (index, &character) in characters.iter().enumerate() {
        // INVARIANT (unescape-inverse): a shown `\` followed by `u{` always opens an escape;
        // a literal backslash is escaped exactly when the shown text after it would begin with
        // `u{` (`u` and `{` are never escaped themselves unless flagged, which shows `\`).
        let looks_like_escape = character == '\\'
            && !escape.get(index + 1).copied().unwrap_or(true)
            && characters.get(index + 1) == Some(&'u')
            && !escape.get(index + 2).copied().unwrap_or(true)
            && characters.get(index + 2) == Some(&'{');
        if escape[index] || looks_like_escape {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(character));
        } else {
            out.push(character);
        }
    }
    out
}

/// `text` with only the per-code-point classes escaped (for notes).
pub(super) fn escape_plain(text: &str) -> String {
    let characters: Vec<char> = text.chars().collect();
    let escape: Vec<bool> = characters
        .iter()
        .map(|&character| class_of(character).is_some())
        .collect();
    write_escaped(&characters, &escape)
}

/// The original text of a shown text: each `\u{HEX}` (1 to 6 hex digits naming a Unicode
/// scalar value) becomes that character; everything else is kept as it is.
///
/// For any `text`, `unescape(&shown(text).text) == text`.
///
/// # Panics
///
/// Never.
pub fn unescape(shown_text: &str) -> String {
    let mut out = String::with_capacity(shown_text.len());
    let mut rest = shown_text;
    while let Some(at) = rest.find("\\u{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let decoded = after.find('}').and_then(|close| {
            let digits = &after[..close];
            let valid = (1..=6).contains(&digits.len())
                && digits.chars().all(|digit| digit.is_ascii_hexdigit());
            valid
                .then(|| u32::from_str_radix(digits, 16).ok())
                .flatten()
                .and_then(char::from_u32)
                .map(|character| (character, close))
        });
        match decoded {
            Some((character, close)) => {
                out.push(character);
                rest = &after[close + 1..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The per-code-point class of `character`, in order of precedence, if it has one.
pub fn class_of(character: char) -> Option<FindingKind> {
    if character.is_control() {
        Some(FindingKind::Control)
    } else if is_bidi_control(character) {
        Some(FindingKind::BidiControl)
    } else if is_default_ignorable(character) {
        Some(FindingKind::DefaultIgnorable)
    } else if character.is_whitespace() && character != ' ' {
        Some(FindingKind::Whitespace)
    } else {
        None
    }
}

/// Is `character` a bidirectional formatting control (UAX #9 §2: ALM U+061C, LRM/RLM
/// U+200E–U+200F, LRE/RLE/PDF/LRO/RLO U+202A–U+202E, LRI/RLI/FSI/PDI U+2066–U+2069)?
pub fn is_bidi_control(character: char) -> bool {
    matches!(
        character,
        '\u{061C}' | '\u{200E}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

pub use crate::text::is_default_ignorable;

/// Spans (code point ranges) of `characters` not in NFC.
///
/// The text is cut into segments, each a starter (canonical combining class 0) and the
/// non-starters after it; a segment is in a span when it is not NFC by itself, or when both it
/// and the segment before it are NFC by themselves but not together (starters can compose: Hangul jamo). Adjacent marked
/// segments form one span. Should the whole text not be NFC with no segment marked, the whole
/// text is one span, so a non-NFC text is never unmarked.
pub(super) fn not_nfc_spans(characters: &[char]) -> Vec<(usize, usize)> {
    let text: String = characters.iter().collect();
    if unicode_normalization::is_nfc(&text) {
        return Vec::new();
    }
    let mut bounds = Vec::new();
    for (index, &character) in characters.iter().enumerate() {
        if index == 0 || canonical_combining_class(character) == 0 {
            bounds.push(index);
        }
    }
    bounds.push(characters.len());
    let segment = |number: usize| -> String {
        characters[bounds[number]..bounds[number + 1]]
            .iter()
            .collect()
    };
    let count = bounds.len() - 1;
    let mut marked = vec![false; count];
    let mut alone_nfc = vec![true; count];
    for number in 0..count {
        let alone = segment(number);
        alone_nfc[number] = unicode_normalization::is_nfc(&alone);
        if !alone_nfc[number] {
            marked[number] = true;
        }
        if number > 0 && alone_nfc[number] && alone_nfc[number - 1] {
            let pair = segment(number - 1) + &alone;
            if !unicode_normalization::is_nfc(&pair) {
                marked[number - 1] = true;
                marked[number] = true;
            }
        }
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for number in (0..count).filter(|&number| marked[number]) {
        let (start, end) = (bounds[number], bounds[number + 1]);
        match spans.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => spans.push((start, end)),
        }
    }
    if spans.is_empty() {
        spans.push((0, characters.len()));
    }
    spans
}

/// A token that mixes scripts.
pub(super) struct MixedToken {
    start: usize,
    end: usize,
    /// Indexes of characters not in the token's main script (and not Common or Inherited).
    minority: Vec<usize>,
    /// Of those, the ones UTS #39 lists as confusable across scripts: shown escaped.
    confusable: Vec<usize>,
    /// The scripts mixed, main first: `Latin, Cyrillic`.
    scripts: String,
}

/// Tokens (runs without whitespace, controls or ASCII punctuation) whose resolved script set
/// is empty (UTS #39 §5.1, augmented script sets).
pub(super) fn mixed_script_tokens(characters: &[char]) -> Vec<MixedToken> {
    let separator = |character: char| {
        character.is_whitespace() || character.is_control() || character.is_ascii_punctuation()
    };
    let mut tokens = Vec::new();
    let mut start = 0;
    while start < characters.len() {
        if separator(characters[start]) {
            start += 1;
            continue;
        }
        let mut end = start;
        while end < characters.len() && !separator(characters[end]) {
            end += 1;
        }
        let token: String = characters[start..end].iter().collect();
        if !token.as_str().is_single_script() {
            tokens.push(mixed_token(characters, start, end));
        }
        start = end;
    }
    tokens
}

pub(super) fn mixed_token(characters: &[char], start: usize, end: usize) -> MixedToken {
    // Scripts in order of first appearance, with counts.
    let mut scripts: Vec<(Script, usize)> = Vec::new();
    for &character in &characters[start..end] {
        let script = character.script();
        if matches!(script, Script::Common | Script::Inherited | Script::Unknown) {
            continue;
        }
        match scripts.iter_mut().find(|(seen, _)| *seen == script) {
            Some((_, count)) => *count += 1,
            None => scripts.push((script, 1)),
        }
    }
    // The main script: the most frequent, the first seen on a tie.
    let main = scripts
        .iter()
        .enumerate()
        .max_by_key(|(order, (_, count))| (*count, std::cmp::Reverse(*order)))
        .map(|(_, (script, _))| *script);
    let minority: Vec<usize> = (start..end)
        .filter(|&index| {
            let script = characters[index].script();
            !matches!(script, Script::Common | Script::Inherited | Script::Unknown)
                && Some(script) != main
        })
        .collect();
    let confusable = minority
        .iter()
        .copied()
        .filter(|&index| {
            unicode_security::is_potential_mixed_script_confusable_char(characters[index])
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    if let Some(main) = main {
        names.push(main.full_name());
    }
    for (script, _) in &scripts {
        if Some(*script) != main {
            names.push(script.full_name());
        }
    }
    MixedToken {
        start,
        end,
        minority,
        confusable,
        scripts: names.join(", "),
    }
}
