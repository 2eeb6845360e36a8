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

/// What the memory benchmarks' facts and queries are made of (`--corpus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Corpus {
    /// Every word drawn from one skewed vocabulary: no fact has closer neighbours than
    /// the rest, so any embedder's ten nearest are near-ties among thousands (the worst
    /// case for an approximate index).
    Random,
    /// Facts about subtopics of topics, each with words of its own beside the common
    /// ones, as a team's notes cluster by subject; a query asks about one subtopic.
    Topics,
}

impl Corpus {
    /// What its kept databases' names end with (nothing for the original corpus, so the
    /// databases kept before this option stay in use).
    fn suffix(self) -> &'static str {
        match self {
            Corpus::Random => "",
            Corpus::Topics => "-topics",
        }
    }
}

/// Topics of [`Corpus::Topics`], subtopics each, and the words each has of its own.
const TOPICS: usize = 100;
const SUBTOPICS: usize = 10;
const TOPIC_WORDS: usize = 30;
const SUBTOPIC_WORDS: usize = 12;

/// Word `k` of topic `topic`'s own words, or of its subtopic `sub`'s: a fixed draw from
/// the vocabulary.
fn topic_word(topic: usize, sub: Option<usize>, k: usize) -> usize {
    let list = topic * (SUBTOPICS + 1) + sub.map_or(0, |s| s + 1);
    Rng::new((list * 64 + k) as u64 ^ 0x7015_c0de).below(3000)
}

/// `words` words about `subtopic` (numbered over all topics): `own` in a hundred from its
/// own words, up to `topical` in a hundred from its topic's, the rest common words.
fn about(rng: &mut Rng, subtopic: usize, words: usize, own: usize, topical: usize) -> String {
    let (topic, sub) = (subtopic / SUBTOPICS, subtopic % SUBTOPICS);
    (0..words)
        .map(|_| {
            let roll = rng.below(100);
            word(if roll < own {
                topic_word(topic, Some(sub), rng.below(SUBTOPIC_WORDS))
            } else if roll < topical {
                topic_word(topic, None, rng.below(TOPIC_WORDS))
            } else {
                rng.below(3000).min(rng.below(3000))
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fact `i` of `corpus` as memory saves it.
pub fn corpus_fact(corpus: Corpus, rng: &mut Rng, i: usize) -> NewFact {
    match corpus {
        Corpus::Random => new_fact(rng, i),
        Corpus::Topics => {
            let subtopic = rng.below(TOPICS * SUBTOPICS);
            let (_, _, tag, team) = fact(&mut Rng::new(i as u64), i);
            NewFact {
                title: about(rng, subtopic, 4, 60, 90),
                content: about(rng, subtopic, 30, 40, 70),
                tags: vec![tag],
                team_id: team.map(str::to_owned),
                ..NewFact::default()
            }
        }
    }
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
    corpus: Corpus,
) -> anyhow::Result<BenchDb> {
    let name = format!("memory-{n}-{embeddings}{}", corpus.suffix());
    backend.kept(data_dir, &name, |db| {
        let store = Arc::new(db::open(db)?);
        let memory = Memory::new(Arc::clone(&store), embedder(embeddings)?);
        let mut rng = Rng::new(42);
        for i in 0..n {
            memory.save_fact(corpus_fact(corpus, &mut rng, i))?;
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

/// Three-word queries over the same vocabulary as `corpus`' facts; on
/// [`Corpus::Topics`] each about one subtopic.
pub fn queries(count: usize, corpus: Corpus) -> Vec<String> {
    let mut rng = Rng::new(99);
    (0..count)
        .map(|_| match corpus {
            Corpus::Random => sentence(&mut rng, 3),
            Corpus::Topics => {
                let subtopic = rng.below(TOPICS * SUBTOPICS);
                about(&mut rng, subtopic, 3, 70, 90)
            }
        })
        .collect()
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

    #[test]
    fn facts_of_a_subtopic_share_more_words_than_facts_of_two() {
        let words = |subtopic: usize, seed: u64| -> std::collections::HashSet<String> {
            about(&mut Rng::new(seed), subtopic, 30, 40, 70)
                .split(' ')
                .map(str::to_owned)
                .collect()
        };
        let (mut same, mut apart) = (0, 0);
        for seed in 0..50 {
            let one = words(seed as usize, seed);
            same += one.intersection(&words(seed as usize, seed + 100)).count();
            apart += one
                .intersection(&words(seed as usize + 500, seed + 100))
                .count();
        }
        assert!(
            same > 3 * apart,
            "{same} words shared within, {apart} across"
        );
        let queries = queries(3, Corpus::Topics);
        assert_eq!(queries, super::queries(3, Corpus::Topics));
        assert!(queries.iter().all(|q| q.split(' ').count() == 3));
    }
}
