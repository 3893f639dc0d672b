//! The statement splitter and the server-level statement lexer.
#![no_main]
use shale_server::admin::lex;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for part in lex::split_statements(s) {
            assert!(!part.is_empty());
        }
        let _ = lex::tokens(s);
    }
});
