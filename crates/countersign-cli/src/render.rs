//! Text rendering: aligned tables and the verification report.

use std::io::{self, Write};

use countersign::Receipt;
use countersign::evidence::{AnchorCheck, ChainBreak, VerifyOutcome, VerifyReport};

/// A plain, left-aligned text table.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<const N: usize>(headers: [&str; N]) -> Table {
        Table {
            headers: headers.iter().map(|header| (*header).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row. Cells are shown through [`countersign::evidence::printable`]: stored text
    /// (tool names, arguments, notes) may hold newlines or bidirectional overrides.
    pub fn row<const N: usize>(&mut self, cells: [String; N]) {
        self.rows.push(
            cells
                .iter()
                .map(|cell| countersign::evidence::printable(cell).into_owned())
                .collect(),
        );
    }

    /// Write the table (without a header line when every header is empty: a list of facts).
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|header| header.chars().count())
            .collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(index, (cell, width))| {
                    if index + 1 == cells.len() {
                        cell.clone()
                    } else {
                        format!("{cell:<width$}")
                    }
                })
                .collect();
            padded.join("  ").trim_end().to_owned()
        };
        if self.headers.iter().any(|header| !header.is_empty()) {
            writeln!(out, "{}", line(&self.headers))?;
        }
        for row in &self.rows {
            writeln!(out, "{}", line(row))?;
        }
        Ok(())
    }
}

/// Write `text` (lines without line breaks of their own, as
/// [`countersign::display::ApprovalDisplay::to_text`] makes them) indented by two spaces.
pub fn indented(text: &str, out: &mut dyn Write) -> io::Result<()> {
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// `text` cut to `limit` characters, with an ellipsis when cut: for operator listings only
/// (effects), never for what an approver is shown.
pub fn truncate(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The receipts listing: one row per receipt; in a log of several lanes the SEQ column names
/// each receipt's lane (`4 of lane 2`), since every lane numbers its receipts from 1.
pub fn receipts_table(receipts: &[Receipt]) -> Table {
    let mut table = Table::new([
        "SEQ", "RECORDED", "KIND", "OUTCOME", "REASON", "ACTION", "EFFECT", "BY",
    ]);
    // A log of several lanes (PostgreSQL, SPEC 1.5) numbers each lane from 1: name the lane.
    let lanes = receipts.iter().any(|receipt| receipt.lane != 0);
    for receipt in receipts {
        let seq = if lanes {
            format!("{} of lane {}", receipt.seq, receipt.lane)
        } else {
            receipt.seq.to_string()
        };
        let kind = serde_json::to_value(receipt.kind)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default();
        table.row([
            seq,
            receipt.recorded_at.to_string(),
            kind,
            receipt.outcome.as_str().to_owned(),
            receipt.reason.clone().unwrap_or_else(|| "-".to_owned()),
            receipt.action.clone().unwrap_or_else(|| "-".to_owned()),
            // As `resolve` and `inspect` read a key back (two keys never print alike).
            receipt.effect_key.as_ref().map_or_else(
                || "-".to_owned(),
                |key| countersign::evidence::escaped(key.as_str()).into_owned(),
            ),
            receipt.approver.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    table
}

/// A state table compared with the receipts (`countersign verify`): `what` names the rows
/// (`effects`, `granted approvals`), `advice` is the next step when they disagree.
pub fn state_check<D: std::fmt::Display>(
    what: &str,
    check: &countersign::audit::StateCheck<D>,
    advice: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    if check.agrees() {
        return writeln!(
            out,
            "{what} agree with the receipts: {} row(s) checked",
            check.checked
        );
    }
    writeln!(
        out,
        "{what} DISAGREE with the receipts ({} disagreement(s); {} row(s) checked):",
        check.disagreements.len(),
        check.checked
    )?;
    for disagreement in &check.disagreements {
        writeln!(out, "  {disagreement}")?;
    }
    writeln!(out, "{advice}")
}

/// The verification report as text: what was checked (how many receipts, the first and the
/// last), the outcome and why, the log's head, and what an unanchored check cannot show.
///
/// `flags` are the `--store-url`/`--policy` flags to repeat in a command it suggests
/// (`store_access::store_flags`), so the suggestion acts on the same store.
pub fn verify_report(report: &VerifyReport, flags: &str, out: &mut dyn Write) -> io::Result<()> {
    let range = report.range;
    let head_seq = report.log_head.as_ref().map(|head| head.seq);
    match (&report.first_break, &report.head, report.first_seq) {
        (Some(chain_break), _, _) if report.outcome == VerifyOutcome::Unverifiable => writeln!(
            out,
            "chain unverifiable: no receipt was checked (exit status 3): receipt {} has no hash, and neither has any receipt after it{}; the log was written without hashing or outside Countersign, so there is nothing to check it against",
            chain_break.seq(),
            range
                .and_then(|range| range.to)
                .map_or_else(String::new, |to| format!(" up to {to}"))
        )?,
        (Some(chain_break), _, _) => {
            // Where the log breaks: the receipt, or the place a receipt left (the receipt seen
            // next is not what was changed).
            let at = match chain_break {
                ChainBreak::Misplaced {
                    expected_position,
                    position,
                    ..
                } if position > expected_position => {
                    format!("place {expected_position} of the log")
                }
                _ => match chain_break.lane() {
                    0 => format!("receipt {}", chain_break.seq()),
                    lane => format!("receipt {} of lane {lane}", chain_break.seq()),
                },
            };
            writeln!(out, "chain BROKEN at {at}: {chain_break}")?;
            match (&report.head, report.first_seq) {
                (Some(head), Some(first)) => writeln!(
                    out,
                    "{} receipt(s) before it verified (receipts {first} to {}, head {})",
                    report.checked, head.seq, head.hash
                )?,
                _ => writeln!(out, "no receipt before it verified")?,
            }
        }
        (None, head, first) if report.checked > 0 => {
            let word = match report.outcome {
                VerifyOutcome::Verified => "verified",
                VerifyOutcome::Failed => "intact",
                VerifyOutcome::Unverifiable => "unverifiable",
            };
            let first = first.unwrap_or(1);
            match head {
                Some(head) if report.lanes.is_empty() => write!(
                    out,
                    "chain {word}: {} receipt(s) checked (receipts {first} to {}), head {}",
                    report.checked, head.seq, head.hash
                )?,
                // Several lanes: the counts per lane follow on the `lanes:` line.
                Some(head) => write!(
                    out,
                    "chain {word}: {} receipt(s) checked in {} lanes (lane 0's receipts {first} to {}, its head {})",
                    report.checked,
                    report.lanes.len() + 1,
                    head.seq,
                    head.hash
                )?,
                None => write!(
                    out,
                    "chain {word}: {} receipt(s) checked in {} lane(s), none of them lane 0",
                    report.checked,
                    report.lanes.len()
                )?,
            }
            if let Some(range) = range.filter(|range| range.from > 1 && !report.lanes.is_empty()) {
                write!(
                    out,
                    "; linked to the receipt at place {} in the log, whose hash holds; receipts before it were not checked",
                    range.from - 1
                )?;
            } else if first > 1 {
                write!(
                    out,
                    "; linked to receipt {}, whose hash holds; receipts before it were not checked",
                    first - 1
                )?;
            }
            match (range.and_then(|range| range.to), head_seq) {
                (Some(to), Some(newest)) if to > newest => writeln!(
                    out,
                    "\nbut the range ends at receipt {to}, after the log's head (receipt {newest}): receipts {} to {to} do not exist (not written yet, or removed), so the range cannot be verified (exit status 3); check up to the head with `--to {newest}`",
                    newest + 1
                )?,
                _ => writeln!(out)?,
            }
        }
        (None, _, _) => match (range, head_seq) {
            (Some(range), Some(newest)) if range.to.is_some_and(|to| to < range.from) => writeln!(
                out,
                "chain unverifiable: the range {} to {} is empty, so no receipt was checked (exit status 3); give `--from` no greater than `--to` (the log's head is receipt {newest})",
                range.from,
                range.to.unwrap_or(range.from)
            )?,
            (Some(range), Some(newest)) => writeln!(
                out,
                "chain unverifiable: the range starts at receipt {}, after the log's head (receipt {newest}), so no receipt was checked (exit status 3); check up to the head with `--from 1 --to {newest}`, or run this again once receipt {} exists",
                range.from, range.from
            )?,
            _ => writeln!(
                out,
                "chain unverifiable: the log is empty, so no receipt was checked (exit status 3)"
            )?,
        },
    }
    if !report.lanes.is_empty() {
        // A log of several lanes (PostgreSQL, SPEC 1.5): each lane is its own chain.
        let mut reached: Vec<String> = report
            .head
            .iter()
            .map(|head| format!("lane 0 to receipt {}", head.seq))
            .collect();
        reached.extend(
            report
                .lanes
                .iter()
                .map(|lane| format!("lane {} to receipt {}", lane.lane, lane.seq)),
        );
        writeln!(
            out,
            "lanes: {} (each lane is its own chain; `--json` gives each head's hash)",
            reached.join(", ")
        )?;
    }
    // The log's head is its last place; in a log of one lane, that is its last receipt's seq.
    let head_name = |place: u64| {
        if report.lanes.is_empty() {
            format!("receipt {place}")
        } else {
            format!("the receipt at place {place}")
        }
    };
    match &report.log_head {
        // The newest receipt's row is gone but its place is not (named above as missing).
        Some(head)
            if matches!(
                report.first_break,
                Some(ChainBreak::Missing { position, .. }) if position == head.seq
            ) =>
        {
            writeln!(
                out,
                "log head: {} (missing: its row was deleted)",
                head_name(head.seq)
            )?
        }
        Some(head) if head.hash.trim().is_empty() => {
            writeln!(out, "log head: {} (no hash)", head_name(head.seq))?
        }
        Some(head) => writeln!(out, "log head: {}, {}", head_name(head.seq), head.hash)?,
        None => writeln!(out, "log head: none (no receipt in the store)")?,
    }
    match &report.anchor {
        // A range leaves the tail out by design (`--anchor` is refused with one).
        AnchorCheck::NotGiven if range.is_some() => Ok(()),
        // A broken chain is the news; the note is for a log that looks whole.
        AnchorCheck::NotGiven if report.first_break.is_some() => Ok(()),
        // The store's own head records catch a deletion by hand (below), not one that edits
        // them too.
        AnchorCheck::NotGiven if !report.recorded_heads.is_not_given() => writeln!(
            out,
            "note: without an anchor, deleting the newest receipts and editing the store's head records to match cannot be detected; export one with `countersign receipts --export-anchor{flags} > anchor.json` and keep it elsewhere"
        ),
        AnchorCheck::NotGiven => writeln!(
            out,
            "note: without an anchor, deleting the newest receipts cannot be detected; export one with `countersign receipts --export-anchor{flags} > anchor.json` and keep it elsewhere"
        ),
        AnchorCheck::Matched => writeln!(
            out,
            "anchor matched: the log still reaches the exported head"
        ),
        AnchorCheck::Failed { detail } => writeln!(out, "anchor FAILED: {detail}"),
    }?;
    // A store that records its heads apart (PostgreSQL): the log must reach them.
    match &report.recorded_heads {
        AnchorCheck::NotGiven => Ok(()),
        AnchorCheck::Matched => writeln!(
            out,
            "recorded heads matched: every lane reaches the head the store records for it"
        ),
        AnchorCheck::Failed { detail } => writeln!(out, "recorded heads FAILED: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use countersign::Timestamp;
    use countersign::evidence::ReceiptDraft;
    use countersign::evidence::{Anchor, ChainHead, LaneHead, StoredReceipt, seal_in_lane};

    /// Three receipts in lane 0 and two in lane 2, placed 1 to 5, as a PostgreSQL store of
    /// several lanes reads them back.
    fn two_lanes() -> Vec<StoredReceipt> {
        let mut heads: [Option<ChainHead>; 3] = [None, None, None];
        let mut log = Vec::new();
        for (place, lane) in [0_u32, 2, 0, 2, 0].into_iter().enumerate() {
            let head = &mut heads[lane as usize];
            let (_, mut stored) = seal_in_lane(
                lane,
                ReceiptDraft::default(),
                head.as_ref(),
                Timestamp::from_millis(1_000),
            )
            .expect("seals");
            *head = Some(ChainHead {
                seq: stored.seq,
                hash: stored.hash.clone(),
            });
            stored.position = place as u64 + 1;
            log.push(stored);
        }
        log
    }

    #[test]
    fn a_report_of_several_lanes_names_each_lanes_head_and_the_log_head_by_its_place() {
        let log = two_lanes();
        let anchor = Anchor {
            seq: 3,
            hash: log[4].hash.to_string(),
            lanes: vec![LaneHead {
                lane: 2,
                seq: 2,
                hash: log[3].hash.clone(),
            }],
        };
        let mut report = countersign::evidence::verify(&log, Some(&anchor));
        report.log_head = Some(ChainHead {
            seq: 5,
            hash: log[4].hash.clone(),
        });
        let mut out = Vec::new();
        super::verify_report(&report, "", &mut out).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("chain verified: 5 receipt(s) checked"),
            "{text}"
        );
        assert_eq!(
            lines[1],
            "lanes: lane 0 to receipt 3, lane 2 to receipt 2 (each lane is its own chain; `--json` gives each head's hash)"
        );
        assert_eq!(
            lines[2],
            format!("log head: the receipt at place 5, {}", log[4].hash)
        );
        assert_eq!(
            lines[3],
            "anchor matched: the log still reaches the exported head"
        );
    }

    #[test]
    fn a_range_holding_no_receipt_of_lane_0_says_what_it_checked() {
        let log = two_lanes();
        // Place 2 alone: lane 2's first receipt, after lane 0's first at place 1.
        let mut verifier = countersign::evidence::Verifier::after_receipt(&log[0]);
        verifier.feed(&log[1], None);
        let mut report = verifier.finish(None);
        report.range = Some(countersign::evidence::VerifyRange {
            from: 2,
            to: Some(2),
        });
        report.log_head = Some(ChainHead {
            seq: 5,
            hash: log[4].hash.clone(),
        });
        let mut out = Vec::new();
        super::verify_report(&report, "", &mut out).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "chain verified: 1 receipt(s) checked in 1 lane(s), none of them lane 0; linked to the receipt at place 1 in the log, whose hash holds; receipts before it were not checked",
            "{text}"
        );
        assert_eq!(
            lines[1],
            "lanes: lane 2 to receipt 1 (each lane is its own chain; `--json` gives each head's hash)"
        );
    }

    #[test]
    fn a_break_names_the_place_left_empty_or_the_receipt_gone_from_its_place() {
        // Place 2 (lane 2's first receipt) gone with its place: the receipt after it holds in
        // its own lane, so the headline names the place, not that receipt.
        let mut log = two_lanes();
        log.remove(1);
        let report = countersign::evidence::verify(&log, None);
        let mut out = Vec::new();
        super::verify_report(&report, "", &mut out).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with("chain BROKEN at place 2 of the log: no receipt is at place 2 of the log: the next one, receipt 2, is at place 3"),
            "{text}"
        );
        assert!(
            text.contains("\n1 receipt(s) before it verified (receipts 1 to 1, head "),
            "{text}"
        );
        // Its row gone but its place kept: named as missing, with its lane.
        let mut log = two_lanes();
        log[3].missing = true;
        log[3].body.clear();
        let report = countersign::evidence::verify(&log, None);
        let mut out = Vec::new();
        super::verify_report(&report, "", &mut out).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with("chain BROKEN at receipt 2 of lane 2: receipt 2 of lane 2 is missing: the log names it at place 4, but the store no longer holds it"),
            "{text}"
        );
    }

    #[test]
    fn a_deleted_newest_receipt_is_the_missing_head_and_no_anchor_note_follows() {
        let mut log = two_lanes();
        log[4].missing = true;
        log[4].hash = countersign::id::ReceiptHash::default();
        log[4].body.clear();
        let mut report = countersign::evidence::verify(&log, None);
        report.log_head = Some(ChainHead {
            seq: 5,
            hash: countersign::id::ReceiptHash::default(),
        });
        let mut out = Vec::new();
        super::verify_report(&report, " --store-url 'postgres://db/x?schema=a'", &mut out)
            .expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with(
                "chain BROKEN at receipt 3: receipt 3 is missing: the log names it at place 5"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nlog head: the receipt at place 5 (missing: its row was deleted)\n"),
            "{text}"
        );
        assert!(!text.contains("note: without an anchor"), "{text}");
        // A whole log gets the note, with the store to export the anchor from.
        let report = countersign::evidence::verify(&two_lanes(), None);
        let mut out = Vec::new();
        super::verify_report(&report, " --store-url 'postgres://db/x?schema=a'", &mut out)
            .expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.contains("`countersign receipts --export-anchor --store-url 'postgres://db/x?schema=a' > anchor.json`"),
            "{text}"
        );
    }
}
