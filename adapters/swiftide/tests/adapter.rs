//! The swiftide adapter's tests: offline, with a scripted `ChatCompletion` driving the real
//! swiftide agent loop. One test binary (STYLE.md §6).

mod adapter {
    pub mod basic;
    pub mod conformance;
    pub mod cross_process;
    pub mod pairing;
    pub mod resume;
    pub mod resumed_in_place;
    pub mod support;
    pub mod surfaces;
}
