//! `/metrics`: counters in the Prometheus text exposition format (version 0.0.4).
//!
//! Labels are route templates, status codes and reason codes only: never an id, a name, a
//! token or an argument, so the page can be scraped without revealing who asked for what.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// The service's counters since it started.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Counters>,
}

#[derive(Default)]
struct Counters {
    /// (method, route template, status) → calls.
    requests: BTreeMap<(String, String, u16), u64>,
    /// route template → (seconds spent, calls).
    durations: BTreeMap<String, (f64, u64)>,
    /// outcome (`pending`, `granted`, `denied`, or a refusal's reason) → answers.
    answers: BTreeMap<String, u64>,
    /// outcome (`committed`, `failed`, or a refusal's reason) → resolutions.
    resolutions: BTreeMap<String, u64>,
}

impl Metrics {
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        // A poisoned lock only means a panic elsewhere while counting: the numbers still stand.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Count one call to `route` that answered `status` after `elapsed`.
    pub fn record_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let mut counters = self.counters();
        *counters
            .requests
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default() += 1;
        let duration = counters.durations.entry(route.to_owned()).or_default();
        duration.0 += elapsed.as_secs_f64();
        duration.1 += 1;
    }

    /// Count one answer that ended in `outcome`.
    pub fn record_answer(&self, outcome: &str) {
        *self
            .counters()
            .answers
            .entry(outcome.to_owned())
            .or_default() += 1;
    }

    /// Count one resolution that ended in `outcome`.
    pub fn record_resolution(&self, outcome: &str) {
        *self
            .counters()
            .resolutions
            .entry(outcome.to_owned())
            .or_default() += 1;
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let counters = self.counters();
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            text,
            "# HELP countersign_serve_requests_total API calls by method, route and status.\n# TYPE countersign_serve_requests_total counter"
        );
        for ((method, route, status), count) in &counters.requests {
            let _ = writeln!(
                text,
                "countersign_serve_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {count}"
            );
        }
        let _ = writeln!(
            text,
            "# HELP countersign_serve_request_duration_seconds Time spent answering API calls, by route.\n# TYPE countersign_serve_request_duration_seconds summary"
        );
        for (route, (seconds, count)) in &counters.durations {
            let _ = writeln!(
                text,
                "countersign_serve_request_duration_seconds_sum{{route=\"{route}\"}} {seconds}\ncountersign_serve_request_duration_seconds_count{{route=\"{route}\"}} {count}"
            );
        }
        let _ = writeln!(
            text,
            "# HELP countersign_serve_answers_total Answers submitted, by outcome (the request's state, or the refusal's reason).\n# TYPE countersign_serve_answers_total counter"
        );
        for (outcome, count) in &counters.answers {
            let _ = writeln!(
                text,
                "countersign_serve_answers_total{{outcome=\"{outcome}\"}} {count}"
            );
        }
        let _ = writeln!(
            text,
            "# HELP countersign_serve_resolutions_total Effect resolutions submitted, by outcome.\n# TYPE countersign_serve_resolutions_total counter"
        );
        for (outcome, count) in &counters.resolutions {
            let _ = writeln!(
                text,
                "countersign_serve_resolutions_total{{outcome=\"{outcome}\"}} {count}"
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_their_labels() {
        let metrics = Metrics::default();
        metrics.record_request("GET", "/api/v1/approvals", 200, Duration::from_millis(5));
        metrics.record_request("GET", "/api/v1/approvals", 200, Duration::from_millis(5));
        metrics.record_answer("not_entitled");
        metrics.record_resolution("committed");
        let text = metrics.render();
        assert!(text.contains(
            "countersign_serve_requests_total{method=\"GET\",route=\"/api/v1/approvals\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "countersign_serve_request_duration_seconds_count{route=\"/api/v1/approvals\"} 2"
        ));
        assert!(text.contains("countersign_serve_answers_total{outcome=\"not_entitled\"} 1"));
        assert!(text.contains("countersign_serve_resolutions_total{outcome=\"committed\"} 1"));
    }
}
