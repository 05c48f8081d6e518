//! Exports the crate's `getrandom` (`src/entropy.rs`) from its test binaries, so that the
//! libraries looking libc's up by name at run time (getrandom 0.4, std) find it: only the
//! link of this crate's tests changes; no dependency is rebuilt, no other binary affected.

fn main() {
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=getrandom");
    println!("cargo:rerun-if-changed=build.rs");
}
