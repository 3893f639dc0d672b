//! `shale sql`: SQL on an embedded database, as the mysql client prints it.
//!
//! ```text
//! shale --db DIR sql -e "SELECT 1; SHOW DATABASES"    # statements from the argument
//! shale --db DIR sql < script.sql                     # or from stdin, split at ';'
//! shale --db DIR sql --batch -e "..."                 # tab-separated, as mysql --batch
//! shale --db DIR sql                                  # on a terminal: an interactive shell
//! ```
//!
//! Results are boxed tables with a row count and time; errors print as
//! `ERROR 1146 (42S02) at line 3: Table 'shop.t' doesn't exist` and stop
//! the run with status 1 (as the mysql client does without --force).
//!
//! On a terminal (no `-e`, stdin a TTY) it is a REPL with line editing and
//! history (`~/.shale_sql_history`): lines gather until a `;` outside
//! quotes and comments ends the statement (prompt `shale> `, then
//! `    -> `); an error is printed and the shell goes on; Ctrl-C drops the
//! statement being typed; `exit`, `quit`, `\q` or Ctrl-D leave.

use shale_sql::{Database, Datum, Output};
use std::io::{BufRead, IsTerminal, Write};
use std::time::Instant;

fn cell(d: &Datum) -> String {
    d.to_text().unwrap_or_else(|| "NULL".to_owned())
}

fn print_table(out: &mut dyn Write, names: &[String], rows: &[Vec<String>]) -> std::io::Result<()> {
    let mut widths: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line: String = widths
        .iter()
        .map(|w| format!("+{}", "-".repeat(w + 2)))
        .collect::<String>()
        + "+";
    writeln!(out, "{line}")?;
    let fmt_row = |r: &[String]| -> String {
        r.iter()
            .zip(&widths)
            .map(|(c, w)| format!("| {c}{} ", " ".repeat(w - c.chars().count())))
            .collect::<String>()
            + "|"
    };
    writeln!(out, "{}", fmt_row(names))?;
    writeln!(out, "{line}")?;
    for r in rows {
        writeln!(out, "{}", fmt_row(r))?;
    }
    writeln!(out, "{line}")
}

/// Prints a streamed result as `mysql --batch` does: a header line, then
/// tab-separated rows.
struct BatchSink<'a> {
    out: &'a mut dyn Write,
    /// The write error that stopped the statement.
    failed: Option<std::io::Error>,
}

impl BatchSink<'_> {
    fn write(&mut self, line: &str) -> shale_sql::Result<()> {
        writeln!(self.out, "{line}").map_err(|e| {
            self.failed = Some(e);
            // Stops the statement; the caller reports the write error.
            shale_sql::Error::Interrupted
        })
    }
}

impl shale_sql::ResultSink for BatchSink<'_> {
    fn columns(&mut self, columns: &[shale_sql::ColumnMeta]) -> shale_sql::Result<()> {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        self.write(&names.join("\t"))
    }

    fn row(&mut self, row: Vec<Datum>) -> shale_sql::Result<()> {
        let cells: Vec<String> = row.iter().map(cell).collect();
        self.write(&cells.join("\t"))
    }
}

/// Runs `sql` (one or more statements); false after the first error.
pub fn run_text(
    session: &mut shale_sql::Session,
    sql: &str,
    first_line: usize,
    batch: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<bool> {
    let mut offset = 0;
    for stmt in shale_server::admin::lex::split_statements(sql) {
        let at = sql
            .get(offset..)
            .and_then(|rest| rest.find(stmt))
            .map_or(offset, |p| offset + p);
        let line = first_line + sql.get(..at).map_or(0, |p| p.matches('\n').count());
        offset = at + stmt.len();
        let started = Instant::now();
        // Batch output needs no column widths: rows print as they come
        // (a spilled ORDER BY streams from its merge, never held whole).
        let mut sink = BatchSink {
            out: &mut *out,
            failed: None,
        };
        let result = if batch {
            session.execute_streaming(stmt, &mut sink)
        } else {
            session.execute(stmt)
        };
        if let Some(e) = sink.failed.take() {
            return Err(e);
        }
        match result {
            Ok(Output::Rows { columns, .. }) if batch && columns.is_empty() => {}
            Ok(Output::Rows { columns, rows }) => {
                let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
                let cells: Vec<Vec<String>> =
                    rows.iter().map(|r| r.iter().map(cell).collect()).collect();
                if batch {
                    writeln!(out, "{}", names.join("\t"))?;
                    for r in &cells {
                        writeln!(out, "{}", r.join("\t"))?;
                    }
                } else if cells.is_empty() {
                    writeln!(
                        out,
                        "Empty set ({:.3} sec)\n",
                        started.elapsed().as_secs_f64()
                    )?;
                } else {
                    print_table(out, &names, &cells)?;
                    let n = cells.len();
                    writeln!(
                        out,
                        "{n} row{} in set ({:.3} sec)\n",
                        if n == 1 { "" } else { "s" },
                        started.elapsed().as_secs_f64()
                    )?;
                }
            }
            Ok(Output::Affected { rows, .. }) => {
                if !batch {
                    writeln!(
                        out,
                        "Query OK, {rows} row{} affected ({:.3} sec)\n",
                        if rows == 1 { "" } else { "s" },
                        started.elapsed().as_secs_f64()
                    )?;
                }
            }
            Err(e) => {
                writeln!(
                    err,
                    "ERROR {} ({}) at line {line}: {e}",
                    e.mysql_code(),
                    e.sqlstate()
                )?;
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// `shale sql`: `-e` text, or stdin read to its end.
pub fn run(db: shaledb::Db, execute: Option<String>, batch: bool) -> Result<bool, crate::CliError> {
    let sql = Database::open(db.clone()).map_err(|e| crate::CliError::Input(e.to_string()))?;
    let mut session = sql.session();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let ok = match execute {
        Some(text) => run_text(
            &mut session,
            &text,
            1,
            batch,
            &mut stdout.lock(),
            &mut stderr.lock(),
        )?,
        None if std::io::stdin().is_terminal() => repl(&mut session, batch)?,
        None => {
            let mut text = String::new();
            for line in std::io::stdin().lock().lines() {
                text.push_str(&line?);
                text.push('\n');
            }
            run_text(
                &mut session,
                &text,
                1,
                batch,
                &mut stdout.lock(),
                &mut stderr.lock(),
            )?
        }
    };
    drop(session);
    drop(sql);
    db.close()?;
    Ok(ok)
}

/// Whether `buf` ends with a statement terminator: a `;` outside quotes
/// and comments (a statement appended after it splits off on its own).
pub fn statement_complete(buf: &str) -> bool {
    let probe = format!("{buf}\nSELECT 1");
    buf.trim_end().ends_with(';')
        && shale_server::admin::lex::split_statements(&probe).last() == Some(&"SELECT 1")
}

/// The interactive shell (see the module docs).
fn repl(session: &mut shale_sql::Session, batch: bool) -> Result<bool, crate::CliError> {
    use rustyline::error::ReadlineError;
    let input = |e: ReadlineError| crate::CliError::Input(format!("terminal: {e}"));
    let mut editor = rustyline::DefaultEditor::new().map_err(input)?;
    let history =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".shale_sql_history"));
    if let Some(h) = &history {
        // A missing history file is the normal first run.
        let _ = editor.load_history(h);
    }
    println!(
        "ShaleDB {} SQL shell. End a statement with ';'; 'exit' or Ctrl-D leaves.",
        env!("CARGO_PKG_VERSION")
    );
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "shale> " } else { "    -> " };
        match editor.readline(prompt) {
            Ok(line) => {
                let word = line.trim().trim_end_matches(';').to_ascii_lowercase();
                if buf.is_empty() && matches!(word.as_str(), "exit" | "quit" | "\\q") {
                    break;
                }
                if buf.is_empty() && line.trim().is_empty() {
                    continue;
                }
                buf.push_str(&line);
                buf.push('\n');
                if statement_complete(&buf) {
                    // History is best effort; a full history is no error.
                    let _ = editor.add_history_entry(buf.trim_end());
                    run_text(
                        session,
                        &buf,
                        1,
                        batch,
                        &mut std::io::stdout().lock(),
                        &mut std::io::stderr().lock(),
                    )?;
                    buf.clear();
                }
            }
            Err(ReadlineError::Interrupted) => buf.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(input(e)),
        }
    }
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            eprintln!("warning: history not saved to {}: {e}", h.display());
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::statement_complete;

    #[test]
    fn statements_end_at_a_semicolon_outside_quotes_and_comments() {
        assert!(statement_complete("SELECT 1;"));
        assert!(statement_complete("SELECT 1;\n"));
        assert!(statement_complete("SELECT\n 'a;b';"));
        assert!(!statement_complete("SELECT 1"));
        assert!(!statement_complete("SELECT 'a;"));
        assert!(!statement_complete("SELECT 1 -- done;"));
        assert!(!statement_complete("SELECT 1 /* ; */"));
        assert!(statement_complete("SELECT 1; -- note\nSELECT 2;"));
    }
}
