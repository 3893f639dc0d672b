//! Redis 7.0 ACL users (docs/redis.md, "ACL"): the rules of ACL SETUSER,
//! the permission check, and the rule text ACL LIST / GETUSER print, which
//! Redis rebuilds from the permission bitmap (categories first, then single
//! commands), so it is rebuilt the same way here.

pub mod log;
pub mod registry;
pub mod table;

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use table::{CATEGORIES, COMMANDS};
use thiserror::Error;

/// Why an ACL SETUSER modifier was refused (Redis 7.0's texts).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("Syntax error")]
    Syntax,
    #[error("Unknown command or category name in ACL")]
    UnknownCommand,
    #[error(
        "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not \
         have any effect. Try 'resetkeys' to start with an empty list of patterns"
    )]
    KeyAfterAll,
    #[error(
        "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does \
         not have any effect. Try 'resetchannels' to start with an empty list of channels"
    )]
    ChannelAfterAll,
    #[error("The password you are trying to remove from the user does not exist")]
    NoSuchPassword,
    #[error(
        "The password hash must be exactly 64 characters and contain only lowercase \
         hexadecimal characters"
    )]
    BadHash,
    #[error("Selectors and first-arg rules are not supported by this server")]
    Unsupported,
}

/// Key pattern access: read, write, or both.
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;

/// One user: flags, SHA-256 password hashes, the command bitmap (indexes
/// into `table::COMMANDS`), key and channel patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `Some(true)`: sanitize-payload, `Some(false)`: skip-sanitize-payload.
    pub sanitize: Option<bool>,
    /// Hex SHA-256 of each password, in the order added.
    pub passwords: Vec<String>,
    /// Redis's reserved "future commands" bit: set by `+@all`, cleared
    /// only by `-@all`; ACL LIST starts from `+@all` when it is set.
    pub all_commands: bool,
    pub allowed: BTreeSet<usize>,
    pub all_keys: bool,
    pub keys: Vec<(Vec<u8>, u8)>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

/// Hex SHA-256 of `pw`.
pub fn hash_password(pw: &[u8]) -> String {
    Sha256::digest(pw)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Index of a command (`get`, `config|get`) in the table.
pub fn command_index(name: &str) -> Option<usize> {
    COMMANDS.binary_search_by(|c| c.0.cmp(name)).ok()
}

/// Bit of a category name (without `@`).
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// The subcommands of top-level command `i` (`parent|...` right after it).
fn subcommands(i: usize) -> impl Iterator<Item = usize> {
    let name = COMMANDS.get(i).map_or("", |c| c.0);
    let prefix = format!("{name}|");
    (i + 1..COMMANDS.len())
        .take_while(move |&j| COMMANDS.get(j).is_some_and(|c| c.0.starts_with(&prefix)))
}

fn is_top(i: usize) -> bool {
    COMMANDS.get(i).is_some_and(|c| !c.0.contains('|'))
}

fn cats_of(i: usize) -> u32 {
    COMMANDS.get(i).map_or(0, |c| c.1)
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no passwords, no commands,
    /// no keys, no channels.
    pub fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            all_commands: false,
            allowed: BTreeSet::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    /// The default user of a server: on, every command, key and channel;
    /// `password`: its only password (None: nopass).
    pub fn default_user(password: Option<&str>) -> User {
        let mut u = User::new("default");
        for r in ["on", "~*", "&*", "+@all"] {
            let _ = u.apply(r.as_bytes());
        }
        match password {
            Some(pw) => u.passwords.push(hash_password(pw.as_bytes())),
            None => u.nopass = true,
        }
        u
    }

    fn set_command(&mut self, i: usize, allow: bool) {
        let subs: Vec<usize> = std::iter::once(i).chain(subcommands(i)).collect();
        for j in subs {
            if allow {
                self.allowed.insert(j);
            } else {
                self.allowed.remove(&j);
            }
        }
    }

    fn set_category(&mut self, bit: u32, allow: bool) {
        for i in 0..COMMANDS.len() {
            if cats_of(i) & bit != 0 {
                if allow {
                    self.allowed.insert(i);
                } else {
                    self.allowed.remove(&i);
                }
            }
        }
    }

    fn set_all(&mut self, allow: bool) {
        self.all_commands = allow;
        self.allowed = if allow {
            (0..COMMANDS.len()).collect()
        } else {
            BTreeSet::new()
        };
    }

    /// Applies one ACL SETUSER modifier.
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let text = String::from_utf8_lossy(rule);
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "allkeys" => {
                self.all_keys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            "allchannels" => {
                self.all_channels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => self.set_all(true),
            "nocommands" | "-@all" => self.set_all(false),
            "reset" => {
                let name = std::mem::take(&mut self.name);
                *self = User::new(&name);
                self.sanitize = Some(true);
            }
            _ => return self.apply_valued(rule),
        }
        Ok(())
    }

    fn apply_valued(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let (&first, rest) = rule.split_first().ok_or(RuleError::Syntax)?;
        match first {
            b'>' => {
                let h = hash_password(rest);
                if !self.passwords.contains(&h) {
                    self.passwords.push(h);
                }
                self.nopass = false;
            }
            b'#' => {
                let ok = rest.len() == 64
                    && rest
                        .iter()
                        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
                if !ok {
                    return Err(RuleError::BadHash);
                }
                let h = String::from_utf8_lossy(rest).into_owned();
                if !self.passwords.contains(&h) {
                    self.passwords.push(h);
                }
                self.nopass = false;
            }
            b'<' => {
                let h = hash_password(rest);
                let before = self.passwords.len();
                self.passwords.retain(|p| *p != h);
                if self.passwords.len() == before {
                    return Err(RuleError::NoSuchPassword);
                }
            }
            b'!' => {
                let h = String::from_utf8_lossy(rest).into_owned();
                let before = self.passwords.len();
                self.passwords.retain(|p| *p != h);
                if self.passwords.len() == before {
                    return Err(RuleError::NoSuchPassword);
                }
            }
            b'~' => self.add_key(rest, KEY_READ | KEY_WRITE)?,
            b'%' => {
                let tilde = rest
                    .iter()
                    .position(|&c| c == b'~')
                    .ok_or(RuleError::Syntax)?;
                let (fl, pat) = rest.split_at(tilde);
                let mut flags = 0;
                for c in fl {
                    flags |= match c.to_ascii_uppercase() {
                        b'R' => KEY_READ,
                        b'W' => KEY_WRITE,
                        _ => return Err(RuleError::Syntax),
                    };
                }
                if flags == 0 {
                    return Err(RuleError::Syntax);
                }
                self.add_key(pat.get(1..).unwrap_or_default(), flags)?;
            }
            b'&' => {
                if self.all_channels {
                    return Err(RuleError::ChannelAfterAll);
                }
                if rest == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.iter().any(|c| c == rest) {
                    self.channels.push(rest.to_vec());
                }
            }
            b'+' | b'-' => self.apply_command(first == b'+', rest)?,
            b'(' => return Err(RuleError::Unsupported),
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    fn add_key(&mut self, pat: &[u8], flags: u8) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        if pat == b"*" && flags == KEY_READ | KEY_WRITE {
            self.all_keys = true;
            self.keys.clear();
        } else if let Some(k) = self.keys.iter_mut().find(|(p, _)| p == pat) {
            k.1 |= flags;
        } else {
            self.keys.push((pat.to_vec(), flags));
        }
        Ok(())
    }

    fn apply_command(&mut self, allow: bool, name: &[u8]) -> Result<(), RuleError> {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if let Some(cat) = name.strip_prefix('@') {
            let bit = category_bit(cat).ok_or(RuleError::UnknownCommand)?;
            self.set_category(bit, allow);
            return Ok(());
        }
        match command_index(&name) {
            Some(i) => {
                self.set_command(i, allow);
                Ok(())
            }
            // `+get|x` (a first-arg rule) names a command without
            // subcommands; Redis accepts it, this server does not.
            None => match name.split_once('|') {
                Some((parent, _))
                    if command_index(parent).is_some_and(|i| subcommands(i).next().is_none()) =>
                {
                    Err(RuleError::Unsupported)
                }
                _ => Err(RuleError::UnknownCommand),
            },
        }
    }

    /// True if the user may run command `i` of the table.
    /// May run every command on every key and channel: no request of
    /// this user is ever refused.
    pub fn unrestricted(&self) -> bool {
        self.all_keys && self.all_channels && self.allowed.len() == COMMANDS.len()
    }

    pub fn can_run(&self, i: usize) -> bool {
        self.allowed.contains(&i)
    }

    /// True if the user may touch `key` with `need` (KEY_READ / KEY_WRITE).
    pub fn can_key(&self, key: &[u8], need: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|(p, f)| f & need == need && crate::glob::matches(p, key))
    }

    /// True if the user may use `channel` (PUBLISH / SUBSCRIBE).
    pub fn can_channel(&self, channel: &[u8]) -> bool {
        self.all_channels
            || self
                .channels
                .iter()
                .any(|p| crate::glob::matches(p, channel))
    }

    /// True if the user may subscribe to pattern `pat` (PSUBSCRIBE needs
    /// the pattern itself among the channel patterns, as Redis).
    pub fn can_pattern(&self, pat: &[u8]) -> bool {
        self.all_channels || self.channels.iter().any(|p| p == pat)
    }

    /// True if `pw` is one of the user's passwords (or the user has none).
    pub fn password_ok(&self, pw: &[u8]) -> bool {
        self.nopass || self.passwords.contains(&hash_password(pw))
    }

    /// The flags GETUSER lists, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// GETUSER's `keys`.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|(p, f)| {
                let pfx = match *f {
                    KEY_READ => "%R~",
                    KEY_WRITE => "%W~",
                    _ => "~",
                };
                format!("{pfx}{}", String::from_utf8_lossy(p))
            })
            .collect();
        parts.join(" ")
    }

    /// GETUSER's `channels`.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// GETUSER's `commands`, rebuilt as Redis 7.0's
    /// `ACLDescribeSelectorCommandRules` does: `+@all` or `-@all`, then
    /// each category whose top-level commands are mostly on (or, after
    /// `+@all`, mostly off), greedily, then the single commands (and subcommands)
    /// that still differ. Redis lists those in its command dict's hash
    /// order (random per process); here they come in name order.
    pub fn describe_commands(&self) -> String {
        let additive = !self.all_commands;
        let mut out = vec![if additive { "-@all" } else { "+@all" }.to_string()];
        let mut fake = User::new("");
        fake.set_all(!additive);
        // Greedy, as Redis: repeatedly the category with more commands in
        // common with what is left than different, fewest differences
        // first; what it covers is taken out of `left`.
        let mut left = self.clone();
        loop {
            let mut best: Option<(usize, u32, u32)> = None;
            for c in 0..CATEGORIES.len() {
                let bit = 1u32 << c;
                let (mut on, mut off) = (0u32, 0u32);
                for i in (0..COMMANDS.len()).filter(|&i| is_top(i) && cats_of(i) & bit != 0) {
                    if left.allowed.contains(&i) {
                        on += 1;
                    } else {
                        off += 1;
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                let better = match best {
                    None => true,
                    Some((_, d, s)) => diff < d || (diff == d && same > s),
                };
                if same > diff && better {
                    best = Some((c, diff, same));
                }
            }
            let Some((c, _, _)) = best else { break };
            let bit = 1u32 << c;
            fake.set_category(bit, additive);
            left.set_category(bit, !additive);
            let name = CATEGORIES.get(c).copied().unwrap_or_default();
            out.push(format!("{}@{name}", if additive { '+' } else { '-' }));
        }
        for i in (0..COMMANDS.len()).filter(|&i| is_top(i)) {
            let user = self.allowed.contains(&i);
            if user != fake.allowed.contains(&i) {
                out.push(format!(
                    "{}{}",
                    if user { '+' } else { '-' },
                    COMMANDS.get(i).map_or("", |c| c.0)
                ));
                fake.set_command(i, user);
            }
            for s in subcommands(i) {
                let user = self.allowed.contains(&s);
                if user != fake.allowed.contains(&s) {
                    out.push(format!(
                        "{}{}",
                        if user { '+' } else { '-' },
                        COMMANDS.get(s).map_or("", |c| c.0)
                    ));
                    fake.set_command(s, user);
                }
            }
        }
        out.join(" ")
    }

    /// The rules after `user NAME` in ACL LIST (and what is persisted).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.flags().iter().map(|s| s.to_string()).collect();
        parts.extend(self.passwords.iter().map(|h| format!("#{h}")));
        let keys = self.describe_keys();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if !self.all_channels {
            parts.push("resetchannels".into());
        }
        let ch = self.describe_channels();
        if !ch.is_empty() {
            parts.push(ch);
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }
}

/// Checks a user name as ACL SETUSER does.
pub fn valid_username(name: &[u8]) -> bool {
    !name.iter().any(|&c| c == b' ' || c == 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("u");
        for r in rules {
            u.apply(r.as_bytes()).unwrap();
        }
        u
    }

    /// Outputs of redis-server 7.0.15's ACL LIST for the same rules.
    #[test]
    fn describe_matches_redis() {
        let u = user(&[
            "on", ">pw1", "~cache:*", "+get", "+@read", "-hgetall", "+set", "&chan*",
        ]);
        assert_eq!(
            u.describe(),
            "on #c592df4a86933b92addc9842402ddf198c638ea9be58916ee6e3734e1e3152f8 ~cache:* \
             resetchannels &chan* -@all +@read -hgetall +set"
        );
        let u = user(&["+@all", "-@dangerous"]);
        assert_eq!(u.describe(), "off resetchannels +@all -@dangerous");
        assert_eq!(user(&[]).describe(), "off resetchannels -@all");
        assert_eq!(
            user(&["reset", "resetkeys", "%R~r*", "%W~w*", "%RW~rw*"]).describe(),
            "off sanitize-payload %R~r* %W~w* ~rw* resetchannels -@all"
        );
        assert_eq!(
            user(&["+config", "-config|get"]).describe_commands(),
            "-@all +config -config|get"
        );
        assert_eq!(
            user(&["-config|get", "+config"]).describe_commands(),
            "-@all +config"
        );
        assert_eq!(
            user(&["+@all", "-@dangerous", "+flushdb", "-@all"]).describe_commands(),
            "-@all"
        );
        assert_eq!(
            user(&["~a", "~a", "%R~a", "~b", "%W~b"]).describe_keys(),
            "~a ~b"
        );
    }

    #[test]
    fn checks_commands_keys_channels() {
        let u = user(&["on", "~k*", "+get", "&c*", "+config|get"]);
        assert!(u.can_run(command_index("get").unwrap()));
        assert!(!u.can_run(command_index("hget").unwrap()));
        assert!(u.can_run(command_index("config|get").unwrap()));
        assert!(!u.can_run(command_index("config|set").unwrap()));
        assert!(u.can_key(b"k1", KEY_READ) && !u.can_key(b"x", KEY_READ));
        assert!(u.can_channel(b"c1") && !u.can_channel(b"x"));
        assert_eq!(User::new("x").apply(b"~a").and(Ok(())), Ok(()));
        assert_eq!(
            user(&["allkeys"]).clone().apply(b"~x"),
            Err(RuleError::KeyAfterAll)
        );
        assert_eq!(
            User::new("x").apply(b"+nosuch"),
            Err(RuleError::UnknownCommand)
        );
        assert_eq!(
            User::new("x").apply(b"<nope"),
            Err(RuleError::NoSuchPassword)
        );
        assert_eq!(User::new("x").apply(b"#abc"), Err(RuleError::BadHash));
    }
}
