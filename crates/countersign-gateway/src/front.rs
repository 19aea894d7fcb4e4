//! The client side: stdio (one MCP host launching the gateway as its server command) and
//! Streamable HTTP (many sessions on one endpoint).

pub(crate) mod http;
pub(crate) mod stdio;
