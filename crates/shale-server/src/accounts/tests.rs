use super::*;
use crate::mysql::auth::{native_token, new_nonce, NATIVE};

fn open(dir: &std::path::Path) -> (Db, AccountStore) {
    let db = Db::open(dir, shaledb::Options::default()).unwrap();
    let store = AccountStore::open(&db).unwrap();
    (db, store)
}

fn logs_in(store: &AccountStore, user: &str, peer: &str, pw: &str) -> bool {
    let Some(a) = store.find(user, peer).unwrap() else {
        return false;
    };
    let nonce = new_nonce();
    a.credentials
        .verify(NATIVE, &nonce, &native_token(pw, &nonce))
        == Some(true)
}

#[test]
fn create_login_drop_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_db, s) = open(dir.path());
        assert!(s.create("app", "%", "pw1", false).unwrap());
        assert!(matches!(
            s.create("app", "%", "x", false),
            Err(AccountError::CannotUser {
                op: "CREATE USER",
                ..
            })
        ));
        assert!(!s.create("app", "%", "x", true).unwrap());
        assert!(logs_in(&s, "app", "10.0.0.1", "pw1"));
        assert!(!logs_in(&s, "app", "10.0.0.1", "x"));
        s.set_password("app", "%", "pw2").unwrap();
        s.create("gone", "%", "", false).unwrap();
        assert!(s.drop("gone", "%", false).unwrap());
        assert!(!s.drop("gone", "%", true).unwrap());
        assert!(s.drop("gone", "%", false).is_err());
    }
    let (_db, s) = open(dir.path());
    assert!(logs_in(&s, "app", "127.0.0.1", "pw2"));
    assert!(s.find("gone", "127.0.0.1").unwrap().is_none());
}

#[test]
fn the_most_specific_host_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, s) = open(dir.path());
    s.create("app", "%", "any", false).unwrap();
    s.create("app", "localhost", "local", false).unwrap();
    s.create("app", "10.0.%", "lan", false).unwrap();
    assert!(logs_in(&s, "app", "127.0.0.1", "local"));
    assert!(logs_in(&s, "app", "::1", "local"));
    assert!(logs_in(&s, "app", "10.0.3.4", "lan"));
    assert!(logs_in(&s, "app", "192.168.1.1", "any"));
    assert!(s.find("nobody", "127.0.0.1").unwrap().is_none());
    assert!(host_matches("10.0.0._", "10.0.0.7"));
    assert!(!host_matches("10.0.0._", "10.0.0.17"));
}

#[test]
fn grants_revokes_and_show_grants() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, s) = open(dir.path());
    s.create("u", "%", "pw", false).unwrap();
    s.grant(
        "u",
        "%",
        privs::SELECT | privs::INSERT,
        Level::Database("shop".into()),
    )
    .unwrap();
    s.grant(
        "u",
        "%",
        privs::UPDATE,
        Level::Table("shop".into(), "orders".into()),
    )
    .unwrap();
    s.grant("u", "%", privs::PROCESS, Level::Global).unwrap();
    let a = s.find("u", "1.2.3.4").unwrap().unwrap();
    assert!(a.allows(privs::SELECT, Some("shop"), Some("items")));
    assert!(a.allows(privs::UPDATE, Some("shop"), Some("orders")));
    assert!(!a.allows(privs::UPDATE, Some("shop"), Some("items")));
    assert!(!a.allows(privs::SELECT, Some("other"), None));
    assert!(a.allows(privs::PROCESS, None, None));
    assert_eq!(
        a.grant_statements(),
        vec![
            "GRANT PROCESS ON *.* TO `u`@`%`",
            "GRANT SELECT, INSERT ON `shop`.* TO `u`@`%`",
            "GRANT UPDATE ON `shop`.`orders` TO `u`@`%`",
        ]
    );
    s.revoke("u", "%", privs::INSERT, Level::Database("shop".into()))
        .unwrap();
    assert!(matches!(
        s.revoke("u", "%", privs::SELECT, Level::Database("nope".into())),
        Err(AccountError::NoSuchGrant { .. })
    ));
    s.grant("u", "%", privs::ALL | privs::GRANT_OPTION, Level::Global)
        .unwrap();
    let a = s.find("u", "1.2.3.4").unwrap().unwrap();
    assert_eq!(
        a.grant_statements()[0],
        "GRANT ALL PRIVILEGES ON *.* TO `u`@`%` WITH GRANT OPTION"
    );
    assert_eq!(privs::parse("all privileges"), Some(privs::ALL));
    assert_eq!(privs::parse("create user"), Some(privs::CREATE_USER));
    assert_eq!(privs::parse("fly"), None);
}

#[test]
fn a_damaged_record_is_a_typed_error_naming_the_account() {
    let dir = tempfile::tempdir().unwrap();
    let (db, s) = open(dir.path());
    s.create("u", "%", "pw", false).unwrap();
    let cf = db.cf_id(ACCOUNTS_CF).unwrap();
    let k = key("u", "%");
    let mut v = db.get_cf(cf, &k).unwrap().unwrap();
    for i in [0, 5, v.len() / 2, v.len() - 1] {
        let mut bad = v.clone();
        bad[i] ^= 0x40;
        db.put_cf(cf, &k, &bad).unwrap();
        match s.find("u", "1.1.1.1") {
            Err(AccountError::Corrupt { user, host, .. }) => {
                assert_eq!((user.as_str(), host.as_str()), ("u", "%"))
            }
            other => panic!("byte {i}: {other:?}"),
        }
    }
    v.truncate(3);
    db.put_cf(cf, &k, &v).unwrap();
    assert!(matches!(
        s.find("u", "1.1.1.1"),
        Err(AccountError::Corrupt { .. })
    ));
}

/// Of two sessions creating the same account at once, exactly one wins.
#[test]
fn concurrent_creates_of_one_account() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, s) = open(dir.path());
    for round in 0..20 {
        let user = format!("u{round}");
        let results: Vec<_> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|i| {
                    let (s, user) = (s.clone(), user.clone());
                    sc.spawn(move || s.create(&user, "%", &format!("pw{i}"), false))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {results:?}");
        assert!(results.iter().all(|r| match r {
            Ok(_) => true,
            Err(AccountError::CannotUser { .. }) => true,
            // A lock wait that timed out or a conflict is an error too,
            // but never a second success.
            Err(AccountError::Engine(_)) => true,
            Err(e) => panic!("{e}"),
        }));
    }
}

#[test]
fn root_is_made_once_with_a_given_or_generated_password() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, s) = open(dir.path());
    let pw = s.bootstrap_root(None).unwrap().unwrap();
    assert_eq!(pw.len(), 20);
    assert!(logs_in(&s, "root", "127.0.0.1", &pw));
    let root = s.find("root", "::1").unwrap().unwrap();
    assert!(root.allows(privs::ALL | privs::GRANT_OPTION, None, None));
    // Not again, and not over an operator's change.
    s.set_password("root", "localhost", "mine").unwrap();
    assert_eq!(s.bootstrap_root(Some("other")).unwrap(), None);
    assert!(logs_in(&s, "root", "127.0.0.1", "mine"));
    // Remote hosts do not match 'root'@'localhost'.
    assert!(s.find("root", "10.1.1.1").unwrap().is_none());
    let dir2 = tempfile::tempdir().unwrap();
    let (_db2, s2) = open(dir2.path());
    assert_eq!(
        s2.bootstrap_root(Some("given")).unwrap().as_deref(),
        Some("given")
    );
}
