/// See the `mimalloc` line in Cargo.toml for why.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = match zae_limiter::cli::args::parse(std::env::args_os()) {
        Ok(cli) => zae_limiter::commands::run(cli),
        Err(code) => code,
    };
    std::process::exit(code);
}
