//! The catalogue against the live schema of both engines: every table a fully migrated
//! database holds is copied or derived, and a copied table has the same columns on both.
//! A migration that adds a table or a column without deciding how it travels fails here.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use clawboo_store::testing::TestStore;
use clawboo_store::{Store, StoreConfig};
use clawboo_transfer::catalogue::{COPIED, classify, is_derived_column};
use clawboo_transfer::schema;

fn config() -> StoreConfig {
    StoreConfig::default().with_extension(clawboo_memory::EXTENSION)
}

/// Every table of `store` the catalogue does not know, and the copied columns per table.
fn survey(store: &Store) -> (Vec<String>, Vec<(String, BTreeSet<String>)>) {
    store
        .read(|tx| {
            let engine = schema::engine(tx);
            let unknown = schema::tables(tx)?
                .into_iter()
                .filter_map(|t| classify(engine, &t).err())
                .collect();
            let mut columns = Vec::new();
            for table in COPIED {
                let found: BTreeSet<String> = schema::columns(tx, table.name)?
                    .into_iter()
                    .filter(|c| !is_derived_column(table.name, c))
                    .collect();
                columns.push((table.name.to_owned(), found));
            }
            Ok::<_, clawboo_store::StoreError>((unknown, columns))
        })
        .unwrap()
}

#[test]
fn every_table_of_both_engines_is_copied_or_derived() {
    let sqlite = TestStore::sqlite();
    let (unknown, sqlite_columns) = survey(&sqlite.store_with(config()));
    assert!(unknown.is_empty(), "{unknown:#?}");
    for (table, columns) in &sqlite_columns {
        assert!(
            !columns.is_empty(),
            "copied table {table} is missing on SQLite"
        );
        for key in COPIED.iter().find(|t| t.name == table).unwrap().key {
            assert!(columns.contains(*key), "{table} has no key column {key}");
        }
    }
    let Some(postgres) = TestStore::postgres() else {
        return;
    };
    let (unknown, postgres_columns) = survey(&postgres.store_with(config()));
    assert!(unknown.is_empty(), "{unknown:#?}");
    assert_eq!(
        sqlite_columns, postgres_columns,
        "a copied table has other columns on SQLite than on PostgreSQL"
    );
}

#[test]
fn a_table_in_neither_list_is_refused_by_name() {
    use clawboo_transfer::catalogue::Engine;
    let err = classify(Engine::Postgres, "path_reservations").unwrap_err();
    assert!(err.contains("path_reservations"), "{err}");
    assert!(err.contains("catalogue"), "{err}");
    assert_eq!(
        classify(Engine::Sqlite, "memory_facts_fts_docsize"),
        Ok(false)
    );
    assert!(classify(Engine::Postgres, "memory_facts_fts_docsize").is_err());
    assert_eq!(classify(Engine::Postgres, "tasks"), Ok(true));
}
