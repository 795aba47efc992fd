use clap::FromArgMatches;

/// See the `mimalloc` line in Cargo.toml for why.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Parsed through `cli::command()`, not `Cli::parse()`: that is the tree
    // whose help prints examples verbatim.
    let matches = zae_limiter::cli::command().get_matches();
    let cli = zae_limiter::cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    std::process::exit(zae_limiter::commands::run(cli));
}
