//! The bodies of Countersign's fuzz targets (issue #30), one module per parser of untrusted
//! input, each with a `run(&[u8])` that feeds one input to the product's own entry point and
//! checks what must hold for every input: no panic, a named error for a refusal, and the
//! properties listed in the module's docs.
//!
//! The AFL++ binaries in `fuzz_targets/` call these (feature `afl`); `tests/replay.rs` calls
//! them on every file of `corpus/<target>/` and `regressions/<target>/` as ordinary tests, which is
//! how CI runs them without a fuzzer. How to fuzz, and what a crash becomes: `docs/fuzzing.md`.
#![forbid(unsafe_code)]

pub mod answer;
pub mod ids;
pub mod json;
pub mod jsonrpc;
pub mod policy;
pub mod store_url;
pub mod token;

/// One fuzz target.
pub struct Target {
    /// Its name: the binary in `fuzz_targets/`, the folder of its corpus and regressions.
    pub name: &'static str,
    /// Its body: one input in, a panic when a property does not hold.
    pub run: fn(&[u8]),
}

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    Target {
        name: "answer",
        run: answer::run,
    },
    Target {
        name: "ids",
        run: ids::run,
    },
    Target {
        name: "json",
        run: json::run,
    },
    Target {
        name: "jsonrpc",
        run: jsonrpc::run,
    },
    Target {
        name: "policy",
        run: policy::run,
    },
    Target {
        name: "store_url",
        run: store_url::run,
    },
    Target {
        name: "token",
        run: token::run,
    },
];

/// The input as text, when it is UTF-8: every parser here takes `&str`, and text that is not
/// UTF-8 never reaches one (the CLI's arguments and files are read as UTF-8 first).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// An error's message must say something: an empty message would leave a person with nothing
/// to act on.
fn check_message(message: impl std::fmt::Display, what: &str) {
    let message = message.to_string();
    assert!(!message.trim().is_empty(), "{what}: an empty error message");
}
