//! How well vector search finds what an exact scan finds: recall@10 of `memory_search`'s
//! vector mode (through pgvector's HNSW index where the store has it) against the exact
//! scan of every vector, over the kept bench corpus, in the bench team's scope.

use std::collections::HashSet;
use std::sync::Arc;

use clawboo_memory::{Memory, ScopeFilter, SearchMode, TeamFilter};

use crate::Env;
use crate::seed::{self, TEAM};

/// Flags of `clawboo-bench memory-recall`.
#[derive(clap::Args, Clone)]
pub struct RecallArgs {
    /// Facts in the corpus (the kept corpus of `stdio --tool memory-search`).
    #[arg(long, default_value_t = 10_000)]
    facts: usize,
    /// Queries compared.
    #[arg(long, default_value_t = 200)]
    queries: usize,
}

/// The hits compared per query.
const K: u32 = 10;

pub fn run(env: &Env, args: &RecallArgs) -> anyhow::Result<()> {
    let corpus = seed::memory_db(
        &env.backend,
        &env.data_dir,
        args.facts,
        &env.embeddings,
        env.corpus,
    )?;
    let store = Arc::new(crate::db::open(corpus.location())?);
    let memory = Memory::new(store, seed::embedder(&env.embeddings)?);
    let scope = ScopeFilter {
        team: TeamFilter::TeamOrGlobal(TEAM.into()),
        ..ScopeFilter::default()
    };
    let (mut found, mut as_near, mut expected) = (0usize, 0usize, 0usize);
    let (mut similarity_found, mut similarity_exact) = (0f64, 0f64);
    for query in seed::queries(args.queries, env.corpus) {
        let exact = memory.exact_vector_search(&query, &scope, K)?;
        let ids: HashSet<&str> = exact.iter().map(|(id, _)| id.as_str()).collect();
        let tenth = exact.last().map_or(0.0, |(_, score)| *score);
        let searched = memory.search(&query, Some(SearchMode::Vector), &scope, K)?;
        found += searched
            .hits
            .iter()
            .filter(|hit| ids.contains(hit.fact.id.as_str()))
            .count();
        // A hit as similar as the exact scan's last (to float precision) is as good an
        // answer: ties among near-equal neighbours are broken differently by the two paths.
        as_near += searched
            .hits
            .iter()
            .filter(|hit| hit.score >= tenth - 1e-6)
            .count()
            .min(exact.len());
        expected += exact.len();
        similarity_exact += exact.iter().map(|(_, score)| *score).sum::<f64>();
        similarity_found += searched.hits.iter().map(|hit| hit.score).sum::<f64>();
    }
    let ratio = |n: usize| {
        if expected == 0 {
            1.0
        } else {
            n as f64 / expected as f64
        }
    };
    let (recall, near) = (ratio(found), ratio(as_near));
    // How much of the exact answer's similarity the search's answer holds: where the
    // nearest facts are near-ties among many, missing one for another as near costs the
    // caller little, which recall alone does not tell.
    let similarity = if similarity_exact > 0.0 {
        similarity_found / similarity_exact
    } else {
        1.0
    };
    println!(
        "memory-recall facts={} corpus={:?} queries={} path={} recall@{K}={recall:.3} \
         (hits at least as similar as the exact {K}th: {near:.3}; similarity of the \
         hits against the exact {K}'s: {similarity:.4})",
        args.facts,
        env.corpus,
        args.queries,
        memory.vector_search().as_str()
    );
    Ok(())
}
