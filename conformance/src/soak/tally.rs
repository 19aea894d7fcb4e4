//! The executors' own tallies, kept outside the store: one append-only file per worker instance
//! (`RUN_DIR/tally/INSTANCE.log`).
//!
//! Lines, one `write(2)` each on a file opened with `O_APPEND`:
//!
//! - `X KEY MODE` — the executor ran for effect key `KEY`: this line *is* the side effect, written
//!   by the executor before it returns (so an execution the kernel may not know about is never
//!   missing from here);
//! - `F KEY FAULT` — the worker is about to send `KEY` with an injected executor fault (`lose`:
//!   run, then report an error; `hang-before` / `hang-after`: sleep past the call's timeout
//!   before / after running; `refuse`: report "not executed" without running);
//! - `S KEY` — the kernel answered a store failure after the executor ran: the outcome of that
//!   attempt may be unrecorded.
//!
//! SIGKILL ends the process, not the kernel: a `write(2)` that returned is in the page cache and
//! in the file for every later reader, and a write shorter than a page to a regular file is not
//! split by a signal. No fsync: the soak kills processes, never the machine. The reader still
//! treats a last line without its newline as written (its key, if the key is complete, counts as
//! executed) so that a torn line could never hide an execution.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The tally folder in a run folder.
pub fn folder(run_dir: &Path) -> PathBuf {
    run_dir.join("tally")
}

/// How an executor behaves for one call (the `MODE` of an `X` line, the `FAULT` of an `F` line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Run and return `Ok`.
    Run,
    /// Return "not executed" without running.
    Refuse,
    /// Run, then return an error that does not say it did not run (the reply was lost).
    Lose,
    /// Sleep past the call's timeout before running (the timeout fires first: it never runs).
    HangBefore,
    /// Run, then sleep past the call's timeout.
    HangAfter,
}

impl Mode {
    /// The word written in a tally line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Refuse => "refuse",
            Mode::Lose => "lose",
            Mode::HangBefore => "hang-before",
            Mode::HangAfter => "hang-after",
        }
    }

    fn parse(word: &str) -> Option<Mode> {
        [
            Mode::Run,
            Mode::Refuse,
            Mode::Lose,
            Mode::HangBefore,
            Mode::HangAfter,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == word)
    }

    /// True for a fault whose call the kernel must record `ambiguous` (not `refuse`, which is a
    /// definite "did not run").
    pub fn leaves_ambiguous(self) -> bool {
        matches!(self, Mode::Lose | Mode::HangBefore | Mode::HangAfter)
    }
}

/// One worker instance's tally file, open for appending.
#[derive(Debug)]
pub struct Tally {
    file: File,
}

impl Tally {
    /// Create (or reopen) the tally of `instance` in `run_dir`.
    ///
    /// # Errors
    ///
    /// A message when the file cannot be opened.
    pub fn open(run_dir: &Path, instance: &str) -> Result<Tally, String> {
        let folder = folder(run_dir);
        std::fs::create_dir_all(&folder)
            .map_err(|error| format!("cannot create `{}`: {error}", folder.display()))?;
        let path = folder.join(format!("{instance}.log"));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|error| format!("cannot open the tally `{}`: {error}", path.display()))?;
        Ok(Tally { file })
    }

    /// The executor ran for `key` in `mode` (written before the executor returns).
    ///
    /// # Errors
    ///
    /// The write's error: the caller must then treat the execution as possibly done.
    pub fn executed(&self, key: &str, mode: Mode) -> std::io::Result<()> {
        self.line(&format!("X {key} {}\n", mode.as_str()))
    }

    /// `key` is about to be sent with the executor fault `mode`.
    ///
    /// # Errors
    ///
    /// The write's error (the worker then does not send the call).
    pub fn fault(&self, key: &str, mode: Mode) -> std::io::Result<()> {
        self.line(&format!("F {key} {}\n", mode.as_str()))
    }

    /// The kernel answered a store failure after the executor ran for `key`.
    ///
    /// # Errors
    ///
    /// The write's error.
    pub fn store_failed(&self, key: &str) -> std::io::Result<()> {
        self.line(&format!("S {key}\n"))
    }

    fn line(&self, line: &str) -> std::io::Result<()> {
        // One write(2) of a short line on an O_APPEND file: never interleaved with another
        // task's line, never split by SIGKILL (module docs).
        (&self.file).write_all(line.as_bytes())
    }
}

/// Everything the tallies of a run say.
#[derive(Debug, Default)]
pub struct Tallies {
    /// Per effect key, every execution: (instance, mode).
    pub executions: BTreeMap<String, Vec<(String, Mode)>>,
    /// Per effect key, every injected fault: (instance, fault).
    pub faults: BTreeMap<String, Vec<(String, Mode)>>,
    /// Per effect key, the instances that saw a store failure after their executor ran.
    pub store_failures: BTreeMap<String, Vec<String>>,
    /// Lines that end without a newline (a write cut short), as `INSTANCE: TEXT`.
    pub torn: Vec<String>,
    /// How many tally files were read.
    pub files: usize,
}

impl Tallies {
    /// Executions in total.
    pub fn execution_count(&self) -> usize {
        self.executions.values().map(Vec::len).sum()
    }
}

/// Read every tally in `run_dir`.
///
/// # Errors
///
/// A message when the folder or a file cannot be read, or a complete line is not a tally line
/// (the tallies are then not trustworthy and the check fails).
pub fn read(run_dir: &Path) -> Result<Tallies, String> {
    let folder = folder(run_dir);
    let mut tallies = Tallies::default();
    let entries = std::fs::read_dir(&folder)
        .map_err(|error| format!("cannot read the tallies in `{}`: {error}", folder.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    paths.sort();
    for path in paths {
        let instance = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = std::fs::read(&path)
            .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        tallies.files += 1;
        let complete = text.ends_with('\n') || text.is_empty();
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        for (number, line) in lines.iter().enumerate() {
            let last_torn = !complete && number + 1 == lines.len();
            if last_torn {
                tallies.torn.push(format!("{instance}: {line}"));
            }
            let fields: Vec<&str> = line.split(' ').collect();
            let parsed = match fields.as_slice() {
                ["X", key, mode] => Mode::parse(mode).map(|mode| {
                    tallies
                        .executions
                        .entry((*key).to_owned())
                        .or_default()
                        .push((instance.clone(), mode));
                }),
                ["F", key, mode] => Mode::parse(mode).map(|mode| {
                    tallies
                        .faults
                        .entry((*key).to_owned())
                        .or_default()
                        .push((instance.clone(), mode));
                }),
                ["S", key] => {
                    tallies
                        .store_failures
                        .entry((*key).to_owned())
                        .or_default()
                        .push(instance.clone());
                    Some(())
                }
                _ => None,
            };
            if parsed.is_none() {
                if last_torn {
                    // A cut `X KEY` whose key ended (a space follows it) still counts: an
                    // execution is never hidden by a torn line.
                    if let ["X", key, _] = fields.as_slice() {
                        tallies
                            .executions
                            .entry((*key).to_owned())
                            .or_default()
                            .push((instance.clone(), Mode::Run));
                    }
                } else {
                    return Err(format!(
                        "`{}` line {}: `{line}` is not a tally line",
                        path.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    Ok(tallies)
}
