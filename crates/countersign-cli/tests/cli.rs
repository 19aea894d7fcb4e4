//! Integration tests of the `countersign` binary: each test runs the real executable against a
//! fresh temporary folder (its own working directory, `TMPDIR` and SQLite store).
//!
//! One test binary, with submodules, so linking happens once.

#[path = "cli/support.rs"]
mod support;

#[path = "cli/approvers.rs"]
mod approvers;
#[path = "cli/b58_verify.rs"]
mod b58_verify;
#[path = "cli/bad_input.rs"]
mod bad_input;
#[path = "cli/chain.rs"]
mod chain;
#[path = "cli/check.rs"]
mod check;
#[path = "cli/demo.rs"]
mod demo;
#[path = "cli/display.rs"]
mod display;
#[path = "cli/everyday.rs"]
mod everyday;
#[path = "cli/exec.rs"]
mod exec;
#[path = "cli/export.rs"]
mod export;
#[path = "cli/help.rs"]
mod help;
#[path = "cli/keys.rs"]
mod keys;
#[path = "cli/listings.rs"]
mod listings;
#[path = "cli/ocsf_schema.rs"]
mod ocsf_schema;
#[path = "cli/policy_errors.rs"]
mod policy_errors;
#[path = "cli/round_trip.rs"]
mod round_trip;
#[path = "cli/takeback.rs"]
mod takeback;
#[path = "cli/transparency.rs"]
mod transparency;
#[path = "cli/webhooks.rs"]
mod webhooks;
