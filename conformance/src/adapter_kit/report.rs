//! Reports: per case pass, fail or not applicable (with the framework's reason), per suite, and
//! the summary line `<framework>: passed/applicable (k not applicable)`.

use serde::Serialize;

use super::{Shape, Suite};

/// The JSON report's schema string.
pub const REPORT_SCHEMA: &str = "countersign.conformance/v1";

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum CaseStatus {
    /// Everything matched the direct kernel path.
    Pass,
    /// Something differed: every difference, joined with `; `.
    Fail(String),
    /// The case does not apply to this framework, and why.
    NotApplicable(String),
}

impl CaseStatus {
    /// `pass`, `fail` or `n/a`.
    pub fn label(&self) -> &'static str {
        match self {
            CaseStatus::Pass => "pass",
            CaseStatus::Fail(_) => "FAIL",
            CaseStatus::NotApplicable(_) => "n/a",
        }
    }
}

/// One case's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CaseReport {
    /// Its suite.
    pub suite: Suite,
    /// Its name.
    pub case: &'static str,
    /// How it ended.
    #[serde(flatten)]
    pub status: CaseStatus,
}

/// How a suite ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuiteStatus {
    /// Every applicable case passed (and at least one applied).
    Pass,
    /// At least one case failed.
    Fail,
    /// No case applied.
    NotApplicable,
}

/// One suite's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SuiteReport {
    /// The suite.
    pub suite: Suite,
    /// How it ended.
    pub status: SuiteStatus,
}

/// The kit's report for one adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    framework: String,
    shape: Shape,
    cases: Vec<CaseReport>,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    framework: &'a str,
    shape: Shape,
    ok: bool,
    passed: usize,
    applicable: usize,
    not_applicable: usize,
    failed: usize,
    summary: String,
    suites: Vec<SuiteJson<'a>>,
}

#[derive(Serialize)]
struct SuiteJson<'a> {
    suite: Suite,
    status: SuiteStatus,
    cases: Vec<&'a CaseReport>,
}

impl Report {
    pub(crate) fn new(framework: String, shape: Shape, cases: Vec<CaseReport>) -> Report {
        Report {
            framework,
            shape,
            cases,
        }
    }

    /// The framework's name.
    pub fn framework(&self) -> &str {
        &self.framework
    }

    /// Every case, in order.
    pub fn cases(&self) -> &[CaseReport] {
        &self.cases
    }

    /// The case named `name` in `suite`, if the kit has one.
    pub fn case(&self, suite: Suite, name: &str) -> Option<&CaseReport> {
        self.cases
            .iter()
            .find(|case| case.suite == suite && case.case == name)
    }

    /// The cases that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CaseReport> {
        self.cases
            .iter()
            .filter(|case| matches!(case.status, CaseStatus::Fail(_)))
    }

    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.count(|status| matches!(status, CaseStatus::Pass))
    }

    /// How many cases applied (passed or failed).
    pub fn applicable(&self) -> usize {
        self.cases.len() - self.not_applicable()
    }

    /// How many cases did not apply. Never counted as passed.
    pub fn not_applicable(&self) -> usize {
        self.count(|status| matches!(status, CaseStatus::NotApplicable(_)))
    }

    /// How many cases failed.
    pub fn failed(&self) -> usize {
        self.count(|status| matches!(status, CaseStatus::Fail(_)))
    }

    fn count(&self, keep: impl Fn(&CaseStatus) -> bool) -> usize {
        self.cases.iter().filter(|case| keep(&case.status)).count()
    }

    /// Every suite's result. A suite is not applicable only if every case in it is.
    pub fn suites(&self) -> Vec<SuiteReport> {
        Suite::ALL
            .iter()
            .map(|&suite| SuiteReport {
                suite,
                status: self.suite_status(suite),
            })
            .collect()
    }

    /// One suite's result.
    pub fn suite_status(&self, suite: Suite) -> SuiteStatus {
        let cases: Vec<_> = self
            .cases
            .iter()
            .filter(|case| case.suite == suite)
            .collect();
        if cases
            .iter()
            .any(|case| matches!(case.status, CaseStatus::Fail(_)))
        {
            SuiteStatus::Fail
        } else if cases
            .iter()
            .all(|case| matches!(case.status, CaseStatus::NotApplicable(_)))
        {
            SuiteStatus::NotApplicable
        } else {
            SuiteStatus::Pass
        }
    }

    /// Ok: at least one applicable suite and no failure.
    pub fn is_ok(&self) -> bool {
        self.failed() == 0
            && self
                .suites()
                .iter()
                .any(|suite| suite.status != SuiteStatus::NotApplicable)
    }

    /// `<framework>: passed/applicable (k not applicable)`.
    pub fn summary(&self) -> String {
        format!(
            "{}: {}/{} ({} not applicable)",
            self.framework,
            self.passed(),
            self.applicable(),
            self.not_applicable()
        )
    }

    /// The report as text: one line per case, then the verdict, ending with [`Report::summary`].
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "countersign adapter kit: {} ({})\n",
            self.framework,
            self.shape.as_str()
        );
        let width = self
            .cases
            .iter()
            .map(|case| case.case.len())
            .max()
            .unwrap_or(0);
        for suite in self.suites() {
            let status = match suite.status {
                SuiteStatus::Pass => "pass",
                SuiteStatus::Fail => "FAIL",
                SuiteStatus::NotApplicable => "n/a",
            };
            text.push_str(&format!("{} ({status})\n", suite.suite.as_str()));
            for case in self.cases.iter().filter(|case| case.suite == suite.suite) {
                let line = format!("  {:<width$}  {}", case.case, case.status.label());
                text.push_str(line.trim_end());
                match &case.status {
                    CaseStatus::Pass => {}
                    CaseStatus::Fail(reason) | CaseStatus::NotApplicable(reason) => {
                        text.push_str(": ");
                        text.push_str(reason);
                    }
                }
                text.push('\n');
            }
        }
        let verdict = if self.is_ok() {
            "ok"
        } else if self.failed() > 0 {
            "FAILED"
        } else {
            "FAILED: no suite applies"
        };
        text.push_str(&format!("result: {verdict}\n{}\n", self.summary()));
        text
    }

    /// The report as JSON (`countersign.conformance/v1`), for CI.
    pub fn to_json(&self) -> serde_json::Value {
        let suites = self
            .suites()
            .into_iter()
            .map(|suite| SuiteJson {
                suite: suite.suite,
                status: suite.status,
                cases: self
                    .cases
                    .iter()
                    .filter(|case| case.suite == suite.suite)
                    .collect(),
            })
            .collect();
        let report = ReportJson {
            schema: REPORT_SCHEMA,
            framework: &self.framework,
            shape: self.shape,
            ok: self.is_ok(),
            passed: self.passed(),
            applicable: self.applicable(),
            not_applicable: self.not_applicable(),
            failed: self.failed(),
            summary: self.summary(),
            suites,
        };
        // INVARIANT (report-json): every field is a string, number, bool or list of those.
        serde_json::to_value(report).unwrap_or_default()
    }
}
