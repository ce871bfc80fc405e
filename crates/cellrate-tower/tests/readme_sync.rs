//! Code the README shows but cannot compile as a doc test (it needs
//! features the README's doc tests are not built with, or it serves
//! forever) is a copy of an example that CI builds; this keeps the copy
//! equal to the example.

const README: &str = include_str!("../README.md");

/// The first ```` ```rust,ignore ```` block after `marker` in the README.
fn readme_block(marker: &str) -> &'static str {
    let at = README
        .find(marker)
        .unwrap_or_else(|| panic!("README no longer mentions {marker}"));
    let rest = &README[at..];
    let open = "```rust,ignore\n";
    let start = rest
        .find(open)
        .expect("a rust,ignore block after the marker")
        + open.len();
    let len = rest[start..].find("```\n").expect("the block closes");
    &rest[start..start + len]
}

/// The example's code without its leading `//!` doc lines.
fn example_code(source: &str) -> String {
    source
        .lines()
        .skip_while(|l| l.starts_with("//!"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn the_readme_axum_quick_start_is_the_example() {
    let example = example_code(include_str!("../examples/axum_quickstart.rs"));
    assert_eq!(
        readme_block("(`examples/axum_quickstart.rs`"),
        example,
        "README's axum quick start differs from examples/axum_quickstart.rs"
    );
}
