//! The crate's own tests and benches export the libc overrides (src/intercept.rs
//! `LINK_ARGS`), so that run-time look-ups (the getrandom crate's) find them too.

fn main() {
    for symbol in ["getrandom", "getentropy", "clock_gettime", "gettimeofday"] {
        println!("cargo:rustc-link-arg=-Wl,--export-dynamic-symbol={symbol}");
    }
}
