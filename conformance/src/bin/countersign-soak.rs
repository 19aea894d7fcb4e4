//! `countersign-soak`: the soak of issue #22 (see `countersign_conformance::soak` and
//! `docs/soak.md`). `cargo xtask soak` builds and runs it; `--help` lists the options. Run
//! with `worker …` it is one of the soak's worker processes.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use countersign_conformance::soak::{self, Invocation};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match soak::parse(&args) {
        Ok(Invocation::Help) => {
            print!("{}", soak::HELP);
            ExitCode::SUCCESS
        }
        Ok(Invocation::Worker(options)) => match soak::worker::run(options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("soak worker: {error}");
                ExitCode::FAILURE
            }
        },
        Ok(Invocation::Supervise(options)) => match soak::supervisor::run(options) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("soak: error: {error}");
                ExitCode::FAILURE
            }
        },
        Ok(Invocation::Check(run_dir, store_url)) => {
            match soak::supervisor::check_again(&run_dir, store_url) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(error) => {
                    eprintln!("soak: error: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(error) => {
            eprintln!("soak: error: {error}");
            ExitCode::from(2)
        }
    }
}
