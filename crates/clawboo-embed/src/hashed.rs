//! The built-in embedder: no file, no network, deterministic across processes and
//! platforms. Features are lowercase words (lightly stemmed), word bigrams and character
//! trigrams of each word, hashed (FNV-1a) into signed buckets, then L2-normalised.

use crate::{EmbedError, Embedder, l2_normalize};

/// The built-in hashed embedder.
#[derive(Debug, Clone)]
pub struct HashedEmbedder {
    dim: usize,
    model_id: String,
}

/// The default vector length of [`HashedEmbedder`].
pub const HASHED_DIM: usize = 256;

impl Default for HashedEmbedder {
    fn default() -> Self {
        HashedEmbedder::new(HASHED_DIM)
    }
}

impl HashedEmbedder {
    /// A hashed embedder producing vectors of length `dim` (at least 1).
    pub fn new(dim: usize) -> HashedEmbedder {
        let dim = dim.max(1);
        HashedEmbedder {
            dim,
            model_id: format!("clawboo-hashed-v1-{dim}"),
        }
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let words: Vec<String> = words(text).map(stem).collect();
        let mut add = |feature: Fnv, weight: f32| {
            let h = feature.0;
            let bucket = (h % self.dim as u64) as usize;
            let sign = if (h >> 63) & 1 == 1 { -1.0 } else { 1.0 };
            v[bucket] += sign * weight;
        };
        // Features are hashed as they are streamed, never built as strings: the same
        // hashes as `format!("c:{gram}")` and friends, without an allocation per feature.
        let mut padded = String::new();
        let mut bounds = Vec::new();
        for word in &words {
            add(Fnv::default().write(b"w:").write(word.as_bytes()), 1.0);
            padded.clear();
            padded.push('<');
            padded.push_str(word);
            padded.push('>');
            bounds.clear();
            bounds.extend(padded.char_indices().map(|(i, _)| i));
            bounds.push(padded.len());
            for gram in bounds.windows(4) {
                let gram = &padded.as_bytes()[gram[0]..gram[3]];
                add(Fnv::default().write(b"c:").write(gram), 0.3);
            }
        }
        for pair in words.windows(2) {
            let feature = Fnv::default()
                .write(b"b:")
                .write(pair[0].as_bytes())
                .write(b" ")
                .write(pair[1].as_bytes());
            add(feature, 0.5);
        }
        l2_normalize(&mut v);
        v
    }
}

impl Embedder for HashedEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }

    fn is_semantic(&self) -> bool {
        false
    }

    fn is_cheap(&self) -> bool {
        true
    }
}

/// Lowercase alphanumeric words of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A light suffix stripper so `caching`, `cached` and `caches` share a feature.
fn stem(word: String) -> String {
    for suffix in ["ing", "ed", "es", "s"] {
        if word.len() > suffix.len() + 2 && word.ends_with(suffix) {
            return word[..word.len() - suffix.len()].to_string();
        }
    }
    word
}

/// 64-bit FNV-1a, fed piece by piece: stable across processes, platforms and Rust
/// versions. (Hand-written: a dozen lines, and the exact hash is part of the stored
/// vectors' format, so it must never change with a dependency.)
#[derive(Debug, Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(mut self, bytes: &[u8]) -> Fnv {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::dot;

    #[test]
    fn vectors_are_unit_length_deterministic_and_sized() {
        let e = HashedEmbedder::default();
        let a = e.embed(&["the deploy runs on Fridays", ""]).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].len(), HASHED_DIM);
        assert!((dot(&a[0], &a[0]) - 1.0).abs() < 1e-5);
        assert!(a[1].iter().all(|x| *x == 0.0));
        let b = e.embed(&["the deploy runs on Fridays"]).unwrap();
        assert_eq!(a[0], b[0]);
        assert_eq!(e.model_id(), "clawboo-hashed-v1-256");
        assert!(!e.is_semantic());
    }

    #[test]
    fn shared_words_score_higher_than_unrelated_text() {
        let e = HashedEmbedder::default();
        let v = e
            .embed(&[
                "database migrations run at startup",
                "migration of the database happens when starting",
                "the cat sat on a warm windowsill",
            ])
            .unwrap();
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2);
    }

    /// The features as first written (a string per feature, hashed whole): stored vectors
    /// were made this way, so the streamed hashing must give the very same vectors.
    fn embed_by_strings(dim: usize, text: &str) -> Vec<f32> {
        fn fnv1a(bytes: &[u8]) -> u64 {
            Fnv::default().write(bytes).0
        }
        let mut v = vec![0.0f32; dim];
        let words: Vec<String> = words(text).map(stem).collect();
        let mut add = |feature: &str, weight: f32| {
            let h = fnv1a(feature.as_bytes());
            let bucket = (h % dim as u64) as usize;
            let sign = if (h >> 63) & 1 == 1 { -1.0 } else { 1.0 };
            v[bucket] += sign * weight;
        };
        for word in &words {
            add(&format!("w:{word}"), 1.0);
            let padded: Vec<char> = format!("<{word}>").chars().collect();
            for gram in padded.windows(3) {
                let gram: String = gram.iter().collect();
                add(&format!("c:{gram}"), 0.3);
            }
        }
        for pair in words.windows(2) {
            add(&format!("b:{} {}", pair[0], pair[1]), 0.5);
        }
        l2_normalize(&mut v);
        v
    }

    #[test]
    fn streamed_features_give_the_stored_vectors() {
        let e = HashedEmbedder::default();
        for text in [
            "the deploy runs on Fridays",
            "Caching: cached caches, ÜBER-straße naïve café 日本語 x y",
            "a",
            "",
            "  --  ",
        ] {
            assert_eq!(
                e.embed_one(text),
                embed_by_strings(HASHED_DIM, text),
                "{text}"
            );
        }
        // FNV-1a's published test vector: the hash itself is part of the stored format.
        assert_eq!(Fnv::default().write(b"a").0, 0xaf63_dc4c_8601_ec8c);
    }
}
