//! Session and system variables: what a client reads (`SELECT @@x`,
//! SHOW VARIABLES) and sets (`SET [SESSION|GLOBAL] x = ...`, SET NAMES,
//! SET TRANSACTION ISOLATION LEVEL).

use super::*;

/// Values of system variables a client may read without setting them.
pub fn default_variable(name: &str) -> Option<Datum> {
    let t = Datum::text;
    Some(match name {
        "version" => t(VERSION),
        "version_comment" => t("ShaleDB, an LSM-tree storage engine"),
        "autocommit" => Datum::Int(1),
        "transaction_isolation" | "tx_isolation" => t("REPEATABLE-READ"),
        "transaction_read_only" | "tx_read_only" => Datum::Int(0),
        "sql_mode" => t("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"),
        "character_set_client"
        | "character_set_connection"
        | "character_set_results"
        | "character_set_server"
        | "character_set_database" => t("utf8mb4"),
        "collation_connection" | "collation_server" | "collation_database" => t("utf8mb4_bin"),
        "max_allowed_packet" => Datum::Int(64 << 20),
        "lower_case_table_names" => Datum::Int(0),
        "time_zone" | "system_time_zone" => t("UTC"),
        "innodb_lock_wait_timeout" | "lock_wait_timeout" => Datum::Int(50),
        "auto_increment_increment" | "auto_increment_offset" => Datum::Int(1),
        "default_storage_engine" | "storage_engine" => t("ShaleDB"),
        "wait_timeout" | "interactive_timeout" => Datum::Int(28_800),
        "net_write_timeout" => Datum::Int(60),
        "sql_auto_is_null" | "sql_safe_updates" => Datum::Int(0),
        "performance_schema" => Datum::Int(0),
        "license" => t("Apache-2.0"),
        "port" => Datum::Int(3306),
        "hostname" => t("localhost"),
        "max_connections" => Datum::Int(151),
        "init_connect" => t(""),
        "have_ssl" | "have_openssl" => t("YES"),
        "query_cache_size" | "query_cache_type" => Datum::Int(0),
        other => return Limits::default_variable(other),
    })
}

impl Session {
    pub(super) fn variables(&self) -> Vec<(String, Datum)> {
        let mut names: Vec<&str> = vec![
            "autocommit",
            "auto_increment_increment",
            "auto_increment_offset",
            "character_set_client",
            "character_set_connection",
            "character_set_database",
            "character_set_results",
            "character_set_server",
            "collation_connection",
            "collation_database",
            "collation_server",
            "default_storage_engine",
            "innodb_lock_wait_timeout",
            "lower_case_table_names",
            "max_allowed_packet",
            "join_buffer_size",
            "max_heap_table_size",
            "sort_buffer_size",
            "sql_mode",
            "tmp_table_size",
            "tmpdir",
            "system_time_zone",
            "time_zone",
            "transaction_isolation",
            "tx_isolation",
            "version",
            "version_comment",
        ];
        names.sort_unstable();
        names
            .into_iter()
            .map(|n| (n.to_owned(), self.variable(n)))
            .collect()
    }

    pub(super) fn variable(&self, name: &str) -> Datum {
        match name {
            "autocommit" => Datum::Int(i64::from(self.autocommit)),
            "tmpdir" => Datum::text(
                &self
                    .cat()
                    .engine()
                    .path()
                    .join(crate::executor::TMP_DIR)
                    .to_string_lossy(),
            ),
            "transaction_isolation" | "tx_isolation" => Datum::text(isolation_name(self.isolation)),
            "innodb_lock_wait_timeout" => {
                Datum::Int(i64::try_from(self.lock_wait.as_secs()).unwrap_or(i64::MAX))
            }
            other => self
                .facts
                .vars
                .get(other)
                .cloned()
                .or_else(|| default_variable(other))
                .unwrap_or(Datum::Null),
        }
    }

    pub(super) fn set(&mut self, s: &ast::Set, params: &[Datum]) -> Result<Output> {
        match s {
            ast::Set::SingleAssignment {
                variable, values, ..
            } => {
                let name = ident_name(variable).join(".");
                let [value] = values.as_slice() else {
                    return Err(Error::Syntax(format!("SET {name} needs one value")));
                };
                self.set_variable(&name, value, params)?;
            }
            ast::Set::MultipleAssignments { assignments } => {
                for a in assignments {
                    self.set_variable(&ident_name(&a.name).join("."), &a.value, params)?;
                }
            }
            ast::Set::SetTransaction { modes, session, .. } => {
                for m in modes {
                    if let ast::TransactionMode::IsolationLevel(l) = m {
                        if *session || self.session_scope_set {
                            self.isolation = map_isolation(l);
                        } else {
                            self.next_isolation = Some(map_isolation(l));
                        }
                    }
                }
            }
            ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => {}
            other => return Err(Error::Unsupported(other.to_string())),
        }
        self.sync_vars();
        Ok(Output::affected(0))
    }

    /// Mirrors settings kept in fields into the variables `@@name` reads.
    pub(super) fn sync_vars(&mut self) {
        for n in [
            "autocommit",
            "transaction_isolation",
            "tx_isolation",
            "innodb_lock_wait_timeout",
        ] {
            let v = self.variable(n);
            self.facts.vars.insert(n.to_owned(), v);
        }
    }

    pub(super) fn eval_setting(&self, value: &ast::Expr, params: &[Datum]) -> Result<Datum> {
        // SET x = ON/OFF/DEFAULT: bare words are values here.
        if let ast::Expr::Identifier(id) = value {
            if id.quote_style.is_none() && !id.value.starts_with('@') {
                return Ok(Datum::text(&id.value));
            }
        }
        let txn = self.cat().engine().begin(TxnOptions::default());
        let planner = self.planner(params);
        let sub = |q: &ast::Query, outer: &crate::expr::Scope| planner.plan_subquery(q, outer);
        let scope = crate::expr::Scope::default();
        let bound = crate::expr::Binder {
            scope: &scope,
            facts: &self.facts,
            aggs: None,
            subquery: &sub,
            aliases: &[],
        }
        .bind(value)?;
        let ex = Executor::new(self.cat(), &txn, params, None);
        let v = ex.with_cx(&[], |cx| bound.eval(&[], cx));
        drop(ex);
        txn.rollback();
        v
    }

    pub(super) fn set_variable(
        &mut self,
        raw: &str,
        value: &ast::Expr,
        params: &[Datum],
    ) -> Result<()> {
        let v = self.eval_setting(value, params)?;
        if let Some(user) = raw.strip_prefix('@').filter(|r| !r.starts_with('@')) {
            self.facts
                .vars
                .insert(format!("@{}", user.to_ascii_lowercase()), v);
            return Ok(());
        }
        let name = raw.trim_start_matches("@@").to_ascii_lowercase();
        let name = name
            .trim_start_matches("session.")
            .trim_start_matches("local.")
            .to_owned();
        if name.starts_with("global.") {
            return Err(Error::Unsupported("SET GLOBAL".into()));
        }
        let text = v.to_text().unwrap_or_default().to_ascii_uppercase();
        let flag = |text: &str| -> Result<bool> {
            match text {
                "1" | "ON" | "TRUE" => Ok(true),
                "0" | "OFF" | "FALSE" => Ok(false),
                other => Err(Error::BadVariableValue(name.clone(), other.to_owned())),
            }
        };
        match name.as_str() {
            "autocommit" => {
                let on = flag(&text)?;
                if on && !self.autocommit {
                    self.commit()?;
                }
                self.autocommit = on;
            }
            "transaction_isolation" | "tx_isolation" => {
                self.isolation = match text.replace('-', " ").as_str() {
                    "READ UNCOMMITTED" | "READ COMMITTED" => Isolation::ReadCommitted,
                    "REPEATABLE READ" => Isolation::SnapshotIsolation,
                    "SERIALIZABLE" => Isolation::Serializable,
                    other => return Err(Error::BadVariableValue(name, other.to_owned())),
                };
            }
            "innodb_lock_wait_timeout" | "lock_wait_timeout" => {
                let secs = v
                    .to_i128()
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| Error::BadVariableValue(name.clone(), text.clone()))?;
                self.lock_wait = Duration::from_secs(secs);
            }
            "sql_mode"
            | "names"
            | "character_set_client"
            | "character_set_results"
            | "character_set_connection"
            | "collation_connection"
            | "time_zone"
            | "sql_safe_updates"
            | "sql_auto_is_null"
            | "net_write_timeout"
            | "net_read_timeout"
            | "wait_timeout"
            | "interactive_timeout"
            | "max_execution_time"
            | "sql_select_limit"
            | "foreign_key_checks"
            | "unique_checks"
            | "session_track_schema"
            | "sql_quote_show_create"
            | "group_concat_max_len"
            | "max_allowed_packet"
            | "profiling"
            | "long_query_time" => {
                self.facts.vars.insert(name, v);
            }
            bound if Limits::is_bound(bound) => {
                let v = Limits::check_bound(bound, &v)?;
                self.facts.vars.insert(name, v);
            }
            other if default_variable(other).is_some() => {
                self.facts.vars.insert(name, v);
            }
            _ => return Err(Error::UnknownVariable(name)),
        }
        Ok(())
    }
}
