//! End-to-end tests of `countersign gateway` with real third-party parts: the npm package
//! `@modelcontextprotocol/server-filesystem` as the upstream, driven by the rmcp client, by
//! the official Python `mcp` client and by a raw client that declares URL-mode elicitation
//! (beside the real approval service, `countersign serve`: issue #27).
//!
//! Setup (once per machine, reused): `npm ci` in `crates/countersign-gateway/tests/node/`
//! (lock file committed), and a venv with the pinned `mcp` package under the target dir.

mod gateway {
    pub mod filesystem;
    pub mod lifecycle;
    pub mod modern;
    pub mod python_client;
    pub mod support;
    pub mod url_approval;
}
