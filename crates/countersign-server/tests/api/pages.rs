//! The inbox's pages over HTTP (no browser): the headers every HTML response carries, the
//! forms' checks, and the pages on PostgreSQL as on SQLite.
