//! Gateway tests against fault-injecting fake upstreams (cases B14, B15, B18, B19, B20 in
//! `cases/mcp-gateway.md`), approvals (inline, by URL and out of band), tool lists that fail
//! closed (issue #27) and the Streamable HTTP front. The end-to-end tests with the real npm server live beside the CLI
//! (`crates/countersign-cli/tests/gateway.rs`).

mod gateway {
    pub mod approvals;
    pub mod b14_colliding_names;
    pub mod b15_fail_closed;
    pub mod b18_timeout;
    pub mod b19_mismatched_ids;
    pub mod b20_http_replies;
    pub mod b50_strict_reader;
    pub mod broken_streams;
    pub mod display;
    pub mod fake;
    pub mod faulty_http;
    pub mod harness;
    pub mod http_front;
    pub mod http_modern;
    pub mod modern;
    pub mod protocol_edges;
    pub mod round_trips;
    pub mod shutdown;
    pub mod tls_upstream;
    pub mod tool_lists;
    pub mod upstream_hygiene;
    pub mod url_approval;
}
