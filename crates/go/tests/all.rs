//! The Go path's tests, one binary (issue 33).
mod fixture;
mod guest;
mod manager;
