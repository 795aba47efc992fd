use clap::Parser;

/// See the `mimalloc` line in Cargo.toml for why.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = zae_limiter::cli::Cli::parse();
    std::process::exit(zae_limiter::cli::run(cli));
}
