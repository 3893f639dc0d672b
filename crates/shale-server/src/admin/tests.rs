use super::*;
use crate::server::Shared;
use shaledb::{Db, Options};
use std::sync::Arc;

struct Fixture {
    _dir: tempfile::TempDir,
    accounts: AccountStore,
    shared: Arc<Shared>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let accounts = AccountStore::open(&db).expect("accounts");
    accounts.bootstrap_root(Some("rootpw")).expect("bootstrap");
    Fixture {
        _dir: dir,
        accounts,
        shared: Arc::default(),
    }
}

impl Fixture {
    /// Runs `stmt` as `user` (connection id 1 from 127.0.0.1).
    fn run_as(&self, user: &str, stmt: &str) -> Option<Result<Reply, SqlError>> {
        let account = self
            .accounts
            .find(user, "127.0.0.1")
            .expect("find")
            .expect("account exists");
        let info = ConnInfo {
            id: 1,
            user: user.into(),
            host: "127.0.0.1".into(),
            database: None,
            shared: self.shared.clone(),
        };
        run(
            stmt,
            &AdminContext {
                info: &info,
                accounts: &self.accounts,
                account: &account,
            },
        )
    }
    fn ok(&self, user: &str, stmt: &str) -> Reply {
        match self.run_as(user, stmt) {
            Some(Ok(r)) => r,
            other => panic!("{stmt}: {other:?}"),
        }
    }
    fn err(&self, user: &str, stmt: &str) -> u16 {
        match self.run_as(user, stmt) {
            Some(Err(e)) => e.code,
            other => panic!("{stmt}: expected an error, got {other:?}"),
        }
    }
}

fn texts(r: &Reply) -> Vec<String> {
    match r {
        Reply::Rows { rows, .. } => rows
            .iter()
            .flat_map(|row| row.iter())
            .map(|v| {
                let mut out = Vec::new();
                v.write_text(&mut out);
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect(),
        Reply::Ok { .. } => vec![],
    }
}

#[test]
fn account_lifecycle_through_statements() {
    let f = fixture();
    f.ok("root", "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'pw1'");
    assert_eq!(
        f.err("root", "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'x'"),
        1396
    );
    f.ok(
        "root",
        "CREATE USER IF NOT EXISTS 'app'@'127.0.0.1' IDENTIFIED BY 'x'",
    );
    // Never an account without a password.
    assert_eq!(f.err("root", "CREATE USER nopw@localhost"), 1819);
    f.ok(
        "root",
        "GRANT SELECT, INSERT ON shop.* TO 'app'@'127.0.0.1'",
    );
    let grants = texts(&f.ok("root", "SHOW GRANTS FOR 'app'@'127.0.0.1'"));
    assert_eq!(
        grants,
        vec![
            "GRANT USAGE ON *.* TO `app`@`127.0.0.1`",
            "GRANT SELECT, INSERT ON `shop`.* TO `app`@`127.0.0.1`"
        ]
    );
    // The app may not manage accounts or see root's grants.
    assert_eq!(f.err("app", "CREATE USER x@'%' IDENTIFIED BY 'y'"), 1227);
    assert_eq!(f.err("app", "SHOW GRANTS FOR root@localhost"), 1227);
    assert_eq!(texts(&f.ok("app", "SHOW GRANTS")).len(), 2);
    // Its own password it may change.
    f.ok("app", "SET PASSWORD = 'pw2'");
    assert_eq!(f.err("app", "SET PASSWORD FOR root@localhost = 'x'"), 1227);
    f.ok("root", "REVOKE INSERT ON shop.* FROM app@127.0.0.1");
    assert_eq!(texts(&f.ok("app", "SHOW GRANTS")).len(), 2);
    assert_eq!(
        f.err("root", "REVOKE SELECT ON other.* FROM app@127.0.0.1"),
        1141
    );
    f.ok("root", "DROP USER 'app'@'127.0.0.1'");
    assert_eq!(f.err("root", "DROP USER 'app'@'127.0.0.1'"), 1396);
    f.ok("root", "DROP USER IF EXISTS 'app'@'127.0.0.1'");
    assert_eq!(f.err("root", "GRANT BOGUS ON *.* TO root@localhost"), 1064);
    assert_eq!(f.err("root", "GRANT SELECT ON t TO root@localhost"), 1046);
}

#[test]
fn table_statements_need_their_privilege() {
    let f = fixture();
    f.ok("root", "CREATE USER 'r'@'%' IDENTIFIED BY 'pw'");
    f.ok("root", "GRANT SELECT ON shop.* TO r@'%'");
    let r = f.accounts.find("r", "127.0.0.1").unwrap().unwrap();
    assert!(check_privilege("SELECT * FROM t", &r, Some("shop")).is_ok());
    assert!(check_privilege("select 1", &r, None).is_ok());
    assert!(check_privilege("BEGIN", &r, Some("shop")).is_ok());
    let denied = |s: &str, db: Option<&str>| check_privilege(s, &r, db).unwrap_err().code;
    assert_eq!(denied("SELECT * FROM t", Some("other")), 1142);
    assert_eq!(denied("SELECT * FROM t", None), 1227);
    assert_eq!(denied("INSERT INTO t VALUES (1)", Some("shop")), 1142);
    assert_eq!(denied("UPDATE t SET a = 1", Some("shop")), 1142);
    assert_eq!(denied("delete from t", Some("shop")), 1142);
    assert_eq!(denied("CREATE TABLE t (a INT)", Some("shop")), 1142);
    assert_eq!(denied("CREATE UNIQUE INDEX i ON t (a)", Some("shop")), 1142);
    assert_eq!(denied("DROP TABLE t", Some("shop")), 1142);
    assert_eq!(denied("TRUNCATE t", Some("shop")), 1142);
    assert_eq!(denied("ALTER TABLE t ADD COLUMN b INT", Some("shop")), 1142);
    let root = f.accounts.find("root", "127.0.0.1").unwrap().unwrap();
    assert!(check_privilege("DROP DATABASE shop", &root, None).is_ok());
}

#[test]
fn process_list_kill_status_and_functions() {
    let f = fixture();
    f.ok("root", "CREATE USER 'u'@'%' IDENTIFIED BY 'pw'");
    f.shared.processes.register(1, "127.0.0.1", None);
    f.shared.processes.logged_in(1, "root", None);
    f.shared.processes.register(2, "127.0.0.1", None);
    f.shared.processes.logged_in(2, "u", Some("shop"));
    let all = f.ok("root", "SHOW FULL PROCESSLIST");
    assert!(matches!(&all, Reply::Rows { rows, .. } if rows.len() == 2));
    // Without PROCESS a user sees only its own threads.
    let mine = f.ok("u", "show processlist");
    assert!(matches!(&mine, Reply::Rows { rows, .. } if rows.len() == 1));
    // u may not kill root's thread 1 (SUPER), root may kill u's.
    assert_eq!(f.err("u", "KILL 1"), 1095);
    assert_eq!(f.err("root", "KILL 77"), 1094);
    f.ok("root", "KILL QUERY 2");
    f.ok("root", "KILL CONNECTION 2");
    assert_eq!(f.err("root", "KILL"), 1064);
    let st = texts(&f.ok("root", "SHOW GLOBAL STATUS LIKE 'threads_%'"));
    assert!(st.iter().any(|s| s == "Threads_connected"), "{st:?}");
    assert!(!st.iter().any(|s| s == "Questions"));
    assert_eq!(texts(&f.ok("root", "SELECT CONNECTION_ID()")), vec!["1"]);
    assert_eq!(
        texts(&f.ok("u", "select current_user() as me")),
        vec!["u@%"]
    );
    // Anything else is the SQL layer's.
    assert!(f.run_as("root", "SELECT 1").is_none());
    assert!(f.run_as("root", "SHOW TABLES").is_none());
    assert!(f.run_as("root", "SELECT CONNECTION_ID() + 1").is_none());
    assert!(f.run_as("root", "CREATE TABLE t (a INT)").is_none());
}
