//! COM_STMT_EXECUTE decoding. The first byte picks the parameter count
//! and whether types were bound before; the rest is the packet body.
#![no_main]
use shale_server::mysql::binary::{decode_execute, ParamType};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let params = usize::from(head & 0x3f);
    let bound: Option<Vec<ParamType>> = (head & 0x40 != 0).then(|| {
        body.iter()
            .take(params)
            .map(|&b| ParamType {
                code: b,
                unsigned: b & 1 == 1,
            })
            .collect()
    });
    let long: Vec<Option<Vec<u8>>> = (0..params)
        .map(|i| (head & 0x80 != 0 && i % 2 == 0).then(|| vec![0x61; i]))
        .collect();
    let _ = decode_execute(body, params, bound.as_deref(), &long);
});
