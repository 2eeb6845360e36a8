//! Data a benchmark starts from: boards, memory facts and chat rooms, written through the
//! store's own API (so the rows are what the servers would write), and a deterministic
//! text generator for fact contents and queries.

use std::path::Path;
use std::sync::Arc;

use clawboo_embed::Embedder;
use clawboo_embed::select::{EMBEDDINGS_ENV, EmbedConfig};
use clawboo_memory::{Memory, NewFact};
use clawboo_store::DbLocation;
use clawboo_store::board::{CreatePolicy, NewTask};
use clawboo_store::chat::{PostKind, team_room};

use crate::db::{self, Backend, BenchDb};

/// The team every seeded row belongs to.
pub const TEAM: &str = "bench";

/// A small deterministic generator (splitmix64), so every run sees the same data.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Word number `i` of a 3,000-word pseudo-vocabulary: syllables spelled from `i`'s digits.
fn word(i: usize) -> String {
    const ONSETS: [&str; 15] = [
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch",
    ];
    const VOWELS: [&str; 5] = ["a", "e", "i", "o", "u"];
    let mut n = i + 75; // at least two syllables
    let mut out = String::new();
    while n > 0 {
        let s = n % 75;
        out.push_str(ONSETS[s / 5]);
        out.push_str(VOWELS[s % 5]);
        n /= 75;
    }
    out
}

/// `words` words, skewed towards the front of the vocabulary as real word use is.
pub fn sentence(rng: &mut Rng, words: usize) -> String {
    (0..words)
        .map(|_| word(rng.below(3000).min(rng.below(3000))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The embedder a server started with `CLAWBOO_EMBEDDINGS=<embeddings>` uses, so seeded
/// vectors are the ones it would have written.
pub fn embedder(embeddings: &str) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let config = EmbedConfig::from_lookup(|name| {
        if name == EMBEDDINGS_ENV {
            Some(embeddings.to_owned())
        } else {
            std::env::var(name).ok()
        }
    })?;
    Ok(clawboo_embed::select::select(&config)?)
}

/// `n` todo tasks of team [`TEAM`] on `db`, created uncapped; their ids.
pub fn board(db: &DbLocation, n: usize) -> anyhow::Result<Vec<String>> {
    let store = db::open(db)?;
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let task = store.create_task(task(i), CreatePolicy::Uncapped)?;
        ids.push(task.id);
    }
    Ok(ids)
}

/// The bench's task `i`: in team [`TEAM`], of one of five priorities.
pub fn task(i: usize) -> NewTask {
    NewTask {
        title: format!("task {i}"),
        priority: Some((i % 5) as i64),
        team_id: Some(TEAM.into()),
        ..NewTask::default()
    }
}

/// `posts` chat posts in team [`TEAM`]'s room on `db`.
pub fn chat_room(db: &DbLocation, posts: usize) -> anyhow::Result<()> {
    let store = db::open(db)?;
    let room = team_room(TEAM);
    let mut rng = Rng::new(3);
    for i in 0..posts {
        let author = format!("agent-{}", i % 8);
        store.post_chat(&room, &author, PostKind::Peer, &sentence(&mut rng, 12))?;
    }
    Ok(())
}

/// A fact as the benchmarks save it: 4-word title, 30-word content, one of 50 tags; four
/// in five in team [`TEAM`] or another team, the rest global.
pub fn fact(rng: &mut Rng, i: usize) -> (String, String, String, Option<&'static str>) {
    const TEAMS: [&str; 4] = [TEAM, "beta", "gamma", "delta"];
    let title = sentence(rng, 4);
    let content = sentence(rng, 30);
    let team = (!i.is_multiple_of(5)).then(|| TEAMS[i % TEAMS.len()]);
    (title, content, format!("t{}", i % 50), team)
}

/// [`fact`] `i` as memory saves it.
pub fn new_fact(rng: &mut Rng, i: usize) -> NewFact {
    let (title, content, tag, team) = fact(rng, i);
    NewFact {
        title,
        content,
        tags: vec![tag],
        team_id: team.map(str::to_owned),
        ..NewFact::default()
    }
}

/// A database with `n` facts saved through `Memory::save_fact` with the embedder of
/// `embeddings`, its full-text index then merged as an idle server merges it, kept between
/// runs (seeding 100k facts takes minutes; searches only read).
pub fn memory_db(
    backend: &Backend,
    data_dir: &Path,
    n: usize,
    embeddings: &str,
) -> anyhow::Result<BenchDb> {
    backend.kept(data_dir, &format!("memory-{n}-{embeddings}"), |db| {
        let store = Arc::new(db::open(db)?);
        let memory = Memory::new(Arc::clone(&store), embedder(embeddings)?);
        let mut rng = Rng::new(42);
        for i in 0..n {
            memory.save_fact(new_fact(&mut rng, i))?;
        }
        // What a running server does once idle for a second after writing facts.
        clawboo_memory::merge_search_index(&store)?;
        Ok(())
    })
}

/// A board of `n` tasks kept between runs (the read workloads never change it).
pub fn board_db(backend: &Backend, data_dir: &Path, n: usize) -> anyhow::Result<BenchDb> {
    backend.kept(data_dir, &format!("board-{n}"), |db| board(db, n).map(drop))
}

/// Three-word queries over the same vocabulary as the facts.
pub fn queries(count: usize) -> Vec<String> {
    let mut rng = Rng::new(99);
    (0..count).map(|_| sentence(&mut rng, 3)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_distinct_and_sentences_repeatable() {
        let words: std::collections::HashSet<String> = (0..3000).map(word).collect();
        assert_eq!(words.len(), 3000);
        assert_eq!(sentence(&mut Rng::new(1), 5), sentence(&mut Rng::new(1), 5));
        assert_eq!(sentence(&mut Rng::new(1), 5).split(' ').count(), 5);
    }
}
