//! all-MiniLM-L6-v2 from `CLAWBOO_MINILM_DIR` (default `~/.clawboo/models/all-MiniLM-L6-v2`,
//! filled by `scripts/install-minilm.sh`). Without the files the test prints why it did not
//! run; with `CLAWBOO_REQUIRE_MINILM=1` (CI) missing files fail it.
#![allow(clippy::unwrap_used)]

use clawboo_embed::select::{EmbedConfig, minilm_files_present};
use clawboo_embed::{Embedder, MiniLmEmbedder, dot};

fn load() -> Option<MiniLmEmbedder> {
    let dir = EmbedConfig::from_env().unwrap().minilm_dir;
    if !minilm_files_present(&dir) {
        assert!(
            std::env::var("CLAWBOO_REQUIRE_MINILM").as_deref() != Ok("1"),
            "CLAWBOO_REQUIRE_MINILM=1 but the MiniLM files are missing from {}; run scripts/install-minilm.sh",
            dir.display()
        );
        eprintln!(
            "skipping: MiniLM files missing from {} (run scripts/install-minilm.sh)",
            dir.display()
        );
        return None;
    }
    Some(MiniLmEmbedder::load(&dir).unwrap())
}

#[test]
fn minilm_embeds_paraphrases_close_and_unrelated_text_far() {
    let Some(e) = load() else { return };
    assert_eq!(e.model_id(), "all-MiniLM-L6-v2");
    assert_eq!(e.dim(), 384);
    let v = e
        .embed(&[
            "The production database is backed up every night.",
            "Nightly snapshots are taken of the prod DB.",
            "My cat likes to sleep on the windowsill.",
            "",
        ])
        .unwrap();
    assert_eq!(v.len(), 4);
    for x in &v[..3] {
        assert_eq!(x.len(), 384);
        assert!((dot(x, x) - 1.0).abs() < 1e-4);
    }
    let related = dot(&v[0], &v[1]);
    let unrelated = dot(&v[0], &v[2]);
    assert!(related > 0.5, "related pair cosine {related}");
    assert!(unrelated < 0.2, "unrelated pair cosine {unrelated}");
    // Batched and single embeddings agree (padding does not leak into the mean).
    let single = e
        .embed(&["Nightly snapshots are taken of the prod DB."])
        .unwrap();
    assert!(dot(&single[0], &v[1]) > 0.9999);
}
