//! Link the binaries with packed relative relocations (`DT_RELR`) on GNU/Linux: a
//! position-independent executable otherwise carries a 24-byte `.rela.dyn` entry per
//! pointer in its read-only data, all of which the loader reads at every start, so they
//! stay resident for nothing once started (docs/BENCHMARKS.md's git history). GNU ld ≥ 2.38,
//! lld and mold pack them; glibc ≥ 2.36 loads them. Older linkers ignore the option with a
//! warning.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
