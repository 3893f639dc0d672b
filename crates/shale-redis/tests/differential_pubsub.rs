//! Pub/sub with several clients against redis-server and
//! shale-redis-server: confirmations, messages, pattern messages, the
//! subscribed-mode restrictions of RESP2, RESP3 push framing, PUBSUB
//! introspection; transcripts compared byte for byte. Also through redis-cli.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{compare_scenario, Step::*, PW};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn resp2_subscribe_publish_and_restrictions() {
    compare_scenario(
        3,
        &[],
        &[
            Call(1, &["PUBLISH", "ch1", "nobody"]),
            Send(0, &["SUBSCRIBE", "ch1", "ch2", "ch1"]),
            Read(0),
            Read(0),
            Read(0),
            Send(0, &["PSUBSCRIBE", "ch*"]),
            Read(0),
            Call(1, &["PUBLISH", "ch1", "hello"]),
            Read(0),
            Read(0),
            Call(1, &["PUBLISH", "chX", "pat only"]),
            Read(0),
            Call(1, &["PUBLISH", "other", "x"]),
            Call(1, &["PUBSUB", "NUMSUB", "ch1", "ch2", "ch3"]),
            Call(1, &["PUBSUB", "NUMSUB"]),
            Call(1, &["PUBSUB", "CHANNELS", "ch1*"]),
            Call(1, &["PUBSUB", "CHANNELS", "zz*"]),
            Call(1, &["PUBSUB", "NUMPAT"]),
            Call(1, &["PUBSUB", "NUMPAT", "x"]),
            Call(1, &["PUBSUB", "FOO"]),
            Call(1, &["PUBLISH", "ch1"]),
            Call(0, &["GET", "x"]),
            Call(0, &["SET", "x", "1"]),
            Call(0, &["PING"]),
            Call(0, &["PING", "hi"]),
            Call(0, &["NOSUCH"]),
            Send(0, &["UNSUBSCRIBE", "ch2"]),
            Read(0),
            Send(2, &["SUBSCRIBE", "ch1"]),
            Read(2),
            Call(1, &["PUBSUB", "NUMSUB", "ch1"]),
            Call(1, &["PUBLISH", "ch1", "two"]),
            Read(2),
            Send(0, &["UNSUBSCRIBE"]),
            Read(0),
            Send(0, &["PUNSUBSCRIBE"]),
            Read(0),
            Send(0, &["UNSUBSCRIBE"]),
            Read(0),
            Send(0, &["PUNSUBSCRIBE", "nope"]),
            Read(0),
            Call(0, &["GET", "x"]),
            Call(0, &["PING"]),
            Call(1, &["PUBLISH", "ch1", "three"]),
            Read(2),
            // A subscriber that goes away is no longer counted.
            Close(2),
            Sleep(200),
            Call(1, &["PUBSUB", "NUMSUB", "ch1"]),
            Call(1, &["PUBLISH", "ch1", "four"]),
            Call(1, &["MULTI"]),
            Call(1, &["PUBLISH", "ch1", "five"]),
            Call(1, &["EXEC"]),
        ],
    );
}

#[test]
fn resp3_push_messages_and_any_command_while_subscribed() {
    compare_scenario(
        2,
        &[0],
        &[
            Send(0, &["SUBSCRIBE", "a"]),
            Read(0),
            Send(0, &["PSUBSCRIBE", "a*"]),
            Read(0),
            Call(0, &["GET", "x"]),
            Call(0, &["PING"]),
            // Publishing to itself: the messages come before PUBLISH's reply.
            Send(0, &["PUBLISH", "a", "self"]),
            Read(0),
            Read(0),
            Read(0),
            Call(1, &["PUBLISH", "ab", "from c1"]),
            Read(0),
            Send(0, &["UNSUBSCRIBE", "a"]),
            Read(0),
            Send(0, &["PUNSUBSCRIBE"]),
            Read(0),
            Call(1, &["PUBLISH", "a", "gone"]),
            Call(0, &["PING"]),
        ],
    );
}

/// redis-cli in subscribe mode prints what it receives; the same lines from both servers.
#[test]
fn redis_cli_subscriber_sees_the_same_messages() {
    fn session(port: u16) -> Vec<String> {
        let mut child = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "-a", PW, "--no-auth-warning"])
            .args(["SUBSCRIBE", "news"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        // The confirmation: "subscribe", "news", "1".
        for _ in 0..3 {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            lines.push(l);
        }
        let published = common::cli(port, &["PUBLISH", "news", "hello world"]);
        lines.push(published);
        for _ in 0..3 {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            lines.push(l);
        }
        let _ = child.kill();
        let _ = child.wait();
        lines
    }
    let want = common::on_both_servers(session);
    assert_eq!(want.len(), 7);
}
