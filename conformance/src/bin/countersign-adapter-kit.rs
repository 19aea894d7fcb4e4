//! `countersign-adapter-kit [--json] [--cli PATH]`: run the adapter kit against every adapter in
//! the workspace and print one report per adapter, then a summary (`reference: 17/17 (0 not
//! applicable)`). Exits non-zero unless every report is ok. `cargo xtask conformance` builds
//! the `countersign` command and runs this binary with `--cli`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use countersign_conformance::adapter_kit::{self, Adapter, KitOptions, Relaunch, Report};

fn main() -> ExitCode {
    let mut json = false;
    let mut cli = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--cli" => cli = args.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument `{other}`: use --json or --cli PATH");
                return ExitCode::from(2);
            }
        }
    }
    match run(json, cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(json: bool, cli: Option<PathBuf>) -> Result<bool, String> {
    let program =
        std::env::current_exe().map_err(|error| format!("cannot find this binary: {error}"))?;
    let mut relaunch_args = Vec::new();
    if json {
        relaunch_args.push("--json".to_owned());
    }
    let options = KitOptions {
        cli,
        // The durability case re-runs this binary in child processes.
        relaunch: Relaunch::Command {
            program,
            args: relaunch_args,
        },
        ..KitOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a Tokio runtime: {error}"))?;
    let reports = runtime.block_on(async {
        let mut reports = Vec::new();
        reports.push(kit(&adapter_kit::reference::ReferenceAdapter, &options).await?);
        Ok::<_, String>(reports)
    })?;
    if json {
        let all: Vec<_> = reports.iter().map(Report::to_json).collect();
        let text = serde_json::to_string_pretty(&all).map_err(|error| error.to_string())?;
        println!("{text}");
    } else {
        for report in &reports {
            println!("{}", report.to_text());
        }
        println!("adapters:");
        for report in &reports {
            let verdict = if report.is_ok() { "ok" } else { "FAILED" };
            println!("  {}  {verdict}", report.summary());
        }
    }
    Ok(reports.iter().all(Report::is_ok))
}

async fn kit<A: Adapter>(adapter: &A, options: &KitOptions) -> Result<Report, String> {
    adapter_kit::run(adapter, options).await.map_err(|error| {
        format!(
            "the adapter kit cannot run for `{}`: {error}",
            adapter.framework()
        )
    })
}
