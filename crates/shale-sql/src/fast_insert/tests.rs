#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::parse;
use proptest::prelude::*;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

fn general(sql: &str) -> sqlparser::ast::Statement {
    let mut v = Parser::parse_sql(&MySqlDialect {}, sql).unwrap();
    assert_eq!(v.len(), 1);
    v.pop().unwrap()
}

fn same_as_parser(sql: &str) {
    let fast = parse(sql).unwrap_or_else(|| panic!("not taken: {sql}"));
    assert_eq!(fast, general(sql), "{sql}");
}

#[test]
fn literal_rows_parse_as_the_parser_parses_them() {
    same_as_parser("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')");
    same_as_parser("insert into `t` (`a`,`b`) values(-1,'a''b'),(0.5,NULL),(TRUE, false)");
    same_as_parser("REPLACE INTO db.t VALUE (1,'\\n\\t\\Z\\0\\\\'), (2, '\\%\\_\\q')");
    same_as_parser("INSERT IGNORE INTO t VALUES (1, 'é\\é'), (2, '')");
    same_as_parser(
        "INSERT INTO t (id, k) VALUES (1, 2), (3, 4) ON DUPLICATE KEY UPDATE k = VALUES(k) + 1",
    );
    same_as_parser("INSERT INTO `values` (`select`) VALUES (1), (2)");
    same_as_parser("INSERT INTO t VALUES (1, 'x')");
}

/// The second statement with a head runs on the kept parse of the first.
#[test]
fn a_kept_head_parses_as_the_parser_parses() {
    let head = "INSERT INTO kept_head_test (id, k, c) VALUES ";
    same_as_parser(&format!("{head}(1, 2, 'a')"));
    assert!(super::TEMPLATES.read().contains_key(head));
    same_as_parser(&format!("{head}(3, -4, 'b''c'), (5, NULL, '')"));
    same_as_parser(&format!("{head}(6, 7, 'c')"));
    // A tail is parsed with its statement, not kept.
    same_as_parser(&format!("{head}(8, 9, 'd') ON DUPLICATE KEY UPDATE k = 1"));
}

#[test]
fn anything_but_literal_rows_is_left_to_the_parser() {
    for sql in [
        "INSERT INTO t VALUES (1 + 1, 'x'), (2, 'y')",
        "INSERT INTO t VALUES (1e5), (2)",
        "INSERT INTO t VALUES (0x1F), (2)",
        "INSERT INTO t VALUES (1 /* c */), (2)",
        "INSERT INTO t VALUES (\"x\"), ('y')",
        "INSERT INTO t VALUES ('a' 'b'), ('c')",
        "INSERT INTO t VALUES (_binary 'a'), ('c')",
        "INSERT INTO t VALUES (NOW()), (1)",
        "INSERT INTO t VALUES (), ()",
        "INSERT INTO t VALUES ('unterminated), (1)",
        "INSERT INTO t VALUES (1), 2",
        "INSERT INTO t SELECT * FROM u",
        "INSERT INTO t SET a = 1",
        "UPDATE t SET a = 1",
        "INSERT INTO t /* VALUES */ VALUES (1), (2)",
        "INSERT INTO t VALUES (1.), (2)",
    ] {
        assert!(parse(sql).is_none(), "{sql}");
    }
}

#[test]
fn a_tail_the_parser_refuses_is_refused() {
    assert!(parse("INSERT INTO t VALUES (1), (2) garbage here").is_none());
}

fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u32..100_000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        "[a-zA-Z0-9 '\\\\%_\"é,()\n\t]{0,12}".prop_map(|s| {
            // Quote it as a client would, plus a few raw escapes.
            let mut q = String::from("'");
            for c in s.chars() {
                match c {
                    '\'' => q.push_str("''"),
                    '\\' => q.push_str("\\\\"),
                    '\n' => q.push_str("\\n"),
                    c => q.push(c),
                }
            }
            q.push('\'');
            q
        }),
        "[a-z%_0-9'\\\\]{0,3}".prop_map(|s| format!("'\\{}'", s.replace('\'', "''"))),
        Just("NULL".to_owned()),
        Just("null".to_owned()),
        Just("TRUE".to_owned()),
        Just("False".to_owned()),
    ]
}

proptest! {
    #[test]
    fn random_rows_parse_as_the_parser_parses_them(
        rows in prop::collection::vec(prop::collection::vec(literal(), 3), 1..6),
        spaced in any::<bool>(),
    ) {
        let sep = if spaced { " , " } else { "," };
        let text: Vec<String> = rows.iter().map(|r| format!("({})", r.join(sep))).collect();
        let sql = format!("INSERT INTO t (a, b, c) VALUES {}", text.join(sep));
        let expected = Parser::parse_sql(&MySqlDialect {}, &sql);
        match (parse(&sql), expected) {
            (Some(fast), Ok(mut v)) => prop_assert_eq!(Some(fast), v.pop()),
            (Some(_), Err(e)) => prop_assert!(false, "taken but the parser refuses: {e}: {sql}"),
            (None, Ok(_)) => prop_assert!(false, "literal rows not taken: {sql}"),
            (None, Err(_)) => {}
        }
    }
}

#[test]
fn relations_of_a_bulk_insert_name_its_tables_once_walked() {
    let rel = |sql: &str| crate::relations(sql);
    assert_eq!(
        rel("INSERT INTO d.t (a) VALUES (1), (2), (3)"),
        vec![(Some("d".to_owned()), "t".to_owned())]
    );
    // Rows that are not all literals are walked: a subquery names a table.
    let r = rel("INSERT INTO t (a) VALUES (1), ((SELECT MAX(a) FROM u))");
    assert!(r.contains(&(None, "u".to_owned())), "{r:?}");
    assert!(r.contains(&(None, "t".to_owned())), "{r:?}");
}

/// A kept head's facts are what walking the whole statement gives, on the
/// statement that keeps the head and on the ones made from it; a statement
/// with a tail (parsed whole) carries none.
#[test]
fn head_facts_equal_walks_of_the_whole_statement() {
    for head in [
        "INSERT INTO facts_a (id, k) VALUES ",
        "INSERT INTO facts_db.facts_b VALUES ",
        "REPLACE INTO `facts_c` (`x`) VALUES ",
    ] {
        for rows in ["(1, 2)", "(3, 'x'), (-4, NULL)", "(5, 6)"] {
            let sql = format!("{head}{rows}");
            let (stmt, facts) = super::scan(&sql).unwrap().into_statement().unwrap();
            let facts = facts.unwrap_or_else(|| panic!("no facts: {sql}"));
            assert_eq!(
                *facts.relations,
                crate::session::relations_of(std::slice::from_ref(&stmt)),
                "{sql}"
            );
            assert_eq!(
                facts.reads_one_row_set,
                crate::lone_write::reads_one_row_set(&stmt),
                "{sql}"
            );
            assert!(facts.reads_one_row_set, "{sql}");
            assert!(!facts.relations.is_empty(), "{sql}");
        }
    }
    let with_tail = "INSERT INTO facts_a (id, k) VALUES (1, 2) ON DUPLICATE KEY UPDATE k = (SELECT 1 FROM facts_d)";
    let (_, facts) = super::scan(with_tail)
        .and_then(super::FastInsert::into_statement)
        .expect("a statement with a tail parses");
    assert!(facts.is_none(), "a tail may name tables: no kept facts");
}

#[test]
fn a_kept_head_comes_back_in_two_parts_with_the_parsers_rows() {
    let head = "INSERT INTO kept_parts_t (id, c) VALUES ";
    let first = format!("{head}(1, 'a')");
    assert!(matches!(
        super::scan(&first),
        Some(super::FastInsert::Parsed(..))
    ));
    let second = format!("{head}(2, 'b\\'c'), (-3, NULL)");
    let Some(super::FastInsert::Kept(template, rows)) = super::scan(&second) else {
        panic!("the second statement with the head is made from the kept head");
    };
    let mut parsed = Parser::parse_sql(&MySqlDialect {}, &second).unwrap();
    let parsed = parsed.pop().unwrap();
    let mut whole = template.stmt.clone();
    *super::values_of(&mut whole).unwrap() = rows;
    assert_eq!(whole, parsed);
}
