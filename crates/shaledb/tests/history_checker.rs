#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure
mod elle;
